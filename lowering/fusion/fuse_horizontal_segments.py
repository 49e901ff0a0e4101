"""
Segmented reductions over arenas: the rewrite of `tess-fuse-horizontal`'s step 2b.

A family's template member is rebuilt over the arenas, cut into chunks that each lie in
one segment (parameter): a full reduction becomes chunk partials then a per-segment
combine, a rank-0 op one generic over the segments, an update reads its segment's values
per chunk. Loops whose inner range depends on the row are 2-D generics with
`tess.row_ranges` (`dialects/contract.py`). Everything but the updates is the first
kernel, the updates the second. Grouping (`find_families`) is in
`fuse_horizontal_groups.py`; the algorithm and why two kernels are in
lowering/fusion/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, TensorType
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.transforms.common_subexpression_elimination import cse

from tessc.dialects import contract
from tessc.dialects.kernel import GroupOp, wrap_in_group, yielded_value
from tessc.lowering.fusion.fuse_horizontal_groups import (
    Member,
    Step,
    append_body,
    combiner,
    element_of,
    elementwise_refusal,
    inputs_with_maps,
    shape_of,
)

ROW = AffineMap(2, 0, (AffineExpr.dimension(0),))
"""`(r, i) -> (r)`: a per-row (per-chunk or per-segment) operand of a 2-D generic."""
INNER = AffineMap(2, 0, (AffineExpr.dimension(1),))
"""`(r, i) -> (i)`: an operand indexed by the inner range (an arena, or chunk partials)."""
SCALAR2 = AffineMap(2, 0, ())
SCALAR1 = AffineMap(1, 0, ())
IDENTITY1 = AffineMap.identity(1)


def chunk_table(sizes: Sequence[int], chunk_size: int) -> list[tuple[int, int, int]]:
    """The chunks of an arena of segments of `sizes`: `(start, stop, segment)` each, every
    chunk inside one segment, at most `chunk_size` elements (0: one chunk per segment)."""
    rows: list[tuple[int, int, int]] = []
    offset = 0
    for segment, size in enumerate(sizes):
        step = chunk_size if chunk_size > 0 else max(size, 1)
        rows += [
            (s, min(s + step, offset + size), segment) for s in range(offset, offset + size, step)
        ]
        offset += size
    return rows


def _iterators(*kinds: str) -> ArrayAttr[IteratorTypeAttr]:
    return ArrayAttr([getattr(IteratorTypeAttr, kind)() for kind in kinds])


@dataclass
class SegmentedBuilder:
    """Builds a family's kernels from its template member over `arenas` (by argument
    position) for segments of `sizes`. `first` holds the first kernel's ops and `updates`
    the second's, both in order, not yet inserted."""

    template: Member
    arenas: Sequence[BlockArgument]
    sizes: Sequence[int]
    chunk_size: int
    first: list[Operation] = field(default_factory=list[Operation])
    updates: list[Operation] = field(default_factory=list[Operation])
    per_segment: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """The template's rank-0 values -> their `tensor<K>` over segments."""
    per_chunk: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """The same values -> their `tensor<C>` over chunks (made when an arena loop reads one)."""
    update_results: list[GenericOp] = field(default_factory=list[GenericOp])
    """The update generics, in the template's order (their results are the output arenas)."""

    def __post_init__(self) -> None:
        self.chunks = chunk_table(self.sizes, self.chunk_size)
        self.position = {a: k for k, a in enumerate(self.template.arguments)}
        first_chunk = [len(self.chunks)] * (len(self.sizes) + 1)
        for c, (_, _, segment) in reversed(list(enumerate(self.chunks))):
            first_chunk[segment] = c
        for k in reversed(range(len(self.sizes))):  # an empty segment: where the next starts
            first_chunk[k] = min(first_chunk[k], first_chunk[k + 1])
        self.chunk_rows = [x for start, stop, _ in self.chunks for x in (start, stop)]
        self.segment_rows = [
            x for k in range(len(self.sizes)) for x in (first_chunk[k], first_chunk[k + 1])
        ]
        self.chunk_segments = [x for _, _, k in self.chunks for x in (k, k + 1)]

    @property
    def num_chunks(self) -> int:
        return len(self.chunks)

    def build(self) -> None:
        steps = self.template.steps
        local = {result for step in steps for result in step.op.results}
        # The reductions of arena values alone share one pass over the arenas.
        first = [
            step
            for step in steps
            if step.kind == "reduce" and all(yielded_value(v) not in local for v in step.op.inputs)
        ]
        made = self.partials(first) if first else []
        partials = {step.op: value for step, value in zip(first, made, strict=True)}
        for step in steps:
            if step.kind == "reduce":
                partial = partials.get(step.op) or self.partials([step])[0]
                self.combine(step, partial)
            elif step.kind == "scalar":
                self.scalar(step)
            else:
                self.update(step)

    # -- pieces -------------------------------------------------------------------------

    def empty(self, element: Attribute, size: int, into: list[Operation]) -> SSAValue:
        op = tensor.EmptyOp([], TensorType(element, [size]))
        into.append(op)
        return op.results[0]

    def generic(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        body: Region,
        maps: Sequence[AffineMap],
        iterators: ArrayAttr[IteratorTypeAttr],
        rows: Sequence[int] | None,
        into: list[Operation],
        like: Operation | None = None,
    ) -> GenericOp:
        op = GenericOp(
            list(inputs),
            list(outputs),
            body,
            [AffineMapAttr(m) for m in maps],
            iterators,
            [v.type for v in outputs],
        )
        if like is not None:
            kept = (contract.ORIGIN.name, contract.FUSED.name)
            op.attributes.update({k: v for k, v in like.attributes.items() if k in kept})
        if rows is not None:
            contract.ROW_RANGES.set(op, rows)
        into.append(op)
        return op

    def fill(self, init: GenericOp, size: int) -> SSAValue:
        """A `tensor<size>` of the constant the rank-0 generic `init` yields."""
        empty = self.empty(element_of(init.results[0]), size, self.first)
        op = self.generic(
            [], [empty], init.body.clone(), [IDENTITY1], _iterators("parallel"), None, self.first
        )
        return op.results[0]

    def chunk_value(self, value: SSAValue) -> SSAValue:
        """`value` (a template rank-0 value) per chunk: `out[c] = per_segment[seg(c)]`."""
        if value not in self.per_chunk:
            element = element_of(value)
            empty = self.empty(element, self.num_chunks, self.first)
            block = Block(arg_types=[element, element])
            block.add_op(YieldOp(block.args[0]))
            op = self.generic(
                [self.per_segment[value]],
                [empty],
                Region(block),
                [INNER, ROW],
                _iterators("parallel", "reduction"),
                self.chunk_segments,
                self.first,
            )
            self.per_chunk[value] = op.results[0]
        return self.per_chunk[value]

    def arena_operands(
        self, step: Step, rows: bool
    ) -> tuple[list[SSAValue], list[AffineMap], bool]:
        """`step`'s inputs over the arenas: each argument's arena, each per-segment value
        per chunk (`rows`) and each shared value as it is; whether one was per segment."""
        inputs: list[SSAValue] = []
        maps: list[AffineMap] = []
        segmented = False
        for value, _ in inputs_with_maps(step.op):
            if shape_of(value):
                inputs.append(self.arenas[self.position[value]])  # type: ignore[index]
                maps.append(INNER if rows else IDENTITY1)
            elif yielded_value(value) in self.per_segment:
                inputs.append(self.chunk_value(yielded_value(value)))
                maps.append(ROW)
                segmented = True
            else:
                inputs.append(value)
                maps.append(SCALAR2 if rows else SCALAR1)
        return inputs, maps, segmented

    # -- steps --------------------------------------------------------------------------

    def partials(self, steps: Sequence[Step]) -> list[SSAValue]:
        """Each full reduction of `steps` per chunk, all in one generic (one pass over the
        arenas): the bodies one after the other, the inputs they share read once."""
        inputs: list[tuple[SSAValue, AffineMap]] = []
        mapped: list[list[int]] = []
        for step in steps:
            values, maps, _ = self.arena_operands(step, rows=True)
            slots: list[int] = []
            for value, affine_map in zip(values, maps, strict=True):
                if (value, affine_map) not in inputs:
                    inputs.append((value, affine_map))
                slots.append(inputs.index((value, affine_map)))
            mapped.append(slots)
        elements = [element_of(step.op.results[0]) for step in steps]
        block = Block(arg_types=[*(element_of(v) for v, _ in inputs), *elements])
        yielded: list[SSAValue] = []
        for k, (step, slots) in enumerate(zip(steps, mapped, strict=True)):
            body = step.op.body.block
            mapping: dict[SSAValue, SSAValue] = {
                arg: block.args[slot] for arg, slot in zip(body.args, slots, strict=False)
            }
            mapping[body.args[-1]] = block.args[len(inputs) + k]
            yielded += append_body(body, block, mapping)
        block.add_op(YieldOp(*yielded))
        cse(block)
        fills = []
        for step in steps:
            assert step.init is not None
            fills.append(self.fill(step.init, self.num_chunks))
        partial = self.generic(
            [v for v, _ in inputs],
            fills,
            Region(block),
            [*(m for _, m in inputs), *[ROW] * len(steps)],
            _iterators("parallel", "reduction"),
            self.chunk_rows,
            self.first,
            like=steps[0].op,
        )
        return list(partial.results)

    def combine(self, step: Step, partial: SSAValue) -> None:
        """The chunk partials of `step` combined per segment."""
        assert step.init is not None
        op = step.op
        element = element_of(op.results[0])
        fold = combiner(op)
        assert fold is not None
        accumulator = op.body.block.args[-1]
        block = Block(arg_types=[element, element])
        other = next(v for v in fold.operands if v is not accumulator)
        combined = fold.clone(value_mapper={accumulator: block.args[1], other: block.args[0]})
        block.add_ops([combined, YieldOp(combined.results[0])])
        total = self.generic(
            [partial],
            [self.fill(step.init, len(self.sizes))],
            Region(block),
            [INNER, ROW],
            _iterators("parallel", "reduction"),
            self.segment_rows,
            self.first,
        )
        self.per_segment[op.results[0]] = total.results[0]

    def scalar(self, step: Step) -> None:
        """A rank-0 op on per-segment values: one 1-D generic over the segments."""
        op = step.op
        inputs: list[SSAValue] = []
        maps: list[AffineMap] = []
        for value in map(yielded_value, op.inputs):
            local = value in self.per_segment
            inputs.append(self.per_segment[value] if local else value)
            maps.append(IDENTITY1 if local else SCALAR1)
        outputs: list[SSAValue] = []
        for arg, init in zip(op.body.block.args[len(op.inputs) :], op.outputs, strict=True):
            if arg.uses:  # reads its init: a per-segment value (checked when grouping)
                outputs.append(self.per_segment[yielded_value(init)])
            else:
                outputs.append(self.empty(element_of(init), len(self.sizes), self.first))
        new = self.generic(
            inputs,
            outputs,
            op.body.clone(),
            [*maps, *[IDENTITY1] * len(outputs)],
            _iterators("parallel"),
            None,
            self.first,
            like=op,
        )
        for old, result in zip(op.results, new.results, strict=True):
            self.per_segment[old] = result

    def update(self, step: Step) -> None:
        """The elementwise update over the arenas, by chunks."""
        op = step.op
        inputs, maps, segmented = self.arena_operands(step, rows=True)
        if not segmented:
            inputs, maps, _ = self.arena_operands(step, rows=False)
        size = sum(self.sizes)
        outputs = [self.empty(element_of(v), size, self.updates) for v in op.outputs]
        out_map = INNER if segmented else IDENTITY1
        iterators = _iterators("parallel", "parallel") if segmented else _iterators("parallel")
        new = self.generic(
            inputs,
            outputs,
            op.body.clone(),
            [*maps, *[out_map] * len(outputs)],
            iterators,
            self.chunk_rows if segmented else None,
            self.updates,
            like=op,
        )
        if not segmented and 0 < self.chunk_size < size:
            contract.CHUNK_SIZE.set(new, self.chunk_size)
        self.update_results.append(new)


