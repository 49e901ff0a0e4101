"""bfloat16, float16 and int16 tensors: stored narrow, computed in f32 and rounded to nearest
even once per op (`tess-widen-narrow`), on `cpu` and `reference`; `ts.bitcast` and
`x.view(dtype)`; split-bf16 master weights (`master_weights="split"`) bit for bit against
the same optimizer on fp32 masters."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tessc as ts
from tessc.dialects.builder_types import TessError

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


def _bits_equal(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bit patterns, any NaN equal to any NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    wide = (np.float32, np.uint32) if got.dtype.itemsize == 4 else (np.float32, np.uint16)
    same = got.view(wide[1]) == want.view(wide[1])
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    return bool(np.all(same | nan))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_conversions_round_to_nearest_even_on_every_bit_pattern(dtype: np.dtype) -> None:
    rng = np.random.default_rng(0)
    special = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x477FF000,
               0x477FEFFF, 0x477FE000, 0x38800000, 0x387FFFFF, 0x33000000, 0x33000001, 1,
               0x3F808000, 0x3F818000, 0x3F80C000]  # fmt: skip
    bits = np.concatenate([rng.integers(0, 2**32, 4000).astype(np.uint32), special])
    x = bits.astype(np.uint32).view(np.float32)
    narrow = ts.jit(lambda x: x.astype(dtype))(x)
    with np.errstate(all="ignore"):
        assert _bits_equal(narrow, x.astype(dtype))
    every = np.arange(2**16, dtype=np.uint16).view(dtype)
    wide = ts.jit(lambda y: y.astype(np.float32))(every)
    assert _bits_equal(wide, every.astype(np.float32))


def _mlp(x, w, b):  # noqa: ANN001, ANN202
    h = ts.tanh(x @ w + b)
    return (h * h).sum(axis=1), h.amax(0), (x * 3.0 - 1.0).mean()


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_ops_compute_in_f32_and_round_once_per_op(dtype: np.dtype) -> None:
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in [(6, 5), (5, 7), (7,)])
    reference = ts.jit(_mlp, target="reference")(x, w, b)
    compiled = ts.jit(_mlp)(x, w, b)
    f32 = [a.astype(np.float32) for a in (x, w, b)]

    def rounded(a: np.ndarray) -> np.ndarray:  # the f32 computation rounded where tessc does
        return np.asarray(a, np.float32).astype(dtype).astype(np.float32)

    h = rounded(np.tanh(rounded(rounded(f32[0] @ f32[1]) + f32[2])))
    by_hand = [rounded((rounded(h * h)).sum(axis=1)), rounded(h.max(axis=0))]
    by_hand.append(rounded(rounded(rounded(f32[0] * 3.0) - 1.0).mean()))
    for got, want, hand in zip(compiled, reference, by_hand, strict=True):
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
        np.testing.assert_allclose(want.astype(np.float32), hand, rtol=2e-2, atol=1e-2)


def test_gradients_match_the_rounded_f32_computation() -> None:
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 3)).astype(BF16), rng.standard_normal((3, 2)).astype(BF16)

    def loss(w, x):  # noqa: ANN001, ANN202
        return ts.tanh(x @ w).sum()

    for target in ("cpu", "reference"):
        grad = ts.jit(ts.grad(loss), target=target)(w, x)
        assert grad.dtype == BF16
        xf, wf = x.astype(np.float32), w.astype(np.float32)
        t = np.tanh((xf @ wf).astype(BF16).astype(np.float32)).astype(BF16).astype(np.float32)
        dz = (1.0 - (t * t).astype(BF16).astype(np.float32)).astype(BF16).astype(np.float32)
        want = (xf.T @ dz).astype(BF16).astype(np.float32)
        np.testing.assert_allclose(grad.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_bitcast_and_view_reinterpret_bits() -> None:
    rng = np.random.default_rng(3)
    m = rng.standard_normal(9).astype(np.float32)

    def f(m):  # noqa: ANN001, ANN202
        return m.view(np.int32), ts.bitcast(m.astype(BF16), np.int16), m.astype(F16).view("int16")

    for target in ("cpu", "reference"):
        got = ts.jit(f, target=target)(m)
        want = (m.view(np.int32), m.astype(BF16).view(np.int16), m.astype(F16).view(np.int16))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    back = ts.jit(lambda i: ts.bitcast(i, BF16))(m.astype(BF16).view(np.int16))
    np.testing.assert_array_equal(back.view(np.uint16), m.astype(BF16).view(np.uint16))


def test_bitcast_of_another_width_is_a_clear_error() -> None:
    with pytest.raises(TessError, match="cannot reinterpret f32 as i16"):
        ts.jit(lambda m: m.view(np.int16))(np.ones(3, np.float32))
    with pytest.raises(TessError, match="cannot reinterpret"):
        ts.jit(lambda m: ts.bitcast(m, np.bool_))(np.ones(3, np.float32))


def _masters(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 3)]
    return {f"p{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}


# The split step against the fp32 run, bit for bit, per optimizer: tests/test_split_lamb.py.


def test_split_sgd_step_is_one_fused_kernel() -> None:
    opt = ts.optim.SGD(lr=0.1, momentum=0.9, master_weights="split")
    params, trail = ts.optim.split_params(_masters(6))
    state = opt.init(params, trail=trail)
    grads = {k: np.ones(v.shape, BF16) for k, v in params.items()}
    params, state = opt.step(params, grads, state)
    fused = opt._compiled["cpu"].ir(params, grads, state, stage="fused")
    assert fused.count("linalg.generic") == 2  # the step count, and ONE update of all three


def test_split_master_weights_errors() -> None:
    with pytest.raises(ValueError, match="invalid master_weights"):
        ts.optim.SGD(master_weights="fp32")
    with pytest.raises(TypeError, match="updates bfloat16 parameters"):
        ts.optim.SGD(master_weights="split").init({"w": np.ones(3, np.float32)})
    with pytest.raises(ValueError, match="not the state of an optimizer"):
        ts.optim.master_params({"w": np.ones(3, BF16)}, {"step": np.zeros(())})
