"""
`tess-fuse`'s window step (`pool-windows`): a pool over non-overlapping windows of a conv
becomes one `linalg.generic` that computes each conv output inside the pool's loops.

After the greedy fusion the pool `P` reads the conv `C` through a window map (`oh * s + i`)
with the bias and relu already in its body. Where each conv output is read at most once
(window <= stride), the fused op runs P's loops, then C's reduction loops innermost: a
second output, the size of P's, carries the conv's partial sum (reset to C's fill value
when C's reduction loops are all at 0), and P's combine runs when they are all at their
last value. Rows and columns the pool floor-drops are never computed, and no buffer of the
conv's output exists. Refused (and reported) when the windows overlap (each conv output
would be computed several times), when the conv output is read elsewhere (a backward pass
saves it), or when the conv's init is not a constant fill. A conv deep enough for
`tess-conv-tiles` (`max-depth`, 16 channels) is fused only where its tiles can take the pool
as their epilogue (`loops/conv_pool.py`: 1-D or 2-D, each window as wide as its stride);
else it is left to the conv tiles alone. A shallower one (a first layer) runs the fused nest.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, TensorType
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineDimExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from tessc.dialects import contract
from tessc.lowering.linalg.generic_analysis import generic_maps, labels

DEFAULT_MAX_DEPTH = 16
"""`tess-conv-tiles`' `min-depth`: from this many channels a conv is register-tiled."""

LinearForm = tuple[dict[int, int], int]
"""An affine expression as {loop: coefficient} and a constant."""


def _is_reduction_suffix(op: GenericOp, rank: int) -> bool:
    kinds = [it.data for it in op.iterator_types]
    return all(k == IteratorType.PARALLEL for k in kinds[:rank]) and all(
        k == IteratorType.REDUCTION for k in kinds[rank:]
    )


def _linear_forms(m: AffineMap) -> list[LinearForm] | None:
    """Each result of `m` as a linear form, or None if one is not linear."""
    n = m.num_dims
    zero = m.eval([0] * n, [])
    units = [m.eval([int(d == k) for d in range(n)], []) for k in range(n)]
    doubles = [m.eval([2 * int(d == k) for d in range(n)], []) for k in range(n)]
    forms: list[LinearForm] = []
    for r, base in enumerate(zero):
        coeffs = {k: units[k][r] - base for k in range(n) if units[k][r] != base}
        if any(doubles[k][r] - base != 2 * c for k, c in coeffs.items()):
            return None
        forms.append((coeffs, base))
    return forms


def overlap(read: AffineMap, extents: Sequence[int]) -> str | None:
    """Why the pool's read of the conv output may read an element twice, or None: every
    loop indexes one dim, and there its terms nest (a window within its stride)."""
    forms = _linear_forms(read)
    if forms is None:
        return "the pool reads the conv output through a non-linear map"
    seen: set[int] = set()
    for position, (coeffs, _) in enumerate(forms):
        if seen & coeffs.keys():
            return "a pool loop indexes two dims of the conv output"
        seen |= coeffs.keys()
        span = 0
        for loop, coeff in sorted(coeffs.items(), key=lambda item: abs(item[1])):
            if abs(coeff) <= span:
                return (
                    f"the pool windows overlap on dim {position} (stride {abs(coeff)} < window "
                    f"{span + 1}): each conv output would be computed more than once"
                )
            span += abs(coeff) * (extents[loop] - 1)
    unused = [d for d in range(len(extents)) if d not in seen and extents[d] > 1]
    if unused:
        return f"the pool reads each conv output {pymath.prod(extents[d] for d in unused)} times"
    return None


def constant_fill(init: SSAValue) -> GenericOp | None:
    """The generic writing `init` if it has no inputs and yields a constant of its body."""
    op = init.owner
    if not isinstance(op, GenericOp) or op.inputs or len(op.res) != 1:
        return None
    ops = list(op.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[0], arith.ConstantOp):
        return None
    return op


