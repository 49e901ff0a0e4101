"""`tessc.runtime.threads`: shares of an iteration range, one per thread."""

from __future__ import annotations

import sys
import threading

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

    def kernel(lo: int, hi: int) -> None:
        if lo > 0:
            raise ValueError(f"share {lo}")

    with pytest.raises(ValueError, match="share 2"):
        parallel_for(kernel, 4)


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
