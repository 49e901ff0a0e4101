"""Memory of convolution programs (issue 20): the memory plan's peak of the digits CNN train
step (examples/train_cnn.py) is reported and comes near its liveness bound, no buffer is larger
than a tensor the network itself has (an im2col matrix of a layer would be), and a
ResNet-shape conv needs no workspace beyond its padded input (`tess-conv-tiles` reads the
input in place: no im2col buffer, no packed panels)."""

from __future__ import annotations

import re

import numpy as np

import tessc as ts

from helpers.examples import load_example


def byte_figures(ir: str) -> dict[str, int]:
    """The host function's `tess.*_bytes` attributes (the memory plan's report)."""
    host = next(line for line in ir.splitlines() if "func.func @" in line)
    return {name: int(value) for name, value in re.findall(r"tess\.(\w+_bytes) = (\d+)", host)}


def view_bytes(ir: str) -> list[int]:
    """The size of every buffer carved out of the arena or workspace."""
    shapes = re.findall(r"memref\.view [^:]*: memref<\d+xi8> to memref<([\dx]+)x[fi]\d+>", ir)
    return [int(np.prod([int(d) for d in shape.split("x")])) * 4 for shape in shapes]


def test_cnn_train_step_peak_and_buffers() -> None:
    example = load_example("train_cnn")
    optimizer = ts.optim.SGD(lr=0.05, momentum=0.9)
    step = example.make_train_step(optimizer, "cpu")
    params = example.init_params()
    rng = np.random.default_rng(0)
    x = rng.random((200, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 200)
    ir = step.ir(params, optimizer.init(params), x, y, np.arange(64), stage="loops")
    figures = byte_figures(ir)
    # The plan comes within 3% of the liveness bound (776,876 of 758,444 bytes when
    # measured: since the forward convs write no output (their pools and argmaxes fuse
    # with them, tess-fuse's pool windows) the buffers' sizes leave the best-fit planner a
    # gap; it reached the bound, at 1,086,124 bytes, before), and is well under one
    # buffer per value.
    assert figures["peak_bytes"] <= 1.03 * figures["live_peak_bytes"]
    assert 2 * figures["peak_bytes"] < figures["unplanned_bytes"]
    # Batch 64: the gradients of the 64x16x8x8 and 64x32x4x4 activations (and their padded
    # forms); no conv output of the forward pass (parameters, momenta and gradients are
    # ~50 KB).
    assert figures["peak_bytes"] <= 800_000
    # No buffer beyond a layer's largest (padded) activation: conv1's padded 64x16x10x10.
    # An im2col matrix of conv2 (64 x 16*3*3 x 4*4 floats, 589,824 bytes) would be.
    largest = max(64 * 16 * 10 * 10, 64 * 32 * 6 * 6) * 4
    assert max(view_bytes(ir)) <= largest


def test_resnet_shape_conv_needs_only_its_padded_input() -> None:
    x = np.zeros((8, 64, 56, 56), np.float32)
    w = np.zeros((64, 64, 3, 3), np.float32)
    b = np.zeros(64, np.float32)
    ir = ts.jit(lambda x, w, b: ts.nn.conv2d(x, w, b, padding=1).relu()).ir(x, w, b, stage="loops")
    assert "micro.mma" in ir
    padded = 8 * 64 * 58 * 58 * 4  # an im2col matrix would be 8 x 576 x 3136 floats (58 MB)
    assert byte_figures(ir)["workspace_bytes"] == padded
    assert view_bytes(ir) == [padded]
