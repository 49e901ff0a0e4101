"""
`tess-tile`'s matching: a row kernel (`scf.parallel` over rows) and the contractions in it.

`match_row_kernel` takes a row kernel apart into its members, in order: the i-k-j
contraction nests (`Contraction`: the reduction loop `k`, the unit-stride `j`) and the
row-wise nests between them (`RowSegment`), and checks the legality conditions of
`tess-tile` (lowering/loops/README.md: rows touch disjoint elements of every written
memref). It reads the IR only. `tess-pack-matmul` matches its products with it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free

from tessc.dialects import contract
from tessc.lowering.linalg.generic_analysis import depends_on
from tessc.lowering.loops.index_values import same_index
from tessc.lowering.loops.row_analysis import rows_independent
from tessc.lowering.loops.trip_counts import dynamic_loop_bound, unit_loop_bound


@dataclass(frozen=True)
class Contraction:
    """An i-k-j nest in a row kernel: `outer_loops`, then `k_loop` around `j_loop`."""

    outer_loops: tuple[scf.ForOp, ...]
    k_loop: scf.ForOp
    j_loop: scf.ForOp
    depth: int | SSAValue  # K (N, an SSA value, where `dynamic` matched a `?` loop)
    cols: int | SSAValue  # M
    stored: frozenset[SSAValue]


@dataclass(frozen=True)
class RowSegment:
    """Consecutive row-kernel ops that are no contraction: they run one row at a time."""

    ops: tuple[Operation, ...]


@dataclass(frozen=True)
class RowKernel:
    """An `scf.parallel` over (batch..., i) whose body runs, per row `i`, its members in
    order, after `invariant_ops` (pure, independent of the row)."""

    parallel: scf.ParallelOp
    batch_extents: tuple[int, ...]
    rows: int | SSAValue  # N (an SSA value, where `dynamic` matched a `?` loop)
    invariant_ops: tuple[Operation, ...]
    members: tuple[Contraction | RowSegment, ...]

    @property
    def i(self) -> SSAValue:
        return self.parallel.body.block.args[-1]

    @property
    def contractions(self) -> tuple[Contraction, ...]:
        return tuple(m for m in self.members if isinstance(m, Contraction))


def match_contraction(loop: scf.ForOp, i: SSAValue, dynamic: bool = False) -> Contraction | None:
    """The perfect nest rooted at `loop` if it is an i-k-j contraction over rows `i`;
    with `dynamic`, its loops may run to a `?` dim's N (`dynamic_loop_bound`)."""
    bound = dynamic_loop_bound if dynamic else unit_loop_bound
    loops = [loop]
    while len(ops := list(loops[-1].body.block.ops)) == 2 and isinstance(ops[0], scf.ForOp):
        loops.append(ops[0])
    if len(loops) < 2 or any(lp.iter_args or bound(lp.lb, lp.ub, lp.step) is None for lp in loops):
        return None
    *outer, k_loop, j_loop = loops
    *body, terminator = j_loop.body.block.ops
    if not isinstance(terminator, scf.YieldOp) or terminator.operands:
        return None
    if any(
        o.regions or not (isinstance(o, memref.LoadOp | memref.StoreOp) or is_side_effect_free(o))
        for o in body
    ):
        return None
    k, j = k_loop.body.block.args[0], j_loop.body.block.args[0]
    stored: dict[SSAValue, memref.StoreOp] = {}
    for store in (o for o in body if isinstance(o, memref.StoreOp)):
        indices = list(store.indices)
        if (
            store.memref in stored
            or not indices
            or indices[-1] is not j
            or not any(index is i for index in indices)
            or any(depends_on(index, k) for index in indices)
        ):
            return None
        stored[store.memref] = store
    for load in (o for o in body if isinstance(o, memref.LoadOp) and o.memref in stored):
        if not all(map(same_index, load.indices, stored[load.memref].indices)):
            return None
    if not stored:
        return None
    extents = (bound(lp.lb, lp.ub, lp.step) or 0 for lp in (k_loop, j_loop))
    return Contraction(tuple(outer), k_loop, j_loop, *extents, frozenset(stored))


def match_row_kernel(op: scf.ParallelOp, dynamic: bool = False) -> RowKernel | None:
    """The row kernel rooted at `op`, if it holds a contraction to tile; with `dynamic`,
    its rows and contractions may run to a `?` dim's N (`tess-pack-matmul`)."""
    bound = dynamic_loop_bound if dynamic else unit_loop_bound
    if op.initVals or contract.TILE_SIZES.has(op):
        return None
    if not isinstance(op.parent_op(), func.FuncOp):
        return None  # only outermost loops
    extents = [bound(*b) for b in zip(op.lowerBound, op.upperBound, op.step, strict=True)]
    if not extents or any(e is None or (isinstance(e, int) and e < 1) for e in extents):
        return None
    if any(not isinstance(e, int) for e in extents[:-1]):
        return None  # a `?` batch dim
    i, block = op.body.block.args[-1], op.body.block
    invariant: list[Operation] = []
    members: list[Contraction | RowSegment] = []
    segment: list[Operation] = []
    inside: set[SSAValue] = set(block.args)
    for inner in list(block.ops)[:-1]:
        if is_side_effect_free(inner) and not inner.regions and inside.isdisjoint(inner.operands):
            invariant.append(inner)
            continue
        inside.update(inner.results)
        contraction = match_contraction(inner, i, dynamic) if isinstance(inner, scf.ForOp) else None
        if contraction is None:
            segment.append(inner)
            continue
        if segment:
            members.append(RowSegment(tuple(segment)))
        members.append(contraction)
        segment = []
    if segment:
        members.append(RowSegment(tuple(segment)))
    if not any(isinstance(m, Contraction) for m in members):
        return None
    if not rows_independent(op.body.walk(), {i}):  # rows touch disjoint elements
        return None
    for member in members:  # a segment's values must not be needed outside it
        if isinstance(member, RowSegment) and any(
            block.find_ancestor_op_in_block(use.operation) not in member.ops
            for inner in member.ops
            for result in inner.results
            for use in result.uses
        ):
            return None
    batch = tuple(e if isinstance(e, int) else 0 for e in extents[:-1])
    return RowKernel(op, batch, extents[-1] or 0, tuple(invariant), tuple(members))


