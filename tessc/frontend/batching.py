"""
Batching rules: a traced per-example `tess` block rebuilt with a batch dim, op by op.

`vmap` (`tessc.frontend.vmap`) traces the function once on one example's shapes, then
`batch_block` walks that block in order and builds, into the enclosing trace, each op with
the batch dim added where its operands carry one (JAX's batching rules, at the `tess`
level): an op none of whose operands is batched is cloned as it is; a batched value has
its batch dim first. Elementwise ops and `select` align a batched operand's example dims
with the others' by a reshape (`(B, 3)` beside an unbatched `(4, 3)` becomes `(B, 1, 3)`),
so unbatched operands broadcast and are never copied B times; reductions, permutes,
slices, pads and arg-reductions shift their dims by one; `take`/`scatter_add` with batched
indices gather from the batch-flattened operand; convolutions and pools fold the batch
into their N dim; the attention ops take it as one more batch dim. The result is
ordinary `tess` ops in one trace, so the batched program fuses, differentiates and lowers
like any other. An op without a rule is a TessError naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DenseArrayBase, IntegerType, TensorType, i64
from xdsl.ir import Attribute, Operation, SSAValue

from tessc.dialects import tess, tess_attention, tess_conv, tess_index
from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import TessError, shape_of
from tessc.dialects.tess import element_type_of


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _dense(op: Operation, name: str) -> tuple[int, ...]:
    attribute = op.properties[name]
    assert isinstance(attribute, DenseArrayBase)
    return tuple(int(v) for v in attribute.get_values())


@dataclass
class BatchedBlock:
    """The rebuilding of one traced block: `values` maps each of its values to the
    enclosing trace's value and whether that has the batch dim (first, of `size`)."""

    builder: TessBuilder
    size: int
    values: dict[SSAValue, tuple[SSAValue, bool]] = field(default_factory=dict)

    # -- operands --------------------------------------------------------------------------

    def lift(self, value: SSAValue) -> SSAValue:
        return self.values[value][0]

    def batched(self, value: SSAValue) -> bool:
        return self.values[value][1]

    def aligned(self, value: SSAValue, rank: int) -> SSAValue:
        """The enclosing value of `value`, a batched one reshaped to `(B,) + (1,) * k +
        example shape` of example rank `rank`, so it broadcasts with unbatched operands."""
        outer = self.lift(value)
        if not self.batched(value):
            return outer
        example = shape_of(value)
        if len(example) >= rank:
            return outer
        return self.builder.reshape(outer, (self.size, *(1,) * (rank - len(example)), *example))

    def materialized(self, value: SSAValue) -> SSAValue:
        """`value` with the batch dim, an unbatched one broadcast to it."""
        outer = self.lift(value)
        if self.batched(value):
            return outer
        shape = shape_of(value)
        expanded = self.builder.reshape(outer, (1, *shape))
        return self.builder.broadcast_to(expanded, (self.size, *shape))

    # -- results ---------------------------------------------------------------------------

    def result_type(self, value: SSAValue) -> TensorType:
        return TensorType(element_type_of(value), (self.size, *shape_of(value)))

    def rebuild(
        self,
        op: Operation,
        operands: Sequence[SSAValue],
        properties: dict[str, Attribute] | None = None,
    ) -> SSAValue:
        """`op` again on `operands`, its result given the batch dim, `properties` replaced."""
        new = type(op).create(
            operands=list(operands),
            result_types=[self.result_type(op.results[0])],
            properties={**op.properties, **(properties or {})},
            attributes=dict(op.attributes),
        )
        new.verify()
        return self.builder.insert(new)


Rule = Callable[[BatchedBlock, Operation], SSAValue]


def _elementwise(block: BatchedBlock, op: Operation) -> SSAValue:
    """Unary, binary, compare, cast, select, broadcast_to: operands aligned to the
    result's example rank (broadcast_to's operand to its own target's)."""
    rank = len(shape_of(op.results[0]))
    return block.rebuild(op, [block.aligned(v, rank) for v in op.operands])


def _lifted(block: BatchedBlock, op: Operation) -> SSAValue:
    """Reshape, one_hot: the operand as it is, the batch dim prepended to the result."""
    return block.rebuild(op, [block.lift(op.operands[0])])


def _shifted(name: str) -> Rule:
    """An op whose dim property `name` counts the operand's dims: each moves up by one."""

    def rule(block: BatchedBlock, op: Operation) -> SSAValue:
        dims = [d + 1 for d in _dense(op, name)]
        return block.rebuild(op, [block.lift(op.operands[0])], {name: _ints(dims)})

    return rule