def conv_input(pool: GenericOp) -> tuple[int, GenericOp] | None:
    """The input of a reduction `pool` that it reads through windows (`p * s + i`) and a
    reduction generic computes, if any."""
    if not any(it.data == IteratorType.REDUCTION for it in pool.iterator_types):
        return None
    maps = generic_maps(pool)
    for index, value in enumerate(pool.inputs):
        producer = value.owner
        if (
            isinstance(value, OpResult)
            and any(isinstance(r, AffineBinaryOpExpr) for r in maps[index].results)
            and isinstance(producer, GenericOp)
            and len(producer.res) == 1
            and any(it.data == IteratorType.REDUCTION for it in producer.iterator_types)
        ):
            return index, producer
    return None


def refusal(pool: GenericOp, index: int, conv: GenericOp, max_depth: int) -> str | None:
    """Why the conv feeding input `index` of `pool` cannot be computed inside it, or None.
    A conv of `max_depth` channels or more (its first reduction loop) is left to
    `tess-conv-tiles` (0: no limit)."""
    result = conv.res[0]
    assert isinstance(result.type, TensorType)
    rank = len(result.type.get_shape())
    conv_maps = generic_maps(conv)
    identity = tuple(AffineDimExpr(d) for d in range(rank))
    if conv_maps[-1].results != identity or not _is_reduction_suffix(conv, rank):
        return "the producer's loops are not its output dims then reductions"
    if conv.parent_block() is not pool.parent_block():
        return "the producer is in another block"
    readers = [u for u in result.uses if u.operation is not pool or u.index != index]
    if readers and siblings(pool, index, conv) is None:
        return (
            f"the conv output is also read by {len(readers)} other use(s) (returned, or "
            "saved for the backward pass): it must be written anyway"
        )
    if constant_fill(conv.outputs[0]) is None:
        return "the conv's init is not a constant fill"
    if any(isinstance(o, IndexOp) for o in conv.body.walk()):
        return "the conv's body reads its loop indices"
    try:
        extents = tuple(pool.get_static_loop_ranges())
        conv_extents = tuple(conv.get_static_loop_ranges())
    except (NotImplementedError, ValueError):
        return "loop extents are not static"
    if len(conv_extents) == rank:
        return "the producer has no reduction loops"
    read = generic_maps(pool)[index]
    if max_depth and conv_extents[rank] >= max_depth and (why := _untiled(read, extents)):
        return (
            f"the conv reduces over {conv_extents[rank]} channels (>= {max_depth}) and {why}: "
            "tess-conv-tiles register-tiles the conv alone"
        )
    return overlap(read, extents)


def _untiled(read: AffineMap, extents: Sequence[int]) -> str | None:
    """Why `tess-conv-tiles` cannot run the fused nest as tiles with the pool as their
    epilogue (`conv_pool.py`), or None: 1 or 2 pooled dims, each read as `p * W + i`
    with `i` over a window of W (the windows tile the conv output exactly)."""
    forms = _linear_forms(read)
    if forms is None or len(forms) - 2 not in (1, 2):
        return "the pool is not 1-D or 2-D"
    for position, (coeffs, base) in enumerate(forms[2:], start=2):
        window = [d for d in coeffs if coeffs[d] == 1]
        pooled = [d for d in coeffs if coeffs[d] != 1]
        if base or len(coeffs) != 2 or len(window) != 1 or len(pooled) != 1:
            return f"the pool reads dim {position} through other than `p * W + i`"
        if coeffs[pooled[0]] != extents[window[0]]:
            return f"the pool's window on dim {position} is not its stride"
    return None


def _index_test(b: Builder, loops: Sequence[int], values: Sequence[int]) -> SSAValue:
    """`loop_0 == values_0 and ...` on the body's loop indices."""
    test: SSAValue | None = None
    for loop, value in zip(loops, values, strict=True):
        index = b.insert(IndexOp(loop)).result
        bound = b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result
        equal = b.insert(arith.CmpiOp(index, bound, "eq")).result
        test = equal if test is None else b.insert(arith.AndIOp(test, equal)).result
    assert test is not None
    return test


