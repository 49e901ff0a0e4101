"""
`tess-widen-narrow`: 16-bit tensors are stored narrow and computed in 32 bits (level 1 -> 1).

A `bf16`/`f16` tensor is storage: every `tess` op reading one reads it through a
`tess.cast` to f32 and every op producing one computes in f32 and rounds its result to the
narrow type (round to nearest even) with a `tess.cast` back, so a matmul or a reduction
accumulates in f32 and the result is rounded once per op, as PyTorch and JAX compute on
bfloat16. `i16` is widened to `i32` the same way (wrapping back on the way out).
`tess.cast` itself is the conversion (a narrow type to or from anything but f32 goes
through f32) and `tess.bitcast` reinterprets bits, so neither is widened. Fusion then
puts each conversion inside the kernel that loads or stores the tensor: no kernel below
this pass computes on a 16-bit value, it only converts one.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, TensorType, f32, i16, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from tessc.dialects import tess


def wide_type(element: Attribute) -> Attribute | None:
    """The type a 16-bit element type computes in (None for any other type)."""
    if isinstance(element, BFloat16Type | Float16Type):
        return f32
    if element == i16:
        return i32
    return None


def _widened(typ: Attribute) -> Attribute:
    if isinstance(typ, TensorType) and (wide := wide_type(typ.element_type)) is not None:
        return TensorType(wide, typ.get_shape())
    return typ


def _is_narrow(value: SSAValue) -> bool:
    return _widened(value.type) is not value.type


def has_narrow_types(op: Operation) -> bool:
    """Whether `op` reads or produces a 16-bit tensor."""
    return any(map(_is_narrow, (*op.operands, *op.results)))


class WidenCast(RewritePattern):
    """A cast between a 16-bit type and anything but its wide type goes through it."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, tess.CastOp):
            return
        source, target = op.input.type.element_type, op.result.type.element_type
        for narrow, other in ((source, target), (target, source)):
            wide = wide_type(narrow)
            if wide is not None and other != wide and other != narrow:
                middle = rewriter.insert(tess.CastOp(op.input, wide))
                rewriter.replace(op, tess.CastOp(middle, target))
                return


class WidenOp(RewritePattern):
    """A tess op on or producing a 16-bit tensor computes in its wide type."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not op.name.startswith("tess.") or isinstance(op, tess.CastOp | tess.BitcastOp):
            return
        if not has_narrow_types(op) or op.regions:
            return
        operands = [
            rewriter.insert(tess.CastOp(v, _widened(v.type).element_type)).result
            if _is_narrow(v)
            else v
            for v in op.operands
        ]
        wide = op.create(
            operands=operands,
            result_types=[_widened(r.type) for r in op.results],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        rewriter.insert(wide)
        results = [
            rewriter.insert(tess.CastOp(new, old.type.element_type)).result
            if _is_narrow(old)
            else new
            for old, new in zip(op.results, wide.results, strict=True)
        ]
        rewriter.replace(op, [], results)


@dataclass(frozen=True)
class TessWidenNarrowPass(ModulePass):
    name = "tess-widen-narrow"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(WidenCast(), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(WidenOp(), apply_recursively=False).rewrite_module(op)
