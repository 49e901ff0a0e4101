"""
`tess-pack-narrow`: a contraction with a narrow right-hand side reads a packed, transposed
copy of it, so it runs as dot products (level 3, linalg on tensors).

`tess-linalg-to-loops` runs a matmul `C[i, j] += A[i, k] * B[k, j]` as i-k-j: `j` innermost,
unit stride in `B` and `C`. That is the fast order while `B` has many columns. With few
(`B` of 128 x 10: an MLP's last layer, its weight gradient `h.T @ dz`) the `j` loop is
shorter than two vectors and every step of `k` loads and stores ten outputs: 22 us for
the digits MLP's 128 x 128 x 10 product against 4-6 us as dot products. This pass gives
such a contraction the operand `Bt[j, k] = B[k, j]`, a new all-parallel copy
(`N x K` elements, a tenth of the product's multiply-adds here):

    Bt = linalg.generic ins(B) outs(tensor.empty)            Bt[.., j, k] = B[.., k, j]
    C  = linalg.generic ins(A, Bt) ...                       reads Bt[.., j, k]

Now `k` walks the last dim of both operands, so `tess-linalg-to-loops` puts it innermost
(`C[i, j]` a dot product), `tess-tile-dot` register-tiles the nest where it can and
`tess-register-accumulate` keeps each dot's sum in a register where it cannot.

Matched: a `linalg.generic` contraction on tensors (`pattern_kind` MATMUL) with one
reduction loop `k` and two inputs, `A` read with `k` last (so the dot runs unit stride in
both) and `B` read at `(.., k, j)` with `j` the last dim of the output; `B`'s static
extents `j < narrow-cols` and `k >= min-depth` (short dot products are slow: a dot of 10
took 56 us where i-k-j took 10). It runs after `tess-fuse`, which would fuse the copy back.
The sum over `k` is the same sum in the same order; only the loops around it change.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import tensor
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.dialects import contract
from tessc.dialects.tess import PatternKind
from tessc.lowering.generic_analysis import generic_maps, pattern_kind

DEFAULT_NARROW_COLS = 16
"""Fewer columns than this: two AVX2 vectors of f32; one j loop is shorter than that."""
DEFAULT_MIN_DEPTH = 32
"""At least this many terms per dot product (four AVX2 vectors of f32)."""


@dataclass(frozen=True)
class NarrowContraction:
    """A contraction whose input `rhs` (read at `(.., k, j)`) is worth packing."""

    op: GenericOp
    rhs: int


def match_narrow(op: GenericOp, narrow_cols: int, min_depth: int) -> NarrowContraction | None:
    if pattern_kind(op) != PatternKind.MATMUL or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    reductions = [d for d, it in enumerate(op.iterator_types) if it.data == IteratorType.REDUCTION]
    if len(reductions) != 1:
        return None
    (k,) = reductions
    maps = generic_maps(op)
    out_last = maps[2].results[-1] if maps[2].results else None
    if not isinstance(out_last, AffineDimExpr):
        return None
    j = out_last.position

    def last_two(index: int) -> tuple[int | None, int | None]:
        results = maps[index].results
        dims = [r.position if isinstance(r, AffineDimExpr) else None for r in results[-2:]]
        return (None, None) if len(dims) < 2 else (dims[0], dims[1])

    for rhs, lhs in ((1, 0), (0, 1)):
        operand = op.inputs[rhs].type
        if not isinstance(operand, TensorType) or last_two(rhs) != (k, j):
            continue
        if last_two(lhs)[1] != k:
            continue
        *_, depth, cols = operand.get_shape()
        if 0 < cols < narrow_cols and depth >= min_depth:
            return NarrowContraction(op, rhs)
    return None


def _swap_last_two(m: AffineMap) -> AffineMap:
    *rest, a, b = m.results
    return AffineMap(m.num_dims, m.num_symbols, (*rest, b, a))


@dataclass
class PackNarrowRhs(RewritePattern):
    """Give one narrow contraction a packed, transposed right-hand side."""

    narrow_cols: int
    min_depth: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GenericOp, rewriter: PatternRewriter) -> None:
        found = match_narrow(op, self.narrow_cols, self.min_depth)
        if found is None:
            return
        source = op.inputs[found.rhs]
        source_type = source.type
        assert isinstance(source_type, TensorType)
        *batch, depth, cols = source_type.get_shape()
        packed_type = TensorType(source_type.element_type, [*batch, cols, depth])
        empty = tensor.EmptyOp([], packed_type)
        rank = len(batch) + 2
        identity = AffineMap.identity(rank)
        read = AffineMap(
            rank,
            0,
            (*(AffineExpr.dimension(d) for d in range(rank - 2)),)
            + (AffineExpr.dimension(rank - 1), AffineExpr.dimension(rank - 2)),
        )
        body = Block(arg_types=[source_type.element_type] * 2)
        body.add_op(YieldOp(body.args[0]))
        pack = GenericOp(
            [source],
            [empty.tensor],
            Region(body),
            [AffineMapAttr(read), AffineMapAttr(identity)],
            [IteratorTypeAttr.parallel()] * rank,
            [packed_type],
        )
        contract.ORIGIN.set(pack, "tess.permute")
        maps = generic_maps(op)
        maps[found.rhs] = _swap_last_two(maps[found.rhs])
        inputs: list[SSAValue] = list(op.inputs)
        inputs[found.rhs] = pack.res[0]
        packed = GenericOp(
            inputs,
            list(op.outputs),
            rewriter.move_region_contents_to_new_regions(op.body),
            [AffineMapAttr(m) for m in maps],
            op.iterator_types,
            [r.type for r in op.res],
        )
        packed.attributes.update(op.attributes)
        rewriter.replace(op, [empty, pack, packed])


@dataclass(frozen=True)
class TessPackNarrowPass(ModulePass):
    """Pack the narrow right-hand sides of contractions transposed; see the module docstring."""

    name = "tess-pack-narrow"

    narrow_cols: int = DEFAULT_NARROW_COLS
    min_depth: int = DEFAULT_MIN_DEPTH

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = PackNarrowRhs(self.narrow_cols, self.min_depth)
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["NarrowContraction", "TessPackNarrowPass", "match_narrow"]
