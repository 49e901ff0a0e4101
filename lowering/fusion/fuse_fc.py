"""
`tess-fuse`'s horizontal step (`horizontal-fc`): products that share their right operand
become ONE contraction over the stacked left operands (the seed's `Y1 = X1 W`, `Y2 = X2 W`
-> `[Y1; Y2] = [X1; X2] W`).

A member is a 2-D contraction `C[i, j] = init; C[i, j] += A(i, k) * B[k, j]` whose left
operand is read at `(i, k)` or, transposed, at `(k, i)` (`X.T @ dY`, a weight gradient:
then the rows to stack are A's columns), whose init is a fill (a generic without inputs)
it alone reads. Members with the same right operand, left map, body and init body stack:
each row of the product reads one row of the left operand and the whole right operand,
so the rows of `[A1; A2] B` are the rows of `A1 B` then those of `A2 B`, each summed in
the same order. The stacked left operand is a view where the members' left operands are
adjacent slices of one tensor (no copy), else a copy generic; the product's results are
row slices of the stacked product (views). It is placed before the first member by which
every left operand is computed; a member whose result is read before that is left out.
The decision and its report: lowering/fusion/README.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, IntegerAttr, TensorType
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract
from tessc.dialects.kernel import wrap_in_group
from tessc.lowering.linalg.generic_analysis import (
    body_fingerprint,
    generic_maps,
    reads_captured,
    reads_loop_indices,
)

ROWS_LEFT = AffineMap(3, 0, (AffineExpr.dimension(0), AffineExpr.dimension(2)))
"""The left operand read at (i, k): its rows are dim 0."""
ROWS_LEFT_T = AffineMap(3, 0, (AffineExpr.dimension(2), AffineExpr.dimension(0)))
"""The left operand read at (k, i) (`X.T @ dY`): its rows are dim 1."""
RIGHT = AffineMap(3, 0, (AffineExpr.dimension(2), AffineExpr.dimension(1)))
OUTPUT = AffineMap(3, 0, (AffineExpr.dimension(0), AffineExpr.dimension(1)))


@dataclass
class Product:
    """A member: the contraction, its operands, its init fill, and its left operand's dim
    holding the output's rows."""

    op: GenericOp
    left: SSAValue
    right: SSAValue
    init: GenericOp
    row_dim: int

    def key(self) -> Hashable:
        """Members with equal keys stack."""
        return (
            self.right,
            self.row_dim,
            body_fingerprint(self.op.body.block),
            body_fingerprint(self.init.body.block),
            element(self.left),
        )


def shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def element(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type


def as_product(op: GenericOp) -> Product | None:
    """`op` as a member, or None."""
    if len(op.results) != 1 or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    kinds = [it.data for it in op.iterator_types]
    if kinds != [IteratorType.PARALLEL, IteratorType.PARALLEL, IteratorType.REDUCTION]:
        return None
    left_map, right_map, out_map = generic_maps(op)
    if right_map != RIGHT or out_map != OUTPUT or left_map not in (ROWS_LEFT, ROWS_LEFT_T):
        return None
    if reads_loop_indices(op) or reads_captured(op):
        return None
    if not all(isinstance(v.type, TensorType) for v in op.operands):
        return None
    init = op.outputs[0].owner
    if not isinstance(init, GenericOp) or init.inputs or len(init.results) != 1:
        return None
    if init.results[0].uses.get_length() != 1 or init.body.block.args[0].uses:
        return None
    if reads_captured(init) or reads_loop_indices(init) or init.parent is not op.parent:
        return None
    row_dim = 0 if left_map == ROWS_LEFT else 1
    return Product(op, op.inputs[0], op.inputs[1], init, row_dim)


def defined_before(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is available before `op` (in `op`'s block)."""
    block = op.parent_block()
    assert block is not None
    if isinstance(value, BlockArgument):
        return True
    owner = block.find_ancestor_op_in_block(value.owner)  # type: ignore[arg-type]
    return owner is not None and owner.is_before_in_block(op)


def anchor_of(members: Sequence[Product]) -> Operation:
    """Where the stacked product goes: before the first member by which every member's
    left operand is computed (the right one is shared, so computed before them all)."""
    for member in members:
        if all(defined_before(m.left, member.op) for m in members if m is not member):
            return member.op
    return members[-1].op


def read_before(member: Product, anchor: Operation) -> bool:
    """Whether `member`'s result is read before `anchor` (or outside its block)."""
    block = anchor.parent_block()
    assert block is not None
    for use in member.op.results[0].uses:
        user = block.find_ancestor_op_in_block(use.operation)
        if user is None or not anchor.is_before_in_block(user):
            return True
    return False


def adjacent_view(lefts: Sequence[SSAValue], row_dim: int) -> tuple[SSAValue, list[int]] | None:
    """The source and offsets of one slice holding `lefts` back to back along `row_dim`,
    in order, when each is a unit-stride static slice of it spanning the same other dim;
    else None."""
    slices = [v.owner for v in lefts]
    first = slices[0]
    if not isinstance(first, tensor.ExtractSliceOp) or len(shape(first.source)) != 2:
        return None
    other = 1 - row_dim
    offsets0 = list(first.static_offsets.get_values())
    position = offsets0[row_dim]
    for value, s in zip(lefts, slices, strict=True):
        if not isinstance(s, tensor.ExtractSliceOp) or s.source is not first.source:
            return None
        if s.offsets or s.sizes or s.strides or tuple(s.static_strides.get_values()) != (1, 1):
            return None
        offsets = s.static_offsets.get_values()
        if offsets[other] != offsets0[other] or offsets[row_dim] != position:
            return None
        position += shape(value)[row_dim]
    return first.source, offsets0


def index_constant(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr.from_index_int_value(value))).result


def stacked_copy(b: Builder, lefts: Sequence[SSAValue], row_dim: int) -> SSAValue:
    """A generic without inputs that copies `lefts` back to back along `row_dim`, each
    element read where it lies (`tensor.extract` at the clamped row of its source)."""
    sizes = [shape(v)[row_dim] for v in lefts]
    stacked = list(shape(lefts[0]))
    stacked[row_dim] = sum(sizes)
    result_type = TensorType(element(lefts[0]), stacked)
    empty = b.insert(tensor.EmptyOp([], result_type)).tensor
    block = Block(arg_types=[element(lefts[0])])
    body = Builder(InsertPoint.at_end(block))
    indices = [body.insert(IndexOp(d)).result for d in range(2)]
    row = indices[row_dim]
    value: SSAValue | None = None
    start = 0
    for left, size in zip(lefts, sizes, strict=True):
        if size:
            local = body.insert(arith.SubiOp(row, index_constant(body, start))).result
            local = body.insert(arith.MaxSIOp(local, index_constant(body, 0))).result
            local = body.insert(arith.MinSIOp(local, index_constant(body, size - 1))).result
            where = [local if d == row_dim else indices[d] for d in range(2)]
            read = body.insert(tensor.ExtractOp(left, where, element(left))).result
            if value is None:
                value = read
            else:
                before = body.insert(arith.CmpiOp(row, index_constant(body, start), "slt"))
                value = body.insert(arith.SelectOp(before.result, value, read)).result
        start += size
    if value is None:  # every member has no rows: nothing to copy
        return empty
    body.insert(YieldOp(value))
    copy = GenericOp(
        [],
        [empty],
        Region(block),
        [AffineMapAttr(AffineMap.identity(2))],
        [IteratorTypeAttr.parallel()] * 2,
        [result_type],
    )
    contract.ORIGIN.set(copy, "tess.concat")
    return b.insert(copy).results[0]


def stack_products(members: Sequence[Product], anchor: Operation, report: bool) -> None:
    """Replace `members` (in block order, none read before `anchor`) by one product over
    their stacked left operands, before `anchor`."""
    b = Builder(InsertPoint.before(anchor))
    lefts = [m.left for m in members]
    row_dim = members[0].row_dim
    view = adjacent_view(lefts, row_dim)
    if view is not None:
        source, offsets = view
        sizes = list(shape(lefts[0]))
        sizes[row_dim] = sum(shape(v)[row_dim] for v in lefts)
        if offsets == [0, 0] and tuple(sizes) == shape(source):
            stacked = source
        else:
            stacked = b.insert(
                tensor.ExtractSliceOp.from_static_parameters(source, offsets, sizes, [1, 1])
            ).result
        how = "rows a view of one tensor (no copy)"
    else:
        stacked = stacked_copy(b, lefts, row_dim)
        how = "rows copied once (the left operands are not adjacent)"
    rows = shape(stacked)[row_dim]
    columns = shape(members[0].op.results[0])[1]
    result_type = TensorType(element(members[0].op.results[0]), [rows, columns])
    first_init = members[0].init
    fill = GenericOp(
        [],
        [b.insert(tensor.EmptyOp([], result_type)).tensor],
        Region(Block(arg_types=[element(first_init.results[0])])),
        first_init.indexing_maps,
        first_init.iterator_types,
        [result_type],
    )
    copy_body(first_init, fill)
    fill.attributes.update(first_init.attributes)
    b.insert(fill)
    first = members[0].op
    product = GenericOp(
        [stacked, first.inputs[1]],
        [fill.results[0]],
        Region(Block(arg_types=[a.type for a in first.body.block.args])),
        first.indexing_maps,
        first.iterator_types,
        [result_type],
    )
    copy_body(first, product)
    product.attributes.update(first.attributes)
    if report:
        contract.FC_STACKED.set(product, f"{len(members)} products, {how}")
    b.insert(product)
    start = 0
    for member in members:
        count = shape(member.op.results[0])[0]
        rows_of = tensor.ExtractSliceOp.from_static_parameters(
            product.results[0], [start, 0], [count, columns], [1, 1]
        )
        b.insert(rows_of)
        rows_of.result.name_hint = member.op.results[0].name_hint
        member.op.results[0].replace_all_uses_with(rows_of.result)
        start += count
    if view is None and isinstance(stacked.owner, GenericOp):
        # The copy shares the product's row loop: one kernel copies row i, then
        # multiplies it (the left operand "packed" where each source lies).
        wrap_in_group([stacked.owner, fill, product])
    for member in members:
        empty = member.init.outputs[0].owner
        member.op.detach()
        member.op.erase()
        member.init.detach()
        member.init.erase()
        if isinstance(empty, tensor.EmptyOp) and not empty.tensor.uses:
            empty.detach()
            empty.erase()
    for left in lefts:  # slices the stacked view replaced
        if isinstance(left.owner, tensor.ExtractSliceOp) and not left.uses:
            left.owner.detach()
            left.owner.erase()


def copy_body(source: GenericOp, target: GenericOp) -> None:
    """`source`'s body, cloned into `target`'s (empty but for its arguments) block."""
    block = target.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(source.body.block.args, block.args, strict=True))
    for op in source.body.block.ops:
        block.add_op(op.clone(mapping))


def stack_all(block: Block, report: bool) -> None:
    """Stack every class of at least two products of `block` that share their right
    operand (see the module docstring); under `report`, say why a product that shares it
    was left out."""
    classes: dict[Hashable, list[Product]] = {}
    for op in block.ops:
        if isinstance(op, GenericOp) and (product := as_product(op)) is not None:
            classes.setdefault(product.key(), []).append(product)
    for members in classes.values():
        # The same product twice is tess-cse-generics' to merge, not a stack of copies.
        lefts: dict[SSAValue, Product] = {}
        for member in members:
            lefts.setdefault(member.left, member)
        members = list(lefts.values())
        refused: list[Product] = []
        while len(members) >= 2:
            anchor = anchor_of(members)
            early = [m for m in members if m.op is not anchor and read_before(m, anchor)]
            if not early:
                break
            refused += early
            members = [m for m in members if m not in early]
        if report:
            for m in refused:
                contract.FC_REFUSED.set(
                    m.op, "its result is read before the stacked product could be computed"
                )
        if len(members) >= 2:
            stack_products(members, anchor_of(members), report)


__all__ = ["Product", "as_product", "stack_all", "stack_products"]
