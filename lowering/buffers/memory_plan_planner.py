"""
`tess-memory-plan`'s planner: the buffers of one host, their live intervals and conflicts,
and where each one lives (steps 1 to 5 in lowering/buffers/README.md).

`HostPlanner` numbers the host's ops, collects its intermediates and the storage its
arguments hold (`Buffer`), finds in-place partners, decides donation aliases and argument
storage, and places the rest in one arena, returning a `HostPlan` with the byte figures.
It changes the IR only where the plan itself requires it (a group's accumulator moved by
`memory_plan_accumulators`, a copy into an aliased out-param erased); turning allocs into
arena views or arguments is `memory_plan.py`'s, with the ordering of hosts and the pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.dialects.linalg.ops import GenericOp, IteratorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.kernel import GroupOp
from tessc.lowering.buffers.arena_layout import align_up, memref_bytes
from tessc.lowering.buffers.memory_plan_accumulators import (
    VIEW_OPS,
    detach_accumulator,
    elementwise_reader,
    readers_before_writer,
)


def views_and_uses(value: SSAValue) -> Iterator[Operation]:
    """Every op using `value` or, transitively, a view of it (view ops included)."""
    pending = [value]
    while pending:
        for use in pending.pop().uses:
            yield use.operation
            if isinstance(use.operation, VIEW_OPS) and use.index == 0:
                pending.extend(use.operation.results)


def memory_uses(value: SSAValue) -> list[Operation]:
    """The ops that touch `value`'s memory: not views, not deallocs."""
    return [
        op
        for op in views_and_uses(value)
        if not isinstance(op, VIEW_OPS) and not isinstance(op, memref.DeallocOp)
    ]


def top_level(op: Operation, block: Block) -> Operation:
    while op.parent is not block:
        parent = op.parent_op()
        if parent is None:
            raise PassFailedException(f"tess-memory-plan: '{op.name}' is outside the host")
        op = parent
    return op


def kernel_generic(op: Operation, module: ModuleOp) -> tuple[GenericOp, list[SSAValue]] | None:
    """The generic `op` runs and the host values of its operands, if `op` is a
    linalg.generic or a call of a `tess.kernel` whose body is one generic."""
    if isinstance(op, GenericOp):
        return op, list(op.operands)
    if not isinstance(op, func.CallOp):
        return None
    callee = SymbolTable.lookup_symbol(module, op.callee.root_reference.data)
    if not isinstance(callee, func.FuncOp) or not contract.KERNEL.has(callee):
        return None
    if not callee.body.blocks:
        return None
    body = [o for o in callee.body.block.ops if not isinstance(o, arith.ConstantOp)]
    if len(body) != 2 or not isinstance(body[0], GenericOp):
        return None
    host_values = dict(zip(callee.body.block.args, op.arguments, strict=True))
    if any(v not in host_values for v in body[0].operands):
        return None
    return body[0], [host_values[v] for v in body[0].operands]


def is_identity(map_attr: Attribute) -> bool:
    if not isinstance(map_attr, AffineMapAttr):
        return False
    return map_attr.data == AffineMap.identity(map_attr.data.num_dims)


def is_element_map(generic: Operation, map_attr: Attribute) -> bool:
    """Whether `map_attr` reads or writes one element per iteration of `generic`, each at
    most once: the identity, or in a segmented generic whose rows' ranges are disjoint
    (`tess.row_ranges`, an arena update by chunks) the inner index `(r, i) -> (i)`."""
    if is_identity(map_attr):
        return True
    rows = contract.ROW_RANGES.get(generic)
    if rows is None or not isinstance(map_attr, AffineMapAttr):
        return False
    ranges = sorted(zip(rows[::2], rows[1::2], strict=True))
    disjoint = all(stop <= start for (_, stop), (start, _) in pairwise(ranges))
    return disjoint and map_attr.data == AffineMap(2, 0, (AffineExpr.dimension(1),))


