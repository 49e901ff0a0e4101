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
the workers are daemon threads started on first use and shared by every module. A launch
costs a few tens of microseconds, which is why codegen keeps kernels below its parallel
threshold serial. An exception in any share is raised in the caller after all have ended.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_pool: ThreadPoolExecutor | None = None
_size = 0
_lock = threading.Lock()


def thread_count() -> int:
    """Numba's thread count, read without starting its threading layer."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and parallel._is_initialized:
        # Started (by a parfor or set_num_threads): honour the caller's set_num_threads.
        return int(parallel.get_num_threads())
    configured = os.environ.get("NUMBA_NUM_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return os.cpu_count() or 1


def _workers(count: int) -> ThreadPoolExecutor:
    """A pool of at least `count` workers (a larger one replaces a smaller one)."""
    global _pool, _size
    with _lock:
        if _pool is None or _size < count:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _size = ThreadPoolExecutor(count, thread_name_prefix="tessc"), count
        return _pool


def shares(extent: int, threads: int) -> list[tuple[int, int]]:
    """`range(extent)` cut into `threads` contiguous `(lo, hi)` shares, sizes within one."""
    threads = max(1, min(threads, extent))
    bounds = [extent * k // threads for k in range(threads + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def parallel_for(kernel: Callable[..., Any], extent: int, *args: Any) -> None:
    """`kernel(lo, hi, *args)` for shares `(lo, hi)` of `range(extent)`, one per thread."""
    parts = shares(extent, thread_count())
    if len(parts) == 1:
        kernel(0, extent, *args)
        return
    pool = _workers(len(parts) - 1)
    futures: list[Future[Any]] = [pool.submit(kernel, lo, hi, *args) for lo, hi in parts[1:]]
    try:
        kernel(parts[0][0], parts[0][1], *args)
    finally:
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error


__all__ = ["parallel_for", "shares", "thread_count"]
