"""`tess-sink-aliasing-views` (lowering/loops/sink_aliasing_views.py): a view of a buffer made
outside a parallel loop whose body also uses the buffer is made again inside it, whichever
pass hoisted it, so Numba's `noalias` parfor body never names one buffer twice."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, OpResult
from xdsl.passes import ModulePass

import tessc as ts
from tessc import pipelines


@dataclasses.dataclass(frozen=True)
class HoistViewsPass(ModulePass):
    """What MLIR's loop-invariant code motion does to a view at the top of an `scf.parallel`
    body (xDSL's `licm` only moves out of `scf.for`): moves it before the loop."""

    name = "test-hoist-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in list(op.walk()):
            if not isinstance(loop, scf.ParallelOp):
                continue
            for view in list(loop.body.block.ops):
                if not isinstance(view, memref.CollapseShapeOp):
                    continue
                source = view.src
                inside = source.owner.parent_op() if isinstance(source, BlockArgument) else None
                if isinstance(source, OpResult):
                    inside = source.op
                if not loop.is_ancestor(inside):
                    view.detach()
                    loop.parent_block().insert_op_before(view, loop)  # type: ignore[union-attr]


def hoisting_pipeline(sink: bool) -> pipelines.Pipeline:
    """`cpu` with im2col forced on two threads (a parfor on any machine), then the views
    hoisted out of the parallel loops after `cse`, then (if `sink`) the pass under test."""
    base = CPU
    tail = "cse,test-hoist-views" + (",tess-sink-aliasing-views" if sink else "")
    passes = tuple(
        p.replace("tess-conv-tiles,", "tess-conv-tiles{algorithm=im2col threads=2},").replace(
            "cse,tess-sink-aliasing-views", tail
        )
        for p in base.passes
    )
    return dataclasses.replace(base, passes=passes)


CPU = pipelines.PIPELINES["cpu"]


@pytest.fixture
def with_hoisting(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    passes = pipelines.available_passes()
    passes["test-hoist-views"] = lambda: HoistViewsPass
    monkeypatch.setattr(pipelines, "available_passes", lambda: passes)

    def use(sink: bool) -> None:
        monkeypatch.setitem(pipelines.PIPELINES, "cpu", hoisting_pipeline(sink))

    return use


def weight_gradient_case() -> tuple[Callable[..., Any], np.ndarray, np.ndarray]:
    """A strided, dilated conv's gradients (test_conv_im2col.py's regression shape): the
    gathered kernel's zero fill stores to the output, its products through a view."""
    kw = {"stride": (2, 3), "padding": (3, 0), "dilation": (1, 2)}
    rng = np.random.default_rng(2)
    x, w, seed = (rng.standard_normal(s) for s in ((2, 2, 9, 7), (3, 2, 2, 3), (2, 3, 7, 1)))

    def loss(x: Any, w: Any) -> Any:
        return (ts.nn.conv2d(x, w, **kw) * seed).sum()

    return ts.grad(loss, argnums=(0, 1)), x, w


def test_views_hoisted_out_of_a_parfor_are_made_again_inside(with_hoisting: Any) -> None:
    grad, x, w = weight_gradient_case()
    with_hoisting(False)
    hoisted = ts.jit(grad).ir(x, w, stage="loops")
    with_hoisting(True)
    sunk = ts.jit(grad).ir(x, w, stage="loops")
    # The hoisting pass did move the conv's view out: this test exercises the pass.
    assert hoisted.count("memref.collapse_shape") < sunk.count("memref.collapse_shape")
    source = ts.jit(grad).ir(x, w, stage="numba")
    gathered = [k for k in source.split("\n\n\n") if "patch[" in k]
    assert gathered and all("prange(" in k for k in gathered)
    # The view (a reshape in the code) comes after the prange where the body also stores
    # to the output itself (the zero fill of a kernel of several products per tile).
    assert any(".reshape(" in kernel[kernel.index("prange(") :] for kernel in gathered)
    got, want = ts.jit(grad)(x, w), ts.jit(grad, target="reference")(x, w)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)