def _inline(b: Builder, block: Block, mapping: dict[SSAValue, SSAValue]) -> list[SSAValue]:
    """Clone `block`'s ops (its args mapped) at `b`; the values it yields."""
    for op in block.ops:
        if isinstance(op, YieldOp):
            return [mapping.get(v, v) for v in op.operands]
        clone = op.clone(value_mapper=mapping)
        b.insert(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
    raise AssertionError("a linalg.generic body ends with linalg.yield")


Member = tuple[GenericOp, int]
"""A pool fused with the conv, and the position of its conv input."""


def siblings(pool: GenericOp, index: int, conv: GenericOp) -> list[Member] | None:
    """`pool` and every other reader of the conv's output, if each is a generic like it:
    the same block, iterators and loop extents, reading the conv output once through the
    same map (a max pool's argmax for the backward pass); else None."""
    result = conv.res[0]
    members: list[Member] = [(pool, index)]
    read = generic_maps(pool)[index]
    for use in result.uses:
        other = use.operation
        if other is pool and use.index == index:
            continue
        if (
            not isinstance(other, GenericOp)
            or other is pool
            or other.parent_block() is not pool.parent_block()
            or use.index >= len(other.inputs)
            or list(other.inputs).count(result) != 1
            or [it.data for it in other.iterator_types] != [it.data for it in pool.iterator_types]
            or generic_maps(other)[use.index] != read
        ):
            return None
        try:
            if tuple(other.get_static_loop_ranges()) != tuple(pool.get_static_loop_ranges()):
                return None
        except (NotImplementedError, ValueError):
            return None
        members.append((other, use.index))
    return members


def _hoist(value: SSAValue, point: Operation, order: dict[Operation, int]) -> None:
    """Move the ops of `point`'s block computing `value` above `point` (pure ops: the
    fills and views a later sibling pool reads)."""
    owner = value.owner
    if not isinstance(owner, Operation) or owner not in order or order[owner] < order[point]:
        return
    for operand in owner.operands:
        _hoist(operand, point, order)
    owner.detach()
    Rewriter.insert_op(owner, InsertPoint.before(point))
    order[owner] = order[point] - 0.5  # type: ignore[assignment]


def build_fused(members: Sequence[Member], conv: GenericOp, rewriter: Rewriter) -> GenericOp:
    """The fused generic (module docstring) of `conv` and the pools `members`, inserted
    before the first of them."""
    block_ops = members[0][0].parent_block()
    assert block_ops is not None
    order = {op: i for i, op in enumerate(block_ops.ops)}
    first = min((p for p, _ in members), key=lambda p: order[p])
    for other, index in members:
        for k, value in enumerate(other.operands):
            if not (k == index and value is conv.res[0]):
                _hoist(value, first, order)
    pool, index = members[0]
    conv_maps = generic_maps(conv)
    num_pool_loops = len(pool.iterator_types)
    conv_extents = tuple(conv.get_static_loop_ranges())
    rank = len(conv_maps[-1].results)
    reductions = list(range(num_pool_loops, num_pool_loops + len(conv_extents) - rank))
    num_loops = reductions[-1] + 1
    # Fused loops -> conv loops: its output dims as the pool reads them, then its reductions.
    to_conv = AffineMap(
        num_loops,
        0,
        (*generic_maps(pool)[index].results, *(AffineDimExpr(d) for d in reductions)),
    )
    widen = AffineMap(num_loops, 0, tuple(AffineDimExpr(d) for d in range(num_pool_loops)))
    conv_inputs = list(conv.inputs)
    inputs: list[SSAValue] = [*conv_inputs]
    maps = [m.compose(to_conv) for m in conv_maps[: len(conv_inputs)]]
    for member, k in members:
        member_maps = generic_maps(member)
        for i, value in enumerate(member.inputs):
            if i != k:
                inputs.append(value)
                maps.append(member_maps[i].compose(widen))
    outputs: list[SSAValue] = []
    for member, _ in members:
        outputs.extend(member.outputs)
        maps.extend(m.compose(widen) for m in generic_maps(member)[len(member.inputs) :])
    maps.append(generic_maps(pool)[len(pool.inputs)].compose(widen))
    conv_type = conv.res[0].type
    first_out = pool.outputs[0].type
    assert isinstance(conv_type, TensorType) and isinstance(first_out, TensorType)
    partial_type = TensorType(conv_type.element_type, first_out.get_shape())
    partial = tensor.EmptyOp([], partial_type)
    rewriter.insert_op(partial, InsertPoint.before(first))
    outputs.append(partial.tensor)

    block = Block(arg_types=[v.type.element_type for v in (*inputs, *outputs)])  # type: ignore[union-attr]
    args = list(block.args)
    conv_args, partial_arg = args[: len(conv_inputs)], args[-1]
    b = Builder(InsertPoint.at_end(block))
    fill = constant_fill(conv.outputs[0])
    assert fill is not None
    (start,) = _inline(b, fill.body.block, {})
    zero = _index_test(b, reductions, [0] * len(reductions))
    previous = b.insert(arith.SelectOp(zero, start, partial_arg)).result
    conv_block = conv.body.block
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(conv_block.args, [*conv_args, previous], strict=True)
    )
    (total,) = _inline(b, conv_block, mapping)
    last = _index_test(b, reductions, [e - 1 for e in conv_extents[rank:]])
    member_inputs = iter(args[len(conv_inputs) : len(inputs)])
    member_outs = iter(args[len(inputs) : -1])
    yielded: list[SSAValue] = []
    for member, k in members:
        others = [next(member_inputs) for _ in range(len(member.inputs) - 1)]
        outs = [next(member_outs) for _ in member.outputs]
        body = member.body.block
        values = [*others[:k], total, *others[k:], *outs]
        combined = _inline(b, body, dict(zip(body.args, values, strict=True)))
        yielded.extend(
            b.insert(arith.SelectOp(last, new, old)).result
            for new, old in zip(combined, outs, strict=True)
        )
    b.insert(YieldOp(*yielded, total))

    iterators = [
        *pool.iterator_types,
        *(IteratorTypeAttr.reduction() for _ in reductions),
    ]
    result_types = [t for member, _ in members for t in member.result_types]
    fused = GenericOp(
        inputs,
        outputs,
        Region(block),
        [AffineMapAttr(m) for m in maps],
        iterators,
        [*result_types, partial_type],
        pool.doc,
        pool.library_call,
    )
    fused.attributes.update(pool.attributes)
    rewriter.insert_op(fused, InsertPoint.before(first))
    return fused


