"""`tess-gpu-attention` at the gpu level, without a GPU: every rule of lowering/gpu/README.md
(`check_gpu_level`) and the gpu level run thread by thread (`tests/gpu_interp.py`) against
the reference interpreter, forward and gradients, on shapes that cross a query block and a
key tile (L = 33, S = 35: not multiples of 32); no `(L, S)` buffer at L = 1024; the
fallback (`tess-decompose-attention{fallback-only}`) for a head dim over 64."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_gpu_level import check_against_reference, check_gpu_level, lowered_source
from xdsl.dialects import gpu

import tessc as ts
from tessc.dialects.gpu_memory import is_workgroup
from tessc.lowering.gpu.gpu_attention import WORKGROUP_BYTES

SOURCE = """
def causal(q: f64[2, 33, 8], k: f64[2, 35, 8], v: f64[2, 35, 5]) -> f64[2, 33, 5]:
    return scaled_dot_product_attention(q, k, v, is_causal=True)

def masked(q: f64[2, 2, 5, 16], k: f64[2, 2, 7, 16], v: f64[2, 2, 7, 3],
           m: f64[2, 1, 5, 7]) -> f64[2, 2, 5, 3]:
    return scaled_dot_product_attention(q, k, v, m, scale=0.5)

def loss(q: f64[2, 33, 8], k: f64[2, 35, 8], v: f64[2, 35, 5]) -> f64[]:
    return sum(causal(q, k, v) * causal(q, k, v))

def dq(q: f64[2, 33, 8], k: f64[2, 35, 8], v: f64[2, 35, 5]) -> f64[2, 33, 8]:
    return grad(loss, wrt=q)(q, k, v)

def dk(q: f64[2, 33, 8], k: f64[2, 35, 8], v: f64[2, 35, 5]) -> f64[2, 35, 8]:
    return grad(loss, wrt=k)(q, k, v)

def dv(q: f64[2, 33, 8], k: f64[2, 35, 8], v: f64[2, 35, 5]) -> f64[2, 35, 5]:
    return grad(loss, wrt=v)(q, k, v)
"""


@pytest.mark.parametrize("entry", ["causal", "masked", "dq", "dk", "dv"])
def test_flash_kernels_run_like_the_reference(entry: str) -> None:
    check_against_reference(SOURCE, entry, dtype=np.float64)


def test_every_attention_is_a_flash_kernel() -> None:
    _, lowered = lowered_source(SOURCE)
    kernels = check_gpu_level(lowered)
    flash = sorted(re.sub(r"attention_kernel_\d+_", "", n) for n in kernels if "attention" in n)
    # causal, masked; loss: forward; dq, dk, dv: forward (+lse) and a gradient kernel each
    assert flash.count("forward") + flash.count("forward_side_by_side") == 6
    assert flash.count("dq") == 1 and flash.count("dkv") == 2
    for name, kernel in kernels.items():
        if "attention" not in name or "side_by_side" in name:
            continue
        shared = [a.type for a in kernel.body.block.args if is_workgroup(a.type)]
        item = 8  # f64
        assert sum(np.prod(t.get_shape()) * item for t in shared) <= WORKGROUP_BYTES
        assert not any(isinstance(op, gpu.AllReduceOp) for op in kernel.walk())
        assert not any(op.name.startswith("memref.atomic") for op in kernel.walk())


def test_no_scores_buffer_at_1024() -> None:
    """Forward + backward at L = S = 1024: no memref anywhere in the gpu level (host window,
    alloc, kernel argument, workgroup buffer) holds L * S elements."""
    length, depth = 1024, 16
    rng = np.random.default_rng(0)
    q, k, v, c = (rng.normal(size=(1, length, depth)) for _ in range(4))

    def loss(c, q, k, v):
        return (ts.nn.scaled_dot_product_attention(q, k, v, is_causal=True) * c).sum()

    ir = ts.jit(ts.grad(loss, argnums=(1, 2, 3)), target="cuda").ir(c, q, k, v, stage="gpu")
    assert "attention_kernel" in ir and "_dq" in ir  # dq and dk/dv: one launch side by side
    for shape in re.findall(r"memref<([0-9x]+)x[fi]\d+", ir):
        assert np.prod([int(n) for n in shape.split("x")]) < length * length, shape
    for size in re.findall(r"memref<(\d+)xi8", ir):  # the workspace arena
        assert int(size) < length * length * 8 // 8
    assert max(int(p) for p in re.findall(r"tess\.peak_bytes = (\d+)", ir)) < length * length


WIDE = """
def wide(q: f64[1, 3, 80], k: f64[1, 5, 80], v: f64[1, 5, 2]) -> f64[1, 3, 2]:
    return scaled_dot_product_attention(q, k, v)
"""


def test_a_head_dim_over_64_falls_back_to_the_decomposition() -> None:
    _, lowered = lowered_source(WIDE)
    assert not [n for n in check_gpu_level(lowered) if "attention" in n]
    check_against_reference(WIDE, "wide", dtype=np.float64)


def test_flash_kernels_parse_and_verify_upstream() -> None:
    from test_upstream_mlir import check_parses, upstream_text, upstream_tool

    upstream_tool("mlir-opt")
    _, lowered = lowered_source(SOURCE)
    check_parses([("attention at gpu", upstream_text(lowered))])
