"""bfloat16 and float16 on the cuda target (in the simulator): stored as their bits on the
device, converted in the kernels; the results are the cpu target's, bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import tessc as ts

BF16 = np.dtype(ml_dtypes.bfloat16)


def _program(x, w):  # noqa: ANN001, ANN202
    h = ts.tanh(x @ w)
    return h.sum(axis=0), (x * 2.0).astype(np.float32), x.astype(np.float32).astype(x.dtype)


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16)], ids=["bf16", "f16"])
def test_narrow_program_matches_cpu(dtype: np.dtype) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal((3, 5)).astype(dtype)
    want = ts.jit(_program, target="reference")(x, w)
    got = ts.jit(_program, target="cuda")(x, w)
    for g, r in zip(got, want, strict=True):
        host = g.copy_to_host() if hasattr(g, "copy_to_host") else np.asarray(g)
        assert host.dtype == r.dtype
        np.testing.assert_array_equal(host.astype(np.float32), r.astype(np.float32))


def test_conversion_specials_on_device() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.00390625, 1.01171875, 65520.0,
                  3e-8, 1e-40, -2.5], np.float32)  # fmt: skip
    for dtype in (BF16, np.dtype(np.float16)):
        got = ts.jit(lambda v, dtype=dtype: v.astype(dtype), target="cuda")(x)
        host = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
        with np.errstate(all="ignore"):
            want = x.astype(dtype)
        same = host.view(np.uint16) == want.view(np.uint16)
        assert np.all(
            same | (np.isnan(want.astype(np.float32)) & np.isnan(host.astype(np.float32)))
        )


def test_split_sgd_step_on_cuda_is_the_cpu_step() -> None:
    rng = np.random.default_rng(1)
    masters = {"w": rng.standard_normal((3, 4)).astype(np.float32)}
    grads = {"w": rng.standard_normal((3, 4)).astype(BF16)}
    results = []
    for target in ("cpu", "cuda"):
        opt = ts.optim.SGD(lr=0.1, momentum=0.9, master_weights="split")
        params, trail = ts.optim.split_params(masters)  # fresh: the step donates them
        step = ts.jit(lambda p, g, s, opt=opt: opt.step(p, g, s), target=target)
        new, state = step(params, grads, opt.init(params, trail=trail))
        trail = state["master_trail"]["w"]
        results.append((np.asarray(new["w"]).view(np.uint16), np.asarray(trail)))
    assert cuda is not None
    for cpu, device in zip(*results, strict=True):
        np.testing.assert_array_equal(device, cpu)
