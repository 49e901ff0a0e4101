"""The transformer block's step around attention (bench/bench_transformer.py): the shared
weights' gradients as one product over the batch's stacked rows (no per-batch products
summed), and the block's values and gradients against the reference interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tessc as ts

RNG = np.random.default_rng(2122)


def test_shared_weight_gradient_is_one_product_over_the_stacked_rows() -> None:
    x, w, c = RNG.normal(size=(8, 16, 4)), RNG.normal(size=(4, 6)), RNG.normal(size=(8, 16, 6))
    step = ts.jit(ts.grad(lambda x, w, c: ((x @ w) * c).sum(), argnums=(0, 1)))
    dx, dw = step(x, w, c)
    np.testing.assert_allclose(dw, x.reshape(128, 4).T @ c.reshape(128, 6), rtol=1e-12)
    np.testing.assert_allclose(dx, c @ w.T, rtol=1e-12)
    loops = step.ir(x, w, c, stage="loops")
    assert "memref<8x4x6xf64>" not in loops  # the per-batch products of the old rule


def test_block_step_against_the_reference() -> None:
    def block(x, wq, wk, wv, wo, w1, w2):  # type: ignore[no-untyped-def]
        b, t, d = x.shape

        def split(w):  # type: ignore[no-untyped-def]
            return (h @ w).reshape((b, t, 2, d // 2)).transpose(1, 2)

        h = ts.nn.layer_norm(x, d)
        y = ts.nn.scaled_dot_product_attention(split(wq), split(wk), split(wv), is_causal=True)
        x = x + y.transpose(1, 2).reshape((b, t, d)) @ wo
        return x + ts.nn.gelu(ts.nn.layer_norm(x, d) @ w1) @ w2

    d = 8
    shapes = [(3, 70, d), (d, d), (d, d), (d, d), (d, d), (d, 4 * d), (4 * d, d)]
    args = [RNG.normal(size=s) * 0.5 for s in shapes]
    c = RNG.normal(size=shapes[0])
    step = ts.value_and_grad(lambda c, *a: (block(*a) * c).sum(), argnums=tuple(range(1, 8)))
    value, grads = ts.jit(step)(c, *args)
    wanted, wanted_grads = ts.jit(step, target="reference")(c, *args)
    np.testing.assert_allclose(value, wanted, rtol=1e-10)
    for actual, expected in zip(grads, wanted_grads, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-10)


def block_step_ir(stage: str) -> str:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    from bench_transformer import block_params, tessc_block

    params, heads = block_params(64), 4
    x = RNG.normal(size=(8, 64, 64)).astype(np.float32)

    def loss(p, x, c):  # type: ignore[no-untyped-def]
        return (tessc_block(p, x, heads) * c).sum()

    step = ts.jit(ts.value_and_grad(loss, argnums=(0, 1)))
    return step.ir(params, x, x, stage=stage)


def test_block_step_kernels() -> None:
    """bench_transformer's block step (B=8, T=64, D=64, 4 heads): the attention kernels read
    q, k, v, dout and write out, dq, dk, dv through permuted layouts (`tess-attention-views`),
    so no head split or merge is a transposing copy (54 kernels -> 46); a column sum's
    zeros run in its kernel (`tess-fuse-epilogue`: the bias gradients, 46 -> 39); dq, dk
    and dv are one attention kernel (one pass over the 32 (batch, head) entries, 39 -> 38)."""
    fused = block_step_ir("fused")
    assert "layouts = [" in fused
    permutes = re.findall(r'tess\.op = "tess\.permute".*?-> tensor<(\w+)>', fused)
    assert all(shape.count("x") == 1 for shape in permutes), permutes  # weight transposes only
    loops = block_step_ir("loops")
    assert len(re.findall(r"func\.func private @\w+_kernel_\d+\(", loops)) == 38


@pytest.mark.parametrize("order", [(0, 2, 1, 3), (1, 2, 0, 3)])
def test_attention_through_permuted_views(order: tuple[int, ...]) -> None:
    """Operands read and results written through a permutation that is not its own inverse
    (`(1, 2, 0, 3)`): values and gradients against the reference interpreter."""
    back = tuple(int(k) for k in np.argsort(order))

    def f(q, k, v, c):  # type: ignore[no-untyped-def]
        a = [t.permute(*order) for t in (q, k, v)]
        y = ts.nn.scaled_dot_product_attention(*a, is_causal=True)
        return (y.permute(*back) * c).sum()

    shape = (5, 2, 3, 4) if order == (1, 2, 0, 3) else (2, 5, 3, 4)
    args = [RNG.normal(size=shape) for _ in range(4)]
    step = ts.value_and_grad(f, argnums=(0, 1, 2))
    assert "layouts = [" in ts.jit(step).ir(*args, stage="fused")
    value, grads = ts.jit(step)(*args)
    wanted, wanted_grads = ts.jit(step, target="reference")(*args)
    np.testing.assert_allclose(value, wanted, rtol=1e-10)
    for actual, expected in zip(grads, wanted_grads, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-10)
