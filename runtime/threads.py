"""
`parallel_for(kernel, extent, *args)`: run a threaded kernel over `range(extent)` on all
threads, the parallel form of a large kernel that costs no Numba parfor.

Numba's `parallel=True` turns a `prange` into a parfor: a gufunc compiled apart from the
function, a scheduler and a threading layer to start. For one elementwise kernel on 2^24
floats (issue 12's W1) that is 0.46 s of a cold compile, against 0.18 s for the same loop
serial. So codegen (`tessc.lowering.codegen.to_numba`) may emit a kernel whose one parallel loop
runs `range(lo, hi)` instead, compiled `nogil=True` like any serial function, and a host in
plain Python that launches it here: the caller's thread and `threads - 1` workers each run
one contiguous share of the iterations, Numba releasing the GIL for the kernel's duration.

The number of threads is Numba's: `numba.get_num_threads()` once its threading layer is up
(so `numba.set_num_threads(n)` limits tessc's threaded kernels as it does parfors), else
`NUMBA_NUM_THREADS`, the machine's CPU count unless set;
the workers are daemon threads started on first use and shared by every module (a forked
child starts its own), each woken through a plain lock. A launch costs tens of
microseconds (an empty two-thread launch 60 us on this 2-core VM, most of it waking the
idle core; Numba's passive parfor 46 us), which is why codegen keeps kernels below its
parallel threshold serial. Launches from several threads take turns. An exception in
any share is raised in the caller after all have ended.

On a machine whose cores other work holds, a share handed to a worker waits for a core and
the launch waits for it. So each launch (and each call of a host running parfors,
`with_idle_threads`) takes only the threads that have a core now (`idle_threads`: the
running count of /proc/loadavg), and Numba's OpenMP workers sleep instead of spinning
(`start_numba_threads`). On 2 cores under a load of ~5, the transformer block step
(bench/bench_transformer.py) on 2 threads took 63 ms wall and 31 ms CPU with Numba's
OpenMP defaults, 5.4 ms with passive workers alone, 3.4 ms with both (1 thread: 3.2 ms).
`TESSC_ALL_THREADS=1` keeps every thread. The running count is read at most once a
millisecond (`LOADAVG_INTERVAL_NS`): the kernel refreshes it every few seconds anyway, and
reading it cost ~10 µs, a step's worth of small kernels.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

LOADAVG = "/proc/loadavg"
"""Linux's load figures; the fourth field is `running/total` tasks."""

LOADAVG_INTERVAL_NS = 1_000_000
"""How long a read of LOADAVG's running count serves later launches."""

_running_sample: tuple[str, int, int | None] = ("", -LOADAVG_INTERVAL_NS, None)

_pool: list[_Worker] = []
_launch = threading.Lock()
"""Held by the launch using the workers: launches from several threads take turns."""