# ---------------------------------------------------------------------------------------
# One-element parameters
# ---------------------------------------------------------------------------------------


def unit_epilogues(group: GroupOp) -> list[GenericOp]:
    """The trailing members of `group` elementwise over one element (rank >= 1, every
    extent 1), after something else. `tess-fuse-epilogue` groups such an op after a full
    reduction only because loops of extent 1 are no loops (a one-element parameter's
    update after its norm); with more elements it would stand alone."""
    generics = [m for m in group.members() if isinstance(m, GenericOp)]
    tail: list[GenericOp] = []
    for generic in reversed(generics):
        if elementwise_refusal(generic) is not None or set(shape_of(generic.results[0])) != {1}:
            break
        tail.insert(0, generic)
    return tail if len(tail) < len(generics) else []


def dissolve(group: GroupOp) -> list[Operation]:
    """Move `group`'s members before it, in order, and erase it; the members."""
    block = group.parent_block()
    assert block is not None
    members = group.members()
    for member in members:
        member.detach()
        block.insert_op_before(member, group)
    for result, value in zip(group.res, group.yield_op.operands, strict=True):
        result.replace_all_uses_with(value)
    group.detach()
    group.erase()
    return members


@dataclass
class Peeled:
    """A group whose unit epilogues `peel_unit_epilogues` took out (to be put back if they
    join no family): what is left of it (`rest`, a group or one generic) and the epilogues."""

    rest: Operation
    tail: list[GenericOp]
    attributes: dict[str, Attribute]

    @staticmethod
    def peel(group: GroupOp) -> Peeled | None:
        tail = unit_epilogues(group)
        if not tail:
            return None
        attributes = dict(group.attributes)
        members = dissolve(group)
        used = {v for op in tail for v in op.operands}
        rest = [
            m
            for m in members
            if m not in tail
            and not (isinstance(m, tensor.EmptyOp | arith.ConstantOp) and m.results[0] in used)
        ]
        generics = [m for m in rest if isinstance(m, GenericOp)]
        kept = wrap_in_group(rest) if len(generics) > 1 else generics[0]
        return Peeled(kept, tail, attributes)

    def restore(self) -> None:
        """Back into one group, if the epilogues are still there (not packed)."""
        if any(op.parent is None for op in self.tail):
            return
        members = dissolve(self.rest) if isinstance(self.rest, GroupOp) else [self.rest]
        group = wrap_in_group([*members, *self.tail])
        group.attributes.update(self.attributes)


__all__ = ["Peeled", "SegmentedBuilder", "chunk_table", "dissolve", "unit_epilogues"]
