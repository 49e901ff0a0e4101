"""
numba-cuda's patches, each version-guarded, all in this module.

1. NumPy releases newer than numba-cuda knows.

numba-cuda 0.30.4 (the newest release, 2026-11) registers an overload for `np.row_stack`
when its CUDA target loads (`numba_cuda/numba/cuda/np/arrayobj.py`, unguarded; Numba's CPU
target guards the same line). NumPy 2.5 removed `row_stack`, an alias of `vstack` since
2.0, so under NumPy >= 2.5 the first `from numba import cuda` fails with an AttributeError
and the `cuda` target cannot start. `restore_numpy_row_stack()` gives NumPy the alias back
before numba-cuda loads, and only when both sides need it: a NumPy without `row_stack` and
a numba-cuda no newer than `LAST_AFFECTED` (re-check this when numba-cuda releases).

2. The simulator's block scheduler. numba-cuda's `BlockManager.run` (simulator/kernel.py)
polls its threads in a loop until all are blocked in `syncthreads` or done: the polling
thread holds the GIL about half the time, so a simulated launch ran at roughly half speed
(6 million `is_alive` calls for one 6-launch training step). `wake_simulator_on_barriers()`
replaces the poll with a condition variable that each thread notifies when it reaches a
barrier or ends; which threads a barrier releases, and how a thread's exception aborts the
others, stay as numba-cuda has them. Guarded by `SIMULATOR_LAST_CHECKED`.
"""

from __future__ import annotations

import importlib.metadata
import threading
import warnings
from typing import Any

import numpy as np

LAST_AFFECTED = (0, 30)  # numba-cuda (major, minor) releases that reference np.row_stack
SIMULATOR_LAST_CHECKED = (0, 30)  # numba-cuda releases whose simulator polls its threads


def numba_cuda_version() -> tuple[int, ...] | None:
    try:
        text = importlib.metadata.version("numba-cuda")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def numpy_has_row_stack() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(np, "row_stack", None) is not None


def restore_numpy_row_stack() -> bool:
    """Alias `np.row_stack` to `np.vstack` where numba-cuda needs it; True if it did."""
    version = numba_cuda_version()
    if version is None or version > LAST_AFFECTED or numpy_has_row_stack():
        return False
    np.row_stack = np.vstack  # type: ignore[attr-defined]
    return True


def wake_simulator_on_barriers() -> bool:
    """Make the CUDA simulator's blocks wait on a condition instead of polling their threads
    (numba-cuda <= `SIMULATOR_LAST_CHECKED`); True if it patched. Idempotent."""
    version = numba_cuda_version()
    if version is None or version > SIMULATOR_LAST_CHECKED:
        return False
    from numba.cuda.simulator import kernel as simulator

    if getattr(simulator.BlockManager.run, "tessc_patched", False):
        return True
    thread_class = simulator.BlockThread
    run_thread = thread_class.run

    def run_then_notify(thread: Any) -> None:
        try:
            run_thread(thread)
        finally:
            manager = thread._manager
            with manager.tessc_condition:
                manager.tessc_finished += 1
                manager.tessc_condition.notify()

    def syncthreads(thread: Any) -> None:
        if thread.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        manager = thread._manager
        with manager.tessc_condition:
            thread.syncthreads_blocked = True
            manager.tessc_blocked += 1
            manager.tessc_condition.notify()
        thread.syncthreads_event.wait()
        thread.syncthreads_event.clear()
        if thread.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run_block(manager: Any, grid_point: Any, *args: Any) -> None:
        manager.tessc_condition = condition = threading.Condition()
        manager.tessc_blocked = manager.tessc_finished = 0
        points = np.ndindex(*manager._block_dim)
        target = lambda: manager._f(*args)  # noqa: E731
        threads = [thread_class(target, manager, grid_point, p, manager._debug) for p in points]
        for thread in threads:
            thread.start()
        with condition:
            while True:
                # Every thread is at a barrier or done: release the barrier, or end the block.
                condition.wait_for(
                    lambda: manager.tessc_blocked + manager.tessc_finished == len(threads)
                )
                failed = next((t for t in threads if t.exception), None)
                if failed is not None:
                    for other in threads:
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise failed.exception[0].with_traceback(failed.exception[1])
                if manager.tessc_finished == len(threads):
                    return
                manager.tessc_blocked = 0
                for thread in threads:
                    if thread.syncthreads_blocked:
                        thread.syncthreads_blocked = False
                        thread.syncthreads_event.set()

    run_block.tessc_patched = True  # type: ignore[attr-defined]
    thread_class.run = run_then_notify
    thread_class.syncthreads = syncthreads
    simulator.BlockManager.run = run_block
    return True