@dataclass(eq=False)
class Buffer:
    """An intermediate (`alloc` set) or an argument's occupancy of its own storage, live on
    [start, end]; `offset` in the arena or `argument` whose storage it lives in."""

    name: str
    value: SSAValue
    nbytes: int
    start: int
    end: int
    alloc: memref.AllocOp | None = None
    offset: int | None = None
    argument: int | None = None


@dataclass
class HostPlan:
    """What the plan decided for one host function, and its byte counts."""

    function: func.FuncOp
    buffers: list[Buffer] = field(default_factory=list)
    kept_bytes: int = 0  # static allocs left as they are (escaping)
    arena_bytes: int = 0
    live_arena_bytes: int = 0
    aliases: dict[int, int] = field(default_factory=dict)  # out-param arg -> input arg
    input_bytes: int = 0
    output_bytes: int = 0
    aliased_bytes: int = 0

    def figures(self) -> dict[contract.Int, int]:
        """The plan's byte counts, by the attribute that records each (in the order the
        function carries them)."""
        owned_outputs = self.output_bytes - self.aliased_bytes
        intermediates = self.arena_bytes + self.kept_bytes
        unplanned = self.output_bytes + self.kept_bytes + sum(b.nbytes for b in self.buffers)
        return {
            contract.PEAK_BYTES: owned_outputs + intermediates,
            contract.ARENA_BYTES: intermediates,
            contract.UNPLANNED_BYTES: unplanned,
            contract.LIVE_PEAK_BYTES: owned_outputs + self.kept_bytes + self.live_arena_bytes,
            contract.INPUT_BYTES: self.input_bytes,
            contract.OUTPUT_BYTES: self.output_bytes,
            contract.ALIASED_BYTES: self.aliased_bytes,
        }