def _permute(block: BatchedBlock, op: Operation) -> SSAValue:
    dims = [0, *(d + 1 for d in _dense(op, "dims"))]
    return block.rebuild(op, [block.lift(op.operands[0])], {"dims": _ints(dims)})


def _slice_like(block: BatchedBlock, op: Operation) -> SSAValue:
    offsets, strides = _dense(op, "offsets"), _dense(op, "strides")
    return block.rebuild(
        op,
        [block.lift(op.operands[0])],
        {"offsets": _ints((0, *offsets)), "strides": _ints((1, *strides))},
    )


def _pad(block: BatchedBlock, op: Operation) -> SSAValue:
    low, high = _dense(op, "low"), _dense(op, "high")
    return block.rebuild(
        op, [block.lift(op.operands[0])], {"low": _ints((0, *low)), "high": _ints((0, *high))}
    )


def _concat(block: BatchedBlock, op: Operation) -> SSAValue:
    (dim,) = _dense(op, "dim")
    return block.rebuild(
        op, [block.materialized(v) for v in op.operands], {"dim": _ints((dim + 1,))}
    )


def _matmul(block: BatchedBlock, op: Operation) -> SSAValue:
    """Batched matmul broadcasts its batch dims: operands aligned as elementwise ones."""
    return _elementwise(block, op)


def _linear_indices(block: BatchedBlock, indices: SSAValue, extent: int) -> SSAValue:
    """Batched indices into a dim of `extent`, normalised (negative ones count back, the
    rest clamped, as `take` does) and offset by `b * extent`: indices into the batch and
    that dim flattened together."""
    b = block.builder
    outer = block.lift(indices)
    shape = shape_of(outer)
    dtype = element_type_of(outer)
    assert isinstance(dtype, IntegerType)
    wrapped = b.select(b.lt(outer, 0), b.add(outer, extent), outer)
    clamped = b.minimum(b.maximum(wrapped, 0), extent - 1)
    row = b.insert(tess.IotaOp(TensorType(dtype, (block.size, *(1,) * (len(shape) - 1)))))
    return b.add(clamped, b.mul(row, extent))


def _take(block: BatchedBlock, op: Operation) -> SSAValue:
    """`take(x, idx, dim)`. Unbatched indices: `dim + 1`. Batched indices into an
    unbatched `x`: the index dims (batch first) land at `dim`, moved to the front. Both
    batched: a take from `x` with its batch and `dim` flattened together."""
    b = block.builder
    x, indices = op.operands
    (dim,) = _dense(op, "dim")
    if not block.batched(indices):
        return _shifted("dim")(block, op)
    index_rank = len(shape_of(indices))
    if not block.batched(x):
        gathered = b.take(block.lift(x), block.lift(indices), dim)
        rank = len(shape_of(gathered))
        return b.permute(gathered, [dim, *(d for d in range(rank) if d != dim)])
    example = shape_of(x)
    rest = [d + 1 for d in range(len(example)) if d != dim]
    flat = b.permute(block.lift(x), [0, dim + 1, *rest])
    flat = b.reshape(flat, (block.size * example[dim], *(example[d - 1] for d in rest)))
    gathered = b.take(flat, _linear_indices(block, indices, example[dim]), 0)
    # (B, *index dims, *rest) -> (B, *rest before dim, *index dims, *rest after dim)
    index_dims = list(range(1, 1 + index_rank))
    rest_dims = list(range(1 + index_rank, 1 + index_rank + len(rest)))
    return b.permute(gathered, [0, *rest_dims[:dim], *index_dims, *rest_dims[dim:]])


def _scatter_add(block: BatchedBlock, op: Operation) -> SSAValue:
    """`scatter_add(y, idx, dim)`, take's adjoint: batched indices scatter into the batch
    and `dim` flattened together (the transpose of `_take`'s gather)."""
    b = block.builder
    y, indices = op.operands
    (dim,) = _dense(op, "dim")
    if not block.batched(indices):
        return _shifted("dim")(block, op)
    target = shape_of(op.results[0])
    index_rank = len(shape_of(indices))  # its example rank + 1 is its batched rank
    rest = [d for d in range(len(target)) if d != dim]
    updates = block.materialized(y)  # (B, *target[:dim], *index dims, *target[dim+1:])
    index_dims = list(range(1 + dim, 1 + dim + index_rank))
    before = list(range(1, 1 + dim))
    after = list(range(1 + dim + index_rank, 1 + len(shape_of(y))))
    updates = b.permute(updates, [0, *index_dims, *before, *after])
    extent = target[dim]
    linear = _linear_indices(block, indices, extent)
    flat = b.scatter_add(updates, linear, 0, (block.size * extent, *(target[d] for d in rest)))
    unflat = b.reshape(flat, (block.size, extent, *(target[d] for d in rest)))
    order = [0, *(2 + rest.index(d) if d != dim else 1 for d in range(len(target)))]
    return b.permute(unflat, order)


