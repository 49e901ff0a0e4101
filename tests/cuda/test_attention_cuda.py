"""`scaled_dot_product_attention` on the cuda target: `tess-gpu-attention`'s flash kernels
(forward, `dq`, `dk`/`dv`) in the simulator, values and gradients against the reference
interpreter at small shapes (L, S odd, E = 8 or 16, batch and heads), causal, with a bool
mask holding a row that attends to nothing, with a float mask broadcast over heads, and
across a query block and a key tile (L = 33, S = 35). tests/test_gpu_attention.py checks
the gpu level's rules, the fallback and the absence of an `(L, S)` buffer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tessc as ts

sdpa = ts.nn.scaled_dot_product_attention


def bool_mask(rng: np.random.Generator, *shape: int) -> np.ndarray:
    mask = rng.random(shape) < 0.7
    mask[..., 0, :] = False  # a row that attends to nothing
    return mask


def float_mask(rng: np.random.Generator, *shape: int) -> np.ndarray:
    mask = rng.standard_normal(shape)
    mask[rng.random(shape) < 0.2] = -np.inf
    return mask


# name: (batch dims, L, S, E, Ev, mask maker or None, causal)
CASES: dict[str, tuple[tuple[int, ...], int, int, int, int, Any, bool]] = {
    "causal": ((2,), 3, 5, 4, 2, None, True),
    "bool-mask": ((2,), 3, 5, 4, 2, lambda rng: bool_mask(rng, 3, 5), False),
    "heads-float-mask": ((2, 2), 5, 7, 16, 3, lambda rng: float_mask(rng, 2, 1, 5, 7), False),
    "blocks": ((1,), 33, 35, 8, 3, None, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_attention_and_its_gradients_match_the_reference(name: str) -> None:
    batch, length, keys, depth, value_depth, make_mask, causal = CASES[name]
    rng = np.random.default_rng(list(CASES).index(name))
    q, k, v, c = (
        rng.standard_normal((*batch, n, d))
        for n, d in ((length, depth), (keys, depth), (keys, value_depth), (length, value_depth))
    )
    mask = None if make_mask is None else make_mask(rng)

    def f(q, k, v):
        return sdpa(q, k, v, mask, is_causal=causal)

    def both(c, q, k, v):
        grads = ts.grad(lambda c, q, k, v: (f(q, k, v) * c).sum(), argnums=(1, 2, 3))
        return f(q, k, v), grads(c, q, k, v)

    cuda = ts.jit(both, target="cuda")
    assert "attention_kernel" in cuda.ir(c, q, k, v, stage="gpu")  # the flash kernels
    want = ts.jit(both, target="reference")(c, q, k, v)
    got = cuda(c, q, k, v)
    for g, w in zip([got[0], *got[1]], [want[0], *want[1]], strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-11, atol=1e-11)


def test_sliced_float32_operands_are_read_where_they_lie() -> None:
    """q, k, v as strided slices of one float32 tensor (a fused qkv projection), causal:
    the kernels read the views in place."""
    x = np.random.default_rng(7).standard_normal((2, 9, 24)).astype(np.float32)

    def f(x):
        return sdpa(x[..., :8], x[:, 1:, 8:16], x[:, 1:, 16:], is_causal=True)

    def g(x):
        return ts.grad(lambda x: (f(x) * f(x)).sum())(x)

    for fn in (f, g):
        got, want = ts.jit(fn, target="cuda")(x), ts.jit(fn, target="reference")(x)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
