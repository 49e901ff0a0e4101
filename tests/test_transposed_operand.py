"""`tess-fuse` keeps a transposed right-hand side (`a @ w.T`) as a copy, so the contraction
runs i-k-j on it; a transposed left-hand side (`x.T @ d`) still fuses."""

from __future__ import annotations

import numpy as np

import tessc as ts


def test_a_transposed_rhs_is_a_packed_copy_and_correct() -> None:
    @ts.jit
    def f(a, w):
        return a @ w.T

    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((33, 10), np.float32), rng.standard_normal((47, 10), np.float32)
    fused = f.ir(a, w, stage="fused")
    assert fused.count("linalg.generic") == 3  # the transpose copy, the fill, the matmul
    loops = f.ir(a, w, stage="loops")
    assert "tess.register_tile" in loops  # the contraction is tiled (i-k-j)
    np.testing.assert_allclose(f(a, w), a @ w.T, rtol=1e-5, atol=1e-5)


def test_a_transposed_lhs_still_fuses() -> None:
    @ts.jit
    def g(x, d):
        return x.T @ d

    rng = np.random.default_rng(1)
    x, d = rng.standard_normal((20, 12), np.float64), rng.standard_normal((20, 9), np.float64)
    assert g.ir(x, d, stage="fused").count("linalg.generic") == 2  # the fill, the matmul
    np.testing.assert_allclose(g(x, d), x.T @ d, rtol=1e-12)
