"""
Block-wide tree reductions at the gpu level (not a pass): recognising a reduce kernel's
reduction and emitting its tree, shared by `tess-gpu-reduce` (every reduction) and
`tess-gpu-contract` (a contraction's k steps split over a block, then summed by a tree).

`match_reduction` reads a `reduce` kernel of `tess-gpu-partition` (an optional fill, a
linalg op whose body is `yield combine(acc, f(inputs))` with `combine` in `IDENTITIES` and
`acc` used once, an optional elementwise epilogue) as a `Reduction`: its parts, which loop
dims index the output and which are reduced. `TreeKernel` emits one element of `f`, the
halving tree over a workgroup buffer (a barrier after each step) and the final store with
the output's initial value and the epilogue; the algorithm is `tess-gpu-reduce`'s, step 1,
in lowering/gpu/README.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, IntegerType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from tessc.lowering.gpu.gpu_common import (
    Body,
    GpuKernel,
    access_indices,
    emit_element,
    is_reduction,
    loop_ranges,
    maps_of,
    yielded,
)

_INF = float("inf")
IDENTITIES: dict[type[Operation], Callable[[Attribute], float | int]] = {
    arith.AddfOp: lambda t: 0.0,
    arith.MulfOp: lambda t: 1.0,
    arith.MaximumfOp: lambda t: -_INF,
    arith.MinimumfOp: lambda t: _INF,
    arith.MaxnumfOp: lambda t: -_INF,
    arith.MinnumfOp: lambda t: _INF,
    arith.AddiOp: lambda t: 0,
    arith.MuliOp: lambda t: 1,
    arith.MaxSIOp: lambda t: -(1 << (t.width.data - 1)),  # type: ignore[attr-defined]
    arith.MinSIOp: lambda t: (1 << (t.width.data - 1)) - 1,  # type: ignore[attr-defined]
}


@dataclass(frozen=True)
class Reduction:
    """A reduce kernel's parts."""

    fill: LinalgStructuredOperation | None
    op: LinalgStructuredOperation
    epilogue: tuple[LinalgStructuredOperation, ...]
    combine: Operation
    acc_first: bool  # combine(acc, x) rather than combine(x, acc)
    out_dims: tuple[int, ...]  # the loop dim at each output position
    red_dims: tuple[int, ...]
    ranges: tuple[int, ...]

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(self.ranges[d] for d in self.out_dims)

    @property
    def red_shape(self) -> tuple[int, ...]:
        return tuple(self.ranges[d] for d in self.red_dims)

    def combined(self, b: Body, acc: SSAValue, x: SSAValue) -> SSAValue:
        operands = (acc, x) if self.acc_first else (x, acc)
        clone = self.combine.clone()
        clone.operands = operands
        return b.add_op(clone).results[0]


def match_reduction(ops: Sequence[LinalgStructuredOperation]) -> Reduction | None:
    position = next((k for k, op in enumerate(ops) if is_reduction(op)), None)
    if position is None or position > 1 or len(ops[position].outputs) != 1:
        return None
    op, fill = ops[position], ops[0] if position == 1 else None
    body = op.body.block
    acc = body.args[-1]
    terminator = body.last_op
    assert terminator is not None
    combine = terminator.operands[0].owner
    if not isinstance(combine, Operation) or type(combine) not in IDENTITIES:
        return None
    if len(list(acc.uses)) != 1 or acc not in combine.operands:
        return None
    if not isinstance(combine.results[0].type, AnyFloat | IntegerType):
        return None
    out_map = maps_of(op)[-1]
    if not all(isinstance(e, AffineDimExpr | AffineConstantExpr) for e in out_map.results):
        return None  # keepdim outputs index their size-1 dims with a constant 0
    out_dims = tuple(e.position for e in out_map.results if isinstance(e, AffineDimExpr))
    kinds = [str(t.data) for t in op.get_iterator_types()]
    red_dims = tuple(d for d, kind in enumerate(kinds) if kind != "parallel")
    if sorted((*out_dims, *red_dims)) != list(range(len(kinds))):
        return None
    return Reduction(
        fill,
        op,
        tuple(ops[position + 1 :]),
        combine,
        combine.operands[0] is acc,
        out_dims,
        red_dims,
        loop_ranges(op),
    )


