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

3. Lowering time quadratic in a block's statements. numba-cuda's
`Lower._find_singly_assigned_variable` scans every assignment of a block once per variable
the block defines; a contraction kernel's unrolled k steps are blocks of ~700 statements,
so that scan was about a third of compiling one. `linear_singly_assigned_variables()`
counts each block's assignments once; the set it finds is the same. Guarded by
`LOWERING_LAST_CHECKED`.
"""

from __future__ import annotations

import importlib.metadata
import threading
import warnings
from typing import Any

import numpy as np

LAST_AFFECTED = (0, 30)  # numba-cuda (major, minor) releases that reference np.row_stack
SIMULATOR_LAST_CHECKED = (0, 30)  # numba-cuda releases whose simulator polls its threads
LOWERING_LAST_CHECKED = (0, 30)  # numba-cuda releases with the quadratic scan (item 3)


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


def linear_singly_assigned_variables() -> bool:
    """Replace numba-cuda's quadratic search for singly-assigned variables (module
    docstring, item 3) by one pass per block; True if it patched. Idempotent."""
    version = numba_cuda_version()
    if version is None or version > LOWERING_LAST_CHECKED:
        return False
    from collections import Counter, defaultdict

    from numba.cuda.core import ir
    from numba.cuda.core.analysis import compute_use_defs, must_use_alloca
    from numba.cuda.lowering import Lower

    if getattr(Lower._find_singly_assigned_variable, "tessc_patched", False):
        return True

    def find_singly_assigned_variable(lower: Any) -> None:
        blocks = lower.func_ir.blocks
        found: set[str] = set()
        if not lower.func_ir.func_id.is_generator:
            use_defs = compute_use_defs(blocks)
            alloca_vars = must_use_alloca(blocks)
            defined_in: defaultdict[str, set[int]] = defaultdict(set)
            for label, names in use_defs.defmap.items():
                for name in names:
                    defined_in[name].add(label)
            used_in: defaultdict[str, set[int]] = defaultdict(set)
            for label, names in use_defs.usemap.items():
                for name in names:
                    used_in[name].add(label)
            assignments: dict[int, Counter[str]] = {}
            for name, labels in defined_in.items():
                if name in alloca_vars or len(labels) != 1 or used_in[name]:
                    continue
                (label,) = labels
                if label not in assignments:
                    statements = lower.blocks[label].find_insts(ir.assign_types)
                    assignments[label] = Counter(s.target.name for s in statements)
                if assignments[label][name] == 1:
                    found.add(name)
        lower._singly_assigned_vars = found
        lower._blk_local_varmap = {}

    find_singly_assigned_variable.tessc_patched = True  # type: ignore[attr-defined]
    Lower._find_singly_assigned_variable = find_singly_assigned_variable  # type: ignore[method-assign]
    return True