@dataclass(frozen=True)
class DotNest:
    """A matched dot-product nest (`tess-tile-dot`'s module docstring)."""

    parallel: scf.ParallelOp
    extents: tuple[int, ...]
    before: tuple[Operation, ...]
    k_loop: scf.ForOp
    after: tuple[Operation, ...]
    acc_load: memref.LoadOp
    acc_store: memref.StoreOp


def match_dot(op: scf.ParallelOp) -> DotNest | None:
    if op.initVals or contract.REGISTER_TILE.has(op):
        return None
    if not isinstance(op.parent_op(), func.FuncOp) or len(op.lowerBound) < 2:
        return None
    extents: list[int] = []
    for lb, ub, step in zip(op.lowerBound, op.upperBound, op.step, strict=True):
        extent = unit_loop_bound(lb, ub, step)
        if extent is None or extent < 1:
            return None
        extents.append(extent)
    i, j = op.body.block.args[-2:]
    ops = list(op.body.block.ops)[:-1]
    loops = [index for index, inner in enumerate(ops) if inner.regions]
    if len(loops) != 1 or not isinstance(k_loop := ops[loops[0]], scf.ForOp) or k_loop.iter_args:
        return None
    bounds = (k_loop.lb, k_loop.ub, k_loop.step)
    if any(isinstance(v.owner, Operation) and op.is_ancestor(v.owner) for v in bounds):
        return None  # the jammed loop is built outside the old body: bounds must be too
    k = k_loop.body.block.args[0]
    *body, terminator = k_loop.body.block.ops
    if not isinstance(terminator, scf.YieldOp) or terminator.operands:
        return None
    stores = [o for o in body if isinstance(o, memref.StoreOp)]
    if len(stores) != 1 or any(
        o.regions or not (isinstance(o, memref.LoadOp | memref.StoreOp) or is_side_effect_free(o))
        for o in body
    ):
        return None
    store = stores[0]
    indices = list(store.indices)
    if any(depends_on(index, k) for index in indices) or not (
        any(index is i for index in indices) and any(index is j for index in indices)
    ):
        return None
    loads = [o for o in body if isinstance(o, memref.LoadOp)]
    acc_loads = [o for o in loads if o.memref is store.memref]
    if len(acc_loads) != 1 or not all(map(same_index, acc_loads[0].indices, indices)):
        return None
    operands = [o for o in loads if o is not acc_loads[0]]
    if any(not o.indices or o.indices[-1] is not k for o in operands):
        return None

    def reads(x: SSAValue, y: SSAValue) -> bool:
        return any(
            any(depends_on(v, x) for v in o.indices)
            and not any(depends_on(v, y) for v in o.indices)
            for o in operands
        )

    if not (reads(i, j) and reads(j, i)):
        return None
    before, after = tuple(ops[: loops[0]]), tuple(ops[loops[0] + 1 :])
    return DotNest(op, tuple(extents), before, k_loop, after, acc_loads[0], store)


def without_zero_fill(
    ops: Sequence[Operation], store: memref.StoreOp, i: SSAValue, j: SSAValue | None, cols: int
) -> tuple[tuple[Operation, ...], bool]:
    """`ops` without their zero fill of the contraction's output, and whether there was
    one: a store of +0.0 to `out[.., i, j]` (`j` given: per element) or a loop over all
    `cols` columns doing only that (per row), where nothing else in `ops` touches `out`.
    The micro-kernel then stores its first k block instead of adding it to zeros."""
    out, prefix = store.memref, list(store.indices)[:-2]

    def fills(op: Operation, column: SSAValue) -> bool:
        if not isinstance(op, memref.StoreOp) or op.memref is not out:
            return False
        value = op.value.owner
        if not isinstance(value, arith.ConstantOp) or not isinstance(value.value, FloatAttr):
            return False
        zero = float(value.value.value.data)
        *head, row, col = op.indices
        return (
            zero == 0.0
            and math.copysign(1.0, zero) > 0
            and len(head) == len(prefix)
            and all(map(same_index, head, prefix))
            and (row, col) == (i, column)
        )

    def is_fill(op: Operation) -> bool:
        if j is not None:
            return fills(op, j)
        if not isinstance(op, scf.ForOp) or unit_loop_bound(op.lb, op.ub, op.step) != cols:
            return False
        *body, _ = op.body.block.ops
        stores = [o for o in body if isinstance(o, memref.StoreOp)]
        return (
            len(stores) == 1
            and fills(stores[0], op.body.block.args[0])
            and all(o is stores[0] or (is_side_effect_free(o) and not o.regions) for o in body)
        )

    found = [op for op in ops if is_fill(op)]
    if len(found) != 1:
        return tuple(ops), False
    rest = tuple(op for op in ops if op is not found[0])
    # Pure ops only the fill read are dropped with it (their other readers clone them).
    read = {v for op in rest for inner in op.walk() for v in inner.operands}
    rest = tuple(
        op
        for op in rest
        if op.regions or not is_side_effect_free(op) or any(r in read for r in op.results)
    )
    touched = any(
        isinstance(inner, memref.LoadOp | memref.StoreOp) and inner.memref is out
        for op in rest
        for inner in op.walk()
    )
    return (tuple(ops), False) if touched else (rest, True)