@dataclass
class TreeKernel:
    """Emits one tree-reduction kernel body (module docstring, step 1)."""

    reduction: Reduction
    gk: GpuKernel
    element_type: Attribute

    def identity(self, b: Body) -> SSAValue:
        value = IDENTITIES[type(self.reduction.combine)](self.element_type)
        return b.constants.scalar(value, self.element_type)

    def element(
        self, b: Body, out_pos: Sequence[SSAValue], red_pos: Sequence[SSAValue]
    ) -> SSAValue:
        """f(inputs) at one (output, reduction step) point."""
        reduction = self.reduction
        induction: list[SSAValue | None] = [None] * len(reduction.ranges)
        for d, v in zip(reduction.out_dims, out_pos, strict=True):
            induction[d] = v
        for d, v in zip(reduction.red_dims, red_pos, strict=True):
            induction[d] = v
        acc = reduction.op.body.block.args[-1]
        mapping = emit_element(
            b,
            reduction.op,
            induction,  # type: ignore[arg-type]
            self.gk.values,
            overrides={len(reduction.op.operands) - 1: self.identity(b)},  # not loaded
            skip=(reduction.combine,),
        )
        (x,) = (v for v in reduction.combine.operands if v is not acc)
        return mapping.get(x, x)

    def finish(self, b: Body, total: SSAValue, out_pos: Sequence[SSAValue]) -> None:
        """Combine `total` with the initial value, store it, run the epilogue."""
        reduction, values = self.reduction, self.gk.values
        output = values[reduction.op.outputs[0]]
        induction: list[SSAValue | None] = [None] * len(reduction.ranges)
        for d, v in zip(reduction.out_dims, out_pos, strict=True):
            induction[d] = v
        out_pos = access_indices(b, maps_of(reduction.op)[-1], induction)  # type: ignore[arg-type]
        if reduction.fill is not None:
            terminator = reduction.fill.body.block.last_op
            assert terminator is not None
            constant = terminator.operands[0].owner
            assert isinstance(constant, arith.ConstantOp)
            initial = b.add_op(constant.clone()).results[0]
        else:
            initial = b.load(output, list(out_pos))
        result = reduction.combined(b, initial, total)
        # The epilogue reads this element of the output (and of what it writes itself):
        # forward the values instead of loading them back, and store each buffer once, its
        # last value (every access to a written buffer is this element: the partition's
        # rule), so a bias + relu in place is one store, not two.
        epilogue = reduction.epilogue
        if not rewritten(epilogue, reduction.op.outputs[0]):
            b.store(result, output, list(out_pos))
        latest: dict[SSAValue, SSAValue] = {reduction.op.outputs[0]: result}
        for at, op in enumerate(epilogue):
            maps = maps_of(op)
            forwarded = {
                k: latest[operand]
                for k, operand in enumerate(op.operands)
                if operand in latest and maps[k] == AffineMap.identity(maps[k].num_dims)
            }
            mapping = emit_element(b, op, list(out_pos), values, forwarded)
            results = yielded(op, mapping)
            for value, target, affine_map in zip(
                results, op.outputs, maps[len(op.inputs) :], strict=True
            ):
                if not rewritten(epilogue[at + 1 :], target):
                    indices = access_indices(b, affine_map, list(out_pos))
                    b.store(value, values.get(target, target), indices)
            latest.update(zip(op.outputs, results, strict=True))

    def tree(
        self,
        b: Body,
        tree: SSAValue,
        lane: SSAValue,
        lanes: int,
        column: SSAValue | None,
    ) -> SSAValue:
        """Halve the tree buffer per step, a barrier after each; the total (lane 0's)."""

        def at(index: SSAValue) -> list[SSAValue]:
            return [index] if column is None else [index, column]

        b.barrier()
        step = lanes // 2
        while step >= 1:

            def fold(inner: Body, s: int = step) -> Sequence[SSAValue]:
                mine = inner.load(tree, at(lane))
                other = inner.load(tree, at(inner.add(lane, inner.c(s))))
                inner.store(self.reduction.combined(inner, mine, other), tree, at(lane))
                return ()

            b.when(b.cmp(lane, b.c(step), "ult"), fold)
            b.barrier()
            step //= 2
        return tree


def written_buffers(ops: Sequence[LinalgStructuredOperation]) -> set[SSAValue]:
    return {v for op in ops for v in op.outputs}


def row_dim(op: LinalgStructuredOperation, written: set[SSAValue]) -> int | None:
    """The loop dim every access of `op` to a written buffer has first, if one does."""
    dims: set[int] = set()
    for operand, affine_map in zip(op.operands, maps_of(op), strict=True):
        if operand not in written:
            continue
        first = affine_map.results[0] if affine_map.results else None
        if not isinstance(first, AffineDimExpr):
            return None
        dims.add(first.position)
    if len(dims) != 1:
        return None
    (dim,) = dims
    kinds = [str(t.data) for t in op.get_iterator_types()]
    return dim if kinds[dim] == "parallel" else None


def is_row_kernel(ops: Sequence[LinalgStructuredOperation]) -> bool:
    """Whether one block per row can run all of `ops` (`tess-gpu-rows`)."""
    written = written_buffers(ops)
    extents: set[int] = set()
    for op in ops:
        dim = row_dim(op, written)
        if dim is None:
            return False
        extents.add(loop_ranges(op)[dim])
        if is_reduction(op):
            reduction = match_reduction([op])
            if reduction is None:
                return False
            rest = [d for d in reduction.out_dims if d != dim]
            if any(loop_ranges(op)[d] != 1 for d in rest):
                return False  # one element per row
    return len(extents) == 1


def rewritten(ops: Sequence[LinalgStructuredOperation], buffer: SSAValue) -> bool:
    """Whether one of `ops` writes `buffer` through the identity map (the same element)."""
    for op in ops:
        maps = maps_of(op)[len(op.inputs) :]
        for target, affine_map in zip(op.outputs, maps, strict=True):
            if target == buffer and affine_map == AffineMap.identity(affine_map.num_dims):
                return True
    return False


__all__ = [
    "IDENTITIES",
    "Reduction",
    "TreeKernel",
    "is_row_kernel",
    "match_reduction",
    "row_dim",
    "written_buffers",
]
