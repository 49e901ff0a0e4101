"""Split-bf16 master weights on the cuda target (in the simulator): SGD, Adagrad and Lamb
with `master_weights="split"` rebuild, update and split the fp32 masters in their device
kernels, and the masters equal those of the same optimizer run on fp32 masters on the
cuda target, bit for bit, over several steps (tests/test_split_lamb.py on the cpu)."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import tessc as ts
from tessc.runtime.cuda import is_device_array

BF16 = np.dtype(ml_dtypes.bfloat16)
SHAPES = [(1,), (5,), (3, 4), (37,)]
STEPS = 3

OPTIMIZERS: dict[str, Callable[..., ts.optim.Optimizer]] = {
    "lamb": lambda **k: ts.optim.Lamb(lr=0.01, **k),
    "lamb-no-decay": lambda **k: ts.optim.Lamb(lr=0.05, betas=(0.8, 0.99), weight_decay=0.0, **k),
    "sgd": lambda **k: ts.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, **k),
    "adagrad": lambda **k: ts.optim.Adagrad(lr=0.1, weight_decay=0.01, **k),
}


def _host(tree: dict) -> dict[str, np.ndarray]:
    return {k: v.copy_to_host() for k, v in tree.items()}


def _device(tree: dict[str, np.ndarray]) -> dict:
    return {k: cuda.to_device(v) for k, v in tree.items()}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_split_step_on_cuda_equals_the_fp32_cuda_step_bit_for_bit(name: str) -> None:
    rng = np.random.default_rng(1)
    masters = {f"p{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)}
    split, plain = OPTIMIZERS[name](master_weights="split"), OPTIMIZERS[name]()
    tops, trail = ts.optim.split_params(masters)
    params = _device(tops)
    state = split.init(params, trail=_device(trail))
    reference = _device(masters)
    reference_state = plain.init(reference)
    for step in range(STEPS):
        grads = {k: rng.standard_normal(v.shape).astype(BF16) for k, v in masters.items()}
        params, state = split.step(params, _device(grads), state)
        wide = _device({k: g.astype(np.float32) for k, g in grads.items()})
        reference, reference_state = plain.step(reference, wide, reference_state)
        assert sorted(split._compiled) == ["cuda"]
        # The bf16 tops stay on the device, as bf16 (their bits viewed as it).
        assert all(is_device_array(p) and p.dtype == BF16 for p in params.values())
        trails = _host(state["master_trail"])
        got = ts.optim.master_params(_host(params), {"master_trail": trails})
        want = _host(reference)
        for key, value in got.items():
            assert trails[key].dtype == np.int16
            differ = np.count_nonzero(value.view(np.uint32) != want[key].view(np.uint32))
            assert differ == 0, f"step {step}, {key} {value.shape}: {differ} masters differ"
            assert not np.array_equal(value, masters[key])  # the step moved them
        for slot in plain.slots:  # the state is the fp32 run's
            for key, value in _host(state[slot]).items():
                want_slot = _host(reference_state[slot])[key]
                np.testing.assert_array_equal(value.view(np.uint32), want_slot.view(np.uint32))