def _numba_threads_started() -> bool:
    """Whether Numba's threading layer has started, read without starting it. Numba has no
    public flag for it: its module's `_is_initialized` (False where a Numba lacks it)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return parallel is not None and bool(getattr(parallel, "_is_initialized", False))


def thread_count() -> int:
    """Numba's thread count, read without starting its threading layer."""
    if _numba_threads_started():
        # Started (by a parfor or set_num_threads): honour the caller's set_num_threads.
        return int(sys.modules["numba"].get_num_threads())
    configured = os.environ.get("NUMBA_NUM_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return os.cpu_count() or 1


def running_tasks() -> int | None:
    """The runnable tasks LOADAVG counts (the calling thread included), read at most once
    per `LOADAVG_INTERVAL_NS`; None where it cannot be read."""
    global _running_sample
    path, stamp, running = _running_sample
    now = time.monotonic_ns()
    if path == LOADAVG and now - stamp < LOADAVG_INTERVAL_NS:
        return running
    try:
        descriptor = os.open(LOADAVG, os.O_RDONLY)
        try:
            running = int(os.read(descriptor, 128).split()[3].split(b"/")[0])
        finally:
            os.close(descriptor)
    except (OSError, ValueError, IndexError):
        running = None
    _running_sample = (LOADAVG, now, running)
    return running


def idle_threads(limit: int) -> int:
    """How many of `limit` threads would each have a core now: the CPUs this process may
    use, less the other runnable tasks (`running_tasks`), at least 1. `limit` where the
    count cannot be read, or where `TESSC_ALL_THREADS=1` asks for every thread (a
    dedicated machine; the test suite)."""
    if os.environ.get("TESSC_ALL_THREADS") == "1":
        return limit
    running = running_tasks()
    if running is None:
        return limit
    return max(1, min(limit, len(os.sched_getaffinity(0)) - (running - 1)))


def start_numba_threads() -> None:
    """Start Numba's threading layer with OpenMP's workers waiting passively (GNU OpenMP
    spins ~300,000 turns after each parallel region by default: on a shared machine the
    spinning worker takes the core the caller's next serial kernel needs). The setting is
    read once, when the layer's OpenMP library loads; the environment is restored after,
    so an OpenMP library loaded later (PyTorch's) keeps its own default."""
    import numba

    if _numba_threads_started():
        return
    previous = os.environ.get("OMP_WAIT_POLICY")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        numba.get_num_threads()  # Numba's public call that starts its threading layer
    finally:
        if previous is None:
            del os.environ["OMP_WAIT_POLICY"]


def with_idle_threads(host: Callable[..., Any]) -> Callable[..., Any]:
    """`host` (a compiled function running parfors), each call running them on the
    threads `idle_threads` finds of Numba's current count, which is then restored."""
    import numba

    start_numba_threads()

    def call(*args: Any) -> Any:
        limit = numba.get_num_threads()
        idle = idle_threads(limit) if limit > 1 else limit
        if idle == limit:
            return host(*args)
        numba.set_num_threads(idle)
        try:
            return host(*args)
        finally:
            numba.set_num_threads(limit)

    call.__wrapped__ = host  # type: ignore[attr-defined]
    call.py_func = getattr(host, "py_func", host)  # type: ignore[attr-defined]  # profiling
    return call


class _Worker:
    """A daemon thread running one share per launch: released through `go`, it runs `job`
    and releases `done`. Two plain locks, not `ThreadPoolExecutor`'s futures (a condition
    variable and a queue in Python each): an empty two-thread launch cost 91 us there."""

    def __init__(self) -> None:
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.job: tuple[Callable[..., Any], int, int, tuple[Any, ...]] | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._serve, name="tessc-worker", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self.go.acquire()
            assert self.job is not None
            kernel, lo, hi, args = self.job
            self.job = None
            try:
                kernel(lo, hi, *args)
            except BaseException as error:  # raised in the launching thread
                self.error = error
            # Nothing of the launch stays referenced while the worker waits: an output
            # array the caller drops must be free for `output_cache` to hand out again.
            del kernel, args
            self.done.release()


def _workers(count: int) -> list[_Worker]:
    """`count` workers (more started where there are fewer); call with `_launch` held."""
    while len(_pool) < count:
        _pool.append(_Worker())
    return _pool[:count]


def _forget_workers() -> None:
    """In a forked child: the parent's workers do not exist there."""
    global _launch
    _pool.clear()
    _launch = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def shares(extent: int, threads: int) -> list[tuple[int, int]]:
    """`range(extent)` cut into `threads` contiguous `(lo, hi)` shares, sizes within one."""
    threads = max(1, min(threads, extent))
    bounds = [extent * k // threads for k in range(threads + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def parallel_for(kernel: Callable[..., Any], extent: int, *args: Any) -> None:
    """`kernel(lo, hi, *args)` for shares `(lo, hi)` of `range(extent)`, one per thread."""
    parts = shares(extent, idle_threads(thread_count()))
    if len(parts) == 1:
        kernel(0, extent, *args)
        return
    with _launch:
        workers = _workers(len(parts) - 1)
        for worker, (lo, hi) in zip(workers, parts[1:], strict=True):
            worker.job, worker.error = (kernel, lo, hi, args), None
            worker.go.release()
        try:
            kernel(parts[0][0], parts[0][1], *args)
        finally:
            for worker in workers:
                worker.done.acquire()
        errors = [worker.error for worker in workers]
        for worker in workers:
            worker.error = None  # its traceback holds the launch's arguments
    for error in errors:
        if error is not None:
            raise error


__all__ = [
    "LOADAVG",
    "idle_threads",
    "parallel_for",
    "running_tasks",
    "shares",
    "start_numba_threads",
    "thread_count",
    "with_idle_threads",
]
