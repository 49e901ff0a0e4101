"""The simulator patch of `tessc.runtime.numba_cuda_compat.wake_simulator_on_barriers`: blocks
wait on a condition instead of polling, with numba-cuda's barrier semantics kept."""

from __future__ import annotations

import os

import numpy as np
import pytest
from numba import cuda

from tessc.runtime.numba_cuda_compat import wake_simulator_on_barriers

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="a patch of the simulator"
)


def test_the_patch_is_applied_once() -> None:
    from numba.cuda.simulator import kernel as simulator

    assert wake_simulator_on_barriers() and wake_simulator_on_barriers()
    assert simulator.BlockManager.run.tessc_patched


@cuda.jit
def tree_sum(values, out):  # type: ignore[no-untyped-def]
    shared = cuda.shared.array(16, np.float64)
    i = cuda.threadIdx.x
    shared[i] = values[cuda.blockIdx.x * 16 + i]
    cuda.syncthreads()
    step = 8
    while step > 0:
        if i < step:
            shared[i] += shared[i + step]
        cuda.syncthreads()  # every thread, each round: a shared-memory race without it
        step //= 2
    if i == 0:
        out[cuda.blockIdx.x] = shared[0]


def test_barriers_order_shared_memory_in_every_block() -> None:
    values = np.arange(48, dtype=np.float64)
    out = np.zeros(3)
    tree_sum[3, 16](values, out)
    np.testing.assert_array_equal(out, values.reshape(3, 16).sum(axis=1))


@cuda.jit
def early_exit_then_barrier(out):  # type: ignore[no-untyped-def]
    i = cuda.threadIdx.x
    if i >= 4:
        return  # the others' barrier is released once these have ended, as numba-cuda does
    cuda.syncthreads()
    out[i] = i


def test_a_barrier_after_some_threads_ended_is_released() -> None:
    out = np.full(8, -1.0)
    early_exit_then_barrier[1, 8](out)
    np.testing.assert_array_equal(out, [0, 1, 2, 3, -1, -1, -1, -1])


@cuda.jit
def fails_in_one_thread(values):  # type: ignore[no-untyped-def]
    i = cuda.threadIdx.x
    cuda.syncthreads()
    values[i + 8 * (i == 3)] = 1.0  # thread 3 writes out of bounds


def test_a_thread_error_aborts_the_block_and_names_the_thread() -> None:
    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\]"):
        fails_in_one_thread[1, 8](np.zeros(8))