class HostPlanner:
    """Liveness, conflicts and placement for one host (see the module docstring)."""

    def __init__(self, function: func.FuncOp, module: ModuleOp, donation: bool):
        self.function = function
        self.module = module
        self.block = function.body.block
        self.positions = {op: k for k, op in enumerate(self.block.ops)}
        self.args = list(self.block.args)
        self.split = len(self.args) - (contract.NUM_OUTPUTS.get(function) or 0)
        self.donors = [
            k for k in range(self.split) if donation and contract.DONATED.has_arg(function, k)
        ]
        self.partners = cache(self._partners)

    def uses(self, value: SSAValue) -> list[int]:
        return [self.positions[top_level(op, self.block)] for op in memory_uses(value)]

    def first_writer(self, value: SSAValue) -> Operation | None:
        """The op that first touches `value`, if it does so once and directly."""
        touching = [top_level(op, self.block) for op in memory_uses(value)]
        if not touching:
            return None
        first = min(self.positions[op] for op in touching)
        at_first = [op for op in touching if self.positions[op] == first]
        if len(at_first) != 1:
            return None
        direct = [u.operation for u in value.uses]
        writer = at_first[0]
        if writer not in direct and not (
            isinstance(writer, GroupOp) and any(op.parent_op() is writer for op in direct)
        ):
            return None
        return writer

    def writes_in_place(self, writer: Operation, out: SSAValue, source: SSAValue) -> bool:
        """Whether `writer` may write `out` over `source` (the conditions of step 2)."""
        if isinstance(writer, memref.CopyOp):
            return writer.source is source and writer.destination is out
        if isinstance(writer, GroupOp):
            writer = self.group_member_writing(writer, out, source)
            if writer is None:
                return False
        found = kernel_generic(writer, self.module)
        if found is None:
            return False
        generic, values = found
        if any(it.data != IteratorType.PARALLEL for it in generic.iterator_types.data):
            return False
        if any(isinstance(op, memref.LoadOp) for op in generic.body.walk()):
            return False  # a gather: it reads buffers at indices no map describes
        source_views = {
            r for op in views_and_uses(source) if isinstance(op, VIEW_OPS) for r in op.results
        }
        wrote = False
        for index, (value, map_attr) in enumerate(
            zip(values, generic.indexing_maps.data, strict=True)
        ):
            is_output = index >= len(generic.inputs)
            if value in source_views:
                return False  # the source through a view: its elements at other indices
            if value is out:
                if not is_output or not is_element_map(generic, map_attr):
                    return False
                wrote = True
            elif value is source and (is_output or not is_element_map(generic, map_attr)):
                return False
        return wrote

    @staticmethod
    def group_member_writing(group: GroupOp, out: SSAValue, source: SSAValue) -> GenericOp | None:
        """The one member of `group` that touches `out` or `source` (directly or through
        a view), if only one does and it is a generic that uses them directly (a scalar
        prologue before an arena update, from `tess-fuse-horizontal`)."""
        touched = {out, source} | {
            r
            for value in (out, source)
            for op in views_and_uses(value)
            if isinstance(op, VIEW_OPS)
            for r in op.results
        }
        touching = [m for m in group.members() if any(v in touched for v in m.operands)]
        if not touching or not isinstance(touching[-1], GenericOp):
            return None
        # Members before the writer may read `source` at the element the writer writes
        # (they run first, row by row): not through a view, not touching `out`.
        for member in touching[:-1]:
            if any(v in touched and v is not source for v in member.operands):
                return None
            if not elementwise_reader(member, source):
                return None
        return touching[-1]

    def _partners(self, first: Buffer, second: Buffer) -> bool:
        """`second` is written in place over `first` (or the other way round)."""
        if second.start < first.start:
            first, second = second, first
        if first.end != second.start or first.value.type != second.value.type:
            return False
        writer = self.first_writer(second.value)
        return (
            writer is not None
            and self.positions[writer] == second.start
            and self.writes_in_place(writer, second.value, first.value)
        )

    def conflict(self, a: Buffer, b: Buffer) -> bool:
        overlap = a.start <= b.end and b.start <= a.end
        return overlap and not self.partners(a, b)

    def intermediates(self, plan: HostPlan) -> None:
        for op in self.block.ops:
            if not isinstance(op, memref.AllocOp):
                continue
            nbytes = memref_bytes(op.memref.type)
            if nbytes is None:
                continue
            if any(isinstance(user, func.ReturnOp) for user in views_and_uses(op.memref)):
                plan.kept_bytes += nbytes
                continue
            where = self.uses(op.memref) or [self.positions[op]]
            name = op.memref.name_hint or f"#{len(plan.buffers)}"
            plan.buffers.append(Buffer(name, op.memref, nbytes, min(where), max(where), op))

    def storage(self, plan: HostPlan) -> dict[int, list[Buffer]]:
        """Argument arrays intermediates may live in, by argument, with what they hold;
        decides the aliases of out-params to donated inputs on the way."""
        end = len(self.positions)
        held: dict[int, list[Buffer]] = {}
        for k in self.donors:
            arg = self.args[k]
            held[k] = [Buffer(f"input {k}", arg, 0, -1, max(self.uses(arg), default=-1))]
        for k in range(self.split, len(self.args)):
            arg = self.args[k]
            out = Buffer(f"out-param {k}", arg, 0, min(self.uses(arg), default=end), end)
            for donor in self.donors:
                if donor in plan.aliases.values() or arg.type != self.args[donor].type:
                    continue
                if not self.conflict(held[donor][0], out):
                    plan.aliases[k] = donor
                    held[donor].append(out)
                    break
            else:
                held[k] = [out]
        return held

    def detach_accumulators(self) -> bool:
        """Move one group accumulator off an out-param that no donated input backs, when a
        donated input of its type then would (`group_accumulators`); whether it did."""
        probe = HostPlan(self.function)
        self.storage(probe)
        for k in range(self.split, len(self.args)):
            out = self.args[k]
            first = {
                top_level(op, self.block)
                for op in memory_uses(out)
                if self.positions[top_level(op, self.block)] == min(self.uses(out))
            }
            group = first.pop() if len(first) == 1 else None
            if k in probe.aliases or not isinstance(group, GroupOp):
                continue
            for donor in self.donors:
                source = self.args[donor]
                if donor in probe.aliases.values() or source.type != out.type:
                    continue
                # the group must be the donor's last reader, as for any partner
                if max(self.uses(source), default=-1) != self.positions[group]:
                    continue
                if detach_accumulator(group, out, source):
                    return True
                if readers_before_writer(group, out, source):
                    return True
        return False

    def place_in_arguments(self, plan: HostPlan, held: dict[int, list[Buffer]]) -> None:
        for buffer in sorted(plan.buffers, key=lambda b: (-b.nbytes, b.start)):
            for k, holders in held.items():
                if buffer.value.type == self.args[k].type and not any(
                    self.conflict(buffer, h) for h in holders
                ):
                    buffer.argument = k
                    holders.append(buffer)
                    break

    def fits(self, buffer: Buffer, offset: int, overlapping: Sequence[Buffer]) -> bool:
        """No byte of `buffer` at `offset` is another's, except an in-place partner's at
        exactly the same offset (partners have the same type)."""
        return all(
            (b.offset or 0) + b.nbytes <= offset
            or offset + buffer.nbytes <= (b.offset or 0)
            or (b.offset == offset and self.partners(b, buffer))
            for b in overlapping
        )

    def assign_offsets(self, buffers: Sequence[Buffer]) -> int:
        """Greedy by size, best fit, partners at one offset; returns the arena size."""
        order = sorted(enumerate(buffers), key=lambda kb: (-kb[1].nbytes, kb[1].start, kb[0]))
        placed: list[Buffer] = []
        arena = 0
        for _, buffer in order:
            overlapping = [b for b in placed if b.start <= buffer.end and buffer.start <= b.end]
            partner_offsets = [b.offset or 0 for b in overlapping if self.partners(b, buffer)]
            offset = next((o for o in partner_offsets if self.fits(buffer, o, overlapping)), None)
            if offset is None:
                best: tuple[int, int] | None = None  # (gap, offset)
                cursor = 0
                for b in sorted(overlapping, key=lambda b: b.offset or 0):
                    gap = (b.offset or 0) - cursor
                    if gap >= buffer.nbytes and (best is None or gap < best[0]):
                        best = (gap, cursor)
                    cursor = max(cursor, align_up((b.offset or 0) + b.nbytes))
                offset = best[1] if best is not None else cursor
            buffer.offset = offset
            arena = max(arena, offset + buffer.nbytes)
            placed.append(buffer)
        return arena

    def live_arena_bytes(self, buffers: Sequence[Buffer]) -> int:
        """The largest sum of live bytes at one op, a partner pair counting once."""
        peak = 0
        for point in {b.start for b in buffers}:
            live = [b for b in buffers if b.start <= point <= b.end]
            shared = sum(
                b.nbytes
                for b in live
                if any(a.end == point == b.start and self.partners(a, b) for a in live)
            )
            peak = max(peak, sum(b.nbytes for b in live) - shared)
        return peak

    def plan(self) -> HostPlan:
        plan = HostPlan(self.function)
        self.intermediates(plan)
        held = self.storage(plan)
        self.place_in_arguments(plan, held)
        in_arena = [b for b in plan.buffers if b.argument is None]
        plan.arena_bytes = self.assign_offsets(in_arena)
        plan.live_arena_bytes = self.live_arena_bytes(in_arena)
        plan.input_bytes = sum(memref_bytes(a.type) or 0 for a in self.args[: self.split])
        plan.output_bytes = sum(memref_bytes(a.type) or 0 for a in self.args[self.split :])
        plan.aliased_bytes = sum(memref_bytes(self.args[k].type) or 0 for k in plan.aliases)
        for out_index, donor_index in plan.aliases.items():
            contract.ALIASES_INPUT.set_arg(self.function, out_index, donor_index)
            writer = self.first_writer(self.args[out_index])
            if isinstance(writer, memref.CopyOp) and writer.source is self.args[donor_index]:
                Rewriter.erase_op(writer)  # the donated input already holds the data
        return plan
