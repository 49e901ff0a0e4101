"""`scaled_dot_product_attention` on the cuda target (`tess-decompose-attention`: the
attention ops as matmuls and a safe softmax): values and gradients against the reference
interpreter at small shapes, causal and with a bool mask holding a row that attends to
nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts

sdpa = ts.nn.scaled_dot_product_attention


@pytest.mark.parametrize("masked", [False, True])
def test_attention_and_its_gradients_match_the_reference(masked: bool) -> None:
    rng = np.random.default_rng(int(masked))
    q, k, v = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 5, 4)),
        rng.standard_normal((2, 5, 2)),
    )
    mask = None
    if masked:
        mask = rng.random((3, 5)) < 0.7
        mask[0] = False
    c = rng.standard_normal((2, 3, 2))

    def f(q, k, v):
        return sdpa(q, k, v, mask, is_causal=not masked)

    def both(c, q, k, v):
        grads = ts.grad(lambda c, q, k, v: (f(q, k, v) * c).sum(), argnums=(1, 2, 3))
        return f(q, k, v), grads(c, q, k, v)

    want = ts.jit(both, target="reference")(c, q, k, v)
    got = ts.jit(both, target="cuda")(c, q, k, v)
    for g, w in zip([got[0], *got[1]], [want[0], *want[1]], strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12)
