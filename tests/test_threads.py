"""`tessc.runtime.threads`: shares of an iteration range, one per thread."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from tessc.runtime import threads
from tessc.runtime.threads import parallel_for, shares, thread_count


@pytest.mark.parametrize(("extent", "threads"), [(10, 3), (2, 8), (1, 1), (7, 7), (1000, 2)])
def test_shares_cover_the_range_once(extent: int, threads: int) -> None:
    parts = shares(extent, threads)
    assert len(parts) == min(extent, threads)
    assert parts[0][0] == 0 and parts[-1][1] == extent
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    sizes = [hi - lo for lo, hi in parts]
    assert max(sizes) - min(sizes) <= 1


def test_parallel_for_runs_every_share_with_the_arguments(monkeypatch) -> None:
    monkeypatch.setattr(threads, "thread_count", lambda: 3)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: limit)  # however loaded
    seen: list[tuple[int, int, str, str]] = []
    lock = threading.Lock()

    def kernel(lo: int, hi: int, tag: str) -> None:
        with lock:
            seen.append((lo, hi, tag, threading.current_thread().name))

    parallel_for(kernel, 9, "x")
    assert sorted(s[:3] for s in seen) == [(0, 3, "x"), (3, 6, "x"), (6, 9, "x")]
    assert sum(name.startswith("tessc") for *_, name in seen) == 2  # the caller runs one


def test_an_error_in_a_share_reaches_the_caller(monkeypatch) -> None:
    monkeypatch.setattr(threads, "thread_count", lambda: 2)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: limit)  # however loaded

    def kernel(lo: int, hi: int) -> None:
        if lo > 0:
            raise ValueError(f"share {lo}")

    with pytest.raises(ValueError, match="share 2"):
        parallel_for(kernel, 4)


def test_launches_from_several_threads_take_turns(monkeypatch) -> None:
    monkeypatch.setattr(threads, "thread_count", lambda: 2)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: limit)  # however loaded
    totals = [0] * 4
    lock = threading.Lock()

    def kernel(lo: int, hi: int, slot: int) -> None:
        with lock:
            totals[slot] += hi - lo

    def launches(slot: int) -> None:
        for _ in range(200):
            parallel_for(kernel, 10, slot)

    callers = [threading.Thread(target=launches, args=(slot,)) for slot in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=60)
    assert totals == [2000] * 4  # every share of every launch ran once, none lost


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_starts_workers_of_its_own(monkeypatch) -> None:
    monkeypatch.setattr(threads, "thread_count", lambda: 2)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: limit)  # however loaded
    seen: list[int] = []
    parallel_for(lambda lo, hi: seen.append(lo), 2)  # the parent's workers started
    pid = os.fork()
    if pid == 0:  # the parent's workers are not in the child: it must not wait for them
        done: list[int] = []
        parallel_for(lambda lo, hi: done.append(lo), 2)
        os._exit(0 if sorted(done) == [0, 1] else 1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    pytest.fail("the forked child's launch hung")


def test_thread_count_is_numba_num_threads_before_numba_starts_its_threads(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "numba.np.ufunc.parallel", None)  # not imported yet
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    assert thread_count() == 3


def test_thread_count_follows_numba_set_num_threads() -> None:
    # A user (or bench/bench_matmul.py's one-thread table) limiting Numba's threads limits
    # tessc's threaded kernels too.
    import numba

    numba.set_num_threads(1)
    try:
        assert thread_count() == 1
        seen: list[tuple[int, int]] = []
        parallel_for(lambda lo, hi: seen.append((lo, hi)), 8)
        assert seen == [(0, 8)]
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert thread_count() == numba.config.NUMBA_NUM_THREADS


@pytest.mark.parametrize(
    ("running", "limit", "expected"), [(1, 2, 2), (2, 2, 1), (9, 4, 1), (1, 1, 1)]
)
def test_idle_threads_leaves_out_the_cores_other_tasks_hold(
    monkeypatch, tmp_path, running: int, limit: int, expected: int
) -> None:
    monkeypatch.delenv("TESSC_ALL_THREADS", raising=False)
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"5.29 4.68 3.12 {running}/173 2127\n")
    monkeypatch.setattr(threads, "LOADAVG", str(loadavg))
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1})
    assert threads.idle_threads(limit) == expected


def test_idle_threads_without_loadavg_is_the_limit(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("TESSC_ALL_THREADS", raising=False)
    monkeypatch.setattr(threads, "LOADAVG", str(tmp_path / "missing"))
    assert threads.idle_threads(3) == 3


def test_parallel_for_runs_in_the_caller_when_no_other_core_is_idle(monkeypatch) -> None:
    monkeypatch.setattr(threads, "thread_count", lambda: 2)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: 1)
    seen: list[tuple[int, int, str]] = []
    parallel_for(lambda lo, hi: seen.append((lo, hi, threading.current_thread().name)), 6)
    assert seen == [(0, 6, threading.current_thread().name)]


def test_a_host_runs_its_parfors_on_the_idle_threads_and_restores_the_count(
    monkeypatch,
) -> None:
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread")
    numba.set_num_threads(2)
    monkeypatch.setattr(threads, "idle_threads", lambda limit: 1)
    host = threads.with_idle_threads(lambda x: (x, numba.get_num_threads()))
    assert host(7) == (7, 1)
    assert numba.get_num_threads() == 2


def test_all_threads_asked_for(monkeypatch, tmp_path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("9.0 9.0 9.0 9/99 1\n")
    monkeypatch.setattr(threads, "LOADAVG", str(loadavg))
    monkeypatch.setenv("TESSC_ALL_THREADS", "1")
    assert threads.idle_threads(2) == 2
    monkeypatch.delenv("TESSC_ALL_THREADS")
    assert threads.idle_threads(2) == 1


def test_the_running_count_is_read_once_per_interval(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("TESSC_ALL_THREADS", raising=False)
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.1 0.1 0.1 1/99 1\n")
    monkeypatch.setattr(threads, "LOADAVG", str(loadavg))
    clock = [10**12]
    monkeypatch.setattr(threads.time, "monotonic_ns", lambda: clock[0])
    assert threads.running_tasks() == 1
    loadavg.write_text("9.0 9.0 9.0 5/99 1\n")
    clock[0] += threads.LOADAVG_INTERVAL_NS - 1
    assert threads.running_tasks() == 1  # the sample still serves
    clock[0] += 1
    assert threads.running_tasks() == 5


def test_a_host_with_every_thread_idle_leaves_the_count_alone(monkeypatch) -> None:
    import numba

    calls: list[int] = []
    monkeypatch.setattr(threads, "idle_threads", lambda limit: limit)
    monkeypatch.setattr(numba, "set_num_threads", lambda n: calls.append(n))
    host = threads.with_idle_threads(lambda x: x + 1)
    assert host(1) == 2
    assert calls == []