def fuse_pools(block: Block, report: bool, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Fuse each pool over non-overlapping windows of a conv in `block` (module docstring),
    with the conv's other readers if they are pools like it (`siblings`); under `report`,
    say on each fused op and each refused pool why."""
    erased: set[Operation] = set()
    for pool in [op for op in block.ops if isinstance(op, GenericOp) and op.res]:
        if pool in erased or (found := conv_input(pool)) is None:
            continue
        index, conv = found
        reason = refusal(pool, index, conv, max_depth)
        if reason is not None:
            if report:
                contract.POOL_REFUSED.set(pool, f"{','.join(labels(conv))}: {reason}")
            continue
        members = siblings(pool, index, conv)
        assert members is not None  # refusal checked
        merged = [*labels(conv), *(label for member, _ in members for label in labels(member))]
        rewriter = Rewriter()
        fused = build_fused(members, conv, rewriter)
        if report:
            contract.FUSED.set(fused, merged)
            contract.POOL_FUSED.set(
                fused,
                "each conv output is computed once, inside its pool window; "
                "no buffer holds the conv output",
            )
        done = 0
        for member, _ in members:
            results = list(fused.res[done : done + len(member.res)])
            done += len(member.res)
            rewriter.replace_op(member, [], results)
            erased.add(member)
        fill = conv.outputs[0].owner
        rewriter.erase_op(conv)
        _erase_if_unused(fill, rewriter)


def _erase_if_unused(op: Operation, rewriter: Rewriter) -> None:
    while isinstance(op, Operation) and all(not r.uses for r in op.results):
        operands = list(op.operands)
        rewriter.erase_op(op)
        if len(operands) != 1:
            return
        op = operands[0].owner  # type: ignore[assignment]


__all__ = ["DEFAULT_MAX_DEPTH", "fuse_pools", "overlap", "refusal"]
