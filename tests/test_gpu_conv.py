"""`tess-gpu-conv` at the gpu level, without a GPU: every rule of lowering/gpu/README.md
(`check_gpu_level`: barriers never under a thread condition, workgroup attributions,
launch sizes) and the gpu level run thread by thread (`tests/gpu_interp.py`) against the
reference interpreter, for convs and their gradients, which all take the staged kernel."""

from __future__ import annotations

import pytest
from test_gpu_level import check_against_reference, lowered_source
from xdsl.dialects import gpu

from tessc.dialects.gpu_memory import is_workgroup

CONVS = """
def conv_bias_relu(x: f32[2, 3, 6, 5], w: f32[5, 3, 3, 2], b: f32[5]) -> f32[2, 5, 2, 4]:
    return relu(conv2d(x, w, b, stride=(2, 1)))

def dilated_groups(x: f32[1, 4, 7, 6], w: f32[6, 2, 2, 2]) -> f32[1, 6, 7, 4]:
    return conv2d(x, w, padding=(1, 0), dilation=2, groups=2)

def signal(s: f32[2, 2, 13], k: f32[3, 2, 3]) -> f32[2, 3, 7]:
    return conv1d(s, k, stride=2, padding=1)

def loss(x: f32[1, 2, 5, 5], w: f32[3, 2, 3, 3]) -> f32[]:
    return sum(tanh(conv2d(x, w, stride=2, padding=1)))

def input_gradient(x: f32[1, 2, 5, 5], w: f32[3, 2, 3, 3]) -> f32[1, 2, 5, 5]:
    return grad(loss, wrt=x)(x, w)

def weight_gradient(x: f32[1, 2, 5, 5], w: f32[3, 2, 3, 3]) -> f32[3, 2, 3, 3]:
    return grad(loss, wrt=w)(x, w)
"""

ENTRIES = ["conv_bias_relu", "dilated_groups", "signal", "input_gradient", "weight_gradient"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_staged_convs_run_like_the_reference(entry: str) -> None:
    check_against_reference(CONVS, entry)


def test_every_conv_stages_its_patch_and_weights() -> None:
    _, lowered = lowered_source(CONVS)
    staged = set()
    for kernel in lowered.walk():
        if isinstance(kernel, gpu.FuncOp):
            shared = [a for a in kernel.body.block.args if is_workgroup(a.type)]
            if [a.name_hint for a in shared] == ["patch", "weights"]:
                staged.add(kernel.sym_name.data.rsplit("_kernel_", 1)[0])
                barriers = [op for op in kernel.walk() if isinstance(op, gpu.BarrierOp)]
                assert len(barriers) == 2  # after the loads, before the next chunk's
    # conv_bias_relu, dilated_groups, signal, loss; each gradient program holds the forward
    # conv and its gradient conv.
    assert set(ENTRIES[:3]) <= staged
    assert {"input_gradient", "weight_gradient"} <= staged


def test_staged_convs_parse_and_verify_upstream() -> None:
    from test_upstream_mlir import check_parses, upstream_text, upstream_tool

    upstream_tool("mlir-opt")
    _, lowered = lowered_source(CONVS)
    check_parses([("convs at gpu", upstream_text(lowered))])