def _folded_into_n(block: BatchedBlock, op: Operation) -> SSAValue:
    """Conv, pool, unpool: the batch folded into the N dim; a batched weight has no rule."""
    if isinstance(op, tess_conv.ConvOp) and block.batched(op.operands[1]):
        raise TessError(
            "vmap over a convolution's weights is not supported (batch the input, or "
            "loop over the weights)"
        )
    b = block.builder
    operands = []
    for v in op.operands:
        if v is op.operands[0] or isinstance(op, tess_conv.UnpoolOp):
            shape = shape_of(v)
            operands.append(b.reshape(block.materialized(v), (block.size * shape[0], *shape[1:])))
        else:
            operands.append(block.lift(v))
    result = shape_of(op.results[0])
    new = type(op).create(
        operands=operands,
        result_types=[
            TensorType(element_type_of(op.results[0]), (block.size * result[0], *result[1:]))
        ],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    new.verify()
    return b.reshape(b.insert(new), (block.size, *result))


def _attention(block: BatchedBlock, op: Operation) -> SSAValue:
    """The attention ops: the batch is one more leading batch dim of every operand (an
    unbatched one broadcast to it), but a mask, whose dims broadcast: size 1 there."""
    b = block.builder
    mask = getattr(op, "mask", None)
    operands = []
    for v in op.operands:
        if v is mask and not block.batched(v):
            operands.append(b.reshape(block.lift(v), (1, *shape_of(v))))
        else:
            operands.append(block.materialized(v))
    result = shape_of(op.results[0])
    new = type(op).create(
        operands=operands,
        result_types=[TensorType(element_type_of(op.results[0]), (block.size, *result))],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    new.verify()
    return b.insert(new)


RULES: dict[type[Operation], Rule] = {
    **dict.fromkeys(tess.UNARY_OPS, _elementwise),
    **dict.fromkeys(tess.BINARY_OPS, _elementwise),
    **dict.fromkeys(tess.BITWISE_OPS, _elementwise),
    tess.CastOp: _elementwise,
    tess.StopGradientOp: _elementwise,
    tess.SelectOp: _elementwise,
    tess.BroadcastToOp: _elementwise,
    tess.MatmulOp: _matmul,
    tess_index.OneHotOp: _lifted,
    tess.ReshapeOp: _lifted,
    tess.PermuteOp: _permute,
    **dict.fromkeys((*tess.REDUCE_OPS, tess.ProdOp), _shifted("dims")),
    tess_index.ArgMaxOp: _shifted("dim"),
    tess_index.ArgMinOp: _shifted("dim"),
    tess_index.SliceOp: _slice_like,
    tess_index.UnsliceOp: _slice_like,
    tess_index.ConcatOp: _concat,
    tess_index.TakeOp: _take,
    tess_index.ScatterAddOp: _scatter_add,
    tess_conv.PadOp: _pad,
    tess_conv.ConvOp: _folded_into_n,
    tess_conv.PoolOp: _folded_into_n,
    tess_conv.UnpoolOp: _folded_into_n,
    **dict.fromkeys(tess_attention.ATTENTION_OPS, _attention),
}
"""The batching rule of each `tess` op (ops with no operands, `fill` and `iota`, are
never batched)."""


def batch_block(block: BatchedBlock, ops: Sequence[Operation]) -> None:
    """Rebuild `ops` (a traced block's, in order) into `block.builder`, batched where
    their operands are; `block.values` must map the block's arguments."""
    for op in ops:
        if not any(block.batched(v) for v in op.operands):
            clone = op.clone(value_mapper={v: block.lift(v) for v in op.operands})
            block.builder.insert(clone)
            for old, new in zip(op.results, clone.results, strict=True):
                block.values[old] = (new, False)
            continue
        rule = RULES.get(type(op))
        if rule is None:
            raise TessError(f"vmap has no batching rule for `{op.name}`")
        block.values[op.results[0]] = (rule(block, op), True)


__all__ = ["RULES", "BatchedBlock", "batch_block"]
