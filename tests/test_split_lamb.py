"""Split-bf16 master weights are lossless for every optimizer that offers them, Lamb
included: over several steps and parameter shapes (one element, fewer than a vector, not a
multiple of the vector width, several chunks of the arena loop), the fp32 masters rebuilt
from the bf16 tops and int16 trails equal those of the same optimizer run on fp32 masters,
bit for bit, and the split step compiles to as many kernels as the fp32 step."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tessc as ts

BF16 = np.dtype(ml_dtypes.bfloat16)

SHAPES = [(1,), (5,), (3, 4), (37,), (129, 67), (40000,)]
"""40000 elements: three chunks of the arena loop (16384 each), the last one partial."""

OPTIMIZERS = {
    "lamb": lambda **k: ts.optim.Lamb(lr=0.01, **k),
    "lamb-no-decay": lambda **k: ts.optim.Lamb(lr=0.05, betas=(0.8, 0.99), weight_decay=0.0, **k),
    "sgd": lambda **k: ts.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, **k),
    "adagrad": lambda **k: ts.optim.Adagrad(lr=0.1, weight_decay=0.01, **k),
}


def _masters(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"p{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_split_masters_equal_the_fp32_run_bit_for_bit(name: str) -> None:
    masters = _masters(1)
    split, plain = OPTIMIZERS[name](master_weights="split"), OPTIMIZERS[name]()
    params, trail = ts.optim.split_params(masters)
    state = split.init(params, trail=trail)
    reference = {k: v.copy() for k, v in masters.items()}
    reference_state = plain.init(reference)
    np.testing.assert_array_equal(ts.optim.master_params(params, state)["p0"], masters["p0"])
    rng = np.random.default_rng(2)
    for step in range(4):
        grads = {k: rng.standard_normal(v.shape).astype(BF16) for k, v in masters.items()}
        params, state = split.step(params, grads, state)
        wide = {k: g.astype(np.float32) for k, g in grads.items()}
        reference, reference_state = plain.step(reference, wide, reference_state)
        got = ts.optim.master_params(params, state)
        for key, value in got.items():
            assert params[key].dtype == BF16 and state["master_trail"][key].dtype == np.int16
            # The weights forward reads are the masters' top halves.
            top = (value.view(np.uint32) >> 16).astype(np.uint16)
            np.testing.assert_array_equal(params[key].view(np.uint16), top)
            differ = np.count_nonzero(value.view(np.uint32) != reference[key].view(np.uint32))
            assert differ == 0, f"step {step}, {key} {value.shape}: {differ} masters differ"
            assert not np.array_equal(value, masters[key])  # the step moved them
        for slot in plain.slots:  # the state too: it is the fp32 run's
            for key, value in state[slot].items():
                want = reference_state[slot][key]
                np.testing.assert_array_equal(value.view(np.uint32), want.view(np.uint32))


def test_split_lamb_fuses_as_the_fp32_step() -> None:
    """The split step joins the halves where each pass reads the master, so its norms
    are segmented reductions over the arenas as the fp32 step's are: two kernels, not a
    reduction kernel per parameter norm."""
    masters = _masters(3)
    split, plain = ts.optim.Lamb(master_weights="split"), ts.optim.Lamb()
    params, trail = ts.optim.split_params(masters)
    state = split.init(params, trail=trail)
    grads = {k: np.ones(v.shape, BF16) for k, v in masters.items()}
    params, state = split.step(params, grads, state)
    wide = {k: np.ones(v.shape, np.float32) for k, v in masters.items()}
    reference = {k: v.copy() for k, v in masters.items()}
    reference, reference_state = plain.step(reference, wide, plain.init(reference))
    split_fused = split._compiled["cpu"].ir(params, grads, state, stage="fused")
    plain_fused = plain._compiled["cpu"].ir(reference, wide, reference_state, stage="fused")
    assert split_fused.count("tess.row_ranges") == plain_fused.count("tess.row_ranges") > 0
    assert split_fused.count("linalg.generic") == plain_fused.count("linalg.generic")
    top_level = [line for line in split_fused.splitlines() if line.startswith("    %")]
    assert sum("kernel.group" in line for line in top_level) == 1  # norms (+ prologue)
