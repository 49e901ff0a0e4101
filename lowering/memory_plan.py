"""
`tess-memory-plan`: liveness-based buffer reuse, in-place updates, donation, peak memory.

Runs on level-4/5 hosts (a `func.func` on memrefs with a body and no `tess.kernel`), after
`tess-bufferize`, before or after `tess-outline-kernels`: the plan only needs to know which
host ops (`linalg` ops, `func.call`s, `memref.copy`) use which buffers.

1. Buffers. Every static `memref.alloc` at the top level of a host is an intermediate
   unless a view of it reaches `func.return`. Its uses are those of the alloc and of its
   views, transitively (`memref.collapse_shape`, `expand_shape`, `subview`, `cast`, `view`:
   a view op touches no memory and is not a use). Ops are numbered in block order, a nested
   use counting at its top-level ancestor; a buffer is live on [first use, last use], ends
   included. Arguments hold storage too: an input with the unit arg attribute
   `tess.donated` from the call's start to its last use (only in hosts no function of the
   module calls: a caller may read its buffer after the call); an out-param from its first
   use to the end.
2. Conflicts. Two buffers may share bytes when their intervals are disjoint, or when they
   are in-place partners: A's last use is B's first use W, they have the same type, and W
   is `memref.copy(A, B)` or a `linalg.generic` (directly, the single generic of a
   called `tess.kernel`, or the last member of a `kernel.group` touching A or B, the
   members before it reading A, if at all, only as elementwise inputs at the element it
   writes: they run first, row by row) with only parallel iterators that writes B
   (used once, directly) through an identity map and reads A, if at all, directly and
   only through identity maps: each element of A is read at the index it is written to,
   before it is (an elementwise update in place). A generic whose body loads from memory
   itself (a gather) is never a partner. Partners share bytes only at the same offset.
3. Donation. An out-param aliases a donated input of its type when their storage does not
   conflict (the input's last use comes before the out-param's first, or they are
   partners): it gets `tess.aliases_input = k : i64` and the runtime passes input k's
   array as that output; a `memref.copy(input, out)` is erased (the data is there). Each
   input backs at most one out-param. Before planning, an out-param no donated input can
   back because a `kernel.group` accumulates in it (a weight update fused after the matmul
   of its gradient, in place) gets its accumulation moved to a fresh intermediate when that
   makes the group's last member an in-place partner of a donated input last read there
   (`group_accumulators`): the update then overwrites the weight, never before it is read.
   Likewise members that read a donated optimizer state after the member updating it
   (the weight update recomputing the new momentum) move before that member.
4. Argument storage. An intermediate of exactly the type of a donated input or an
   out-param lives in that array (its alloc replaced by the argument) when it conflicts
   with nothing the array holds: before an out-param is first written, after a donated
   input is last read. Largest first, then by first use; arguments in order.
5. Arena. The other intermediates get offsets in one byte arena, greedy by size (largest
   first; ties by first use, then program order): a buffer takes an in-place partner's
   offset if nothing else collides there, else the smallest gap that fits between the
   placed buffers live with it (best fit), else the end of the highest. Offsets are
   multiples of `ALIGNMENT` (64 bytes: a cache line, an AVX-512 vector). Each alloc becomes
   `memref.view %arena[%offset][]`, the upstream MLIR idiom. With `workspace-arg` (the
   default) the arena is a trailing argument after the out-params, with the arg attribute
   `tess.workspace` and the function attribute `tess.workspace_bytes = N`, which the
   runtime allocates once and reuses across calls (a large allocation per call costs page
   faults: ~20 ms per 64 MiB). A call of a host with a workspace passes a slice of the
   caller's arena, live at the call (callees are planned first; recursion is refused).
   With `workspace-arg=false` the arena is a 64-byte-aligned `memref.alloc`.

The host gets these attributes (bytes, `i64`):

- `tess.peak_bytes`: the static peak of what one call allocates: out-params (less those
  aliasing donated inputs) plus the arena; inputs are the caller's. The fused seed
  example peaks at its (3,4) output: 48 bytes.
- `tess.arena_bytes`: the arena (plus static allocs kept because they escape);
- `tess.unplanned_bytes`: the same without the plan: out-params plus every intermediate in
  its own buffer, as `tess-bufferize` alone allocates them;
- `tess.live_peak_bytes`: out-params plus the most arena bytes live at one op (partners
  counted once), what any arena needs: the rest is alignment and fragmentation;
- `tess.input_bytes`, `tess.output_bytes`, `tess.aliased_bytes` (donation-backed outputs).

Dynamically shaped or nested allocs and escaping buffers are left alone; functions that
carry `tess.peak_bytes` are not planned again. `report=true` prints each plan to stderr
(buffer, type, bytes, interval, offset or argument). xDSL has no memory planning pass (its
buffer passes work on `bufferization` ops), hence this one.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    i8,
    i64,
)
from xdsl.dialects.linalg.ops import GenericOp, IteratorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.functions import add_workspace_argument, called_functions
from tessc.dialects.kernel import GroupOp
from tessc.lowering.group_accumulators import (
    VIEW_OPS,
    detach_accumulator,
    elementwise_reader,
    readers_before_writer,
)

ALIGNMENT = 64
"""Byte alignment of every buffer in the arena."""


def memref_bytes(typ: Attribute) -> int | None:
    """The size of a memref of static shape (`i1` is a one-byte bool), else None."""
    if not isinstance(typ, MemRefType) or any(d < 0 for d in typ.get_shape()):
        return None
    element = typ.element_type
    width = 64 if isinstance(element, IndexType) else getattr(element, "bitwidth", None)
    if not isinstance(width, int):
        raise PassFailedException(f"tess-memory-plan: no byte size for {element}")
    return math.prod(typ.get_shape()) * max(1, width // 8)


def align_up(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


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


def is_host(function: func.FuncOp) -> bool:
    if not function.body.blocks or contract.KERNEL.has(function):
        return False
    types = (*function.function_type.inputs.data, *function.function_type.outputs.data)
    return not any(isinstance(t, TensorType) for t in types)


def hosts_callees_first(module: ModuleOp) -> list[func.FuncOp]:
    """The module's hosts, each after every host it calls."""
    hosts = {f.sym_name.data: f for f in module.ops if isinstance(f, func.FuncOp) and is_host(f)}
    ordered: list[func.FuncOp] = []
    state: dict[str, str] = {}

    def visit(name: str) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            raise PassFailedException(f"tess-memory-plan: recursive call of @{name}")
        state[name] = "active"
        for op in hosts[name].walk():
            if isinstance(op, func.CallOp) and op.callee.root_reference.data in hosts:
                visit(op.callee.root_reference.data)
        state[name] = "done"
        ordered.append(hosts[name])

    for name in hosts:
        visit(name)
    return ordered


def pass_callee_workspaces(block: Block, workspaces: dict[str, int]) -> None:
    """Give each call of a host with a workspace a fresh buffer of that size, to plan."""
    for call in [op for op in block.ops if isinstance(op, func.CallOp)]:
        callee = call.callee.root_reference.data
        if callee not in workspaces:
            continue
        alloc = memref.AllocOp([], [], MemRefType(i8, [workspaces[callee]]))
        alloc.memref.name_hint = f"{callee}_workspace"
        new_call = func.CallOp(call.callee, [*call.arguments, alloc.memref], call.result_types)
        new_call.attributes.update(call.attributes)
        Rewriter.insert_op(alloc, InsertPoint.before(call))
        Rewriter.replace_op(call, new_call)


def rewrite_buffers(plan: HostPlan, workspace_arg: bool) -> None:
    """Allocs to arena views or arguments; deallocs of planned buffers erased."""
    block = plan.function.body.block
    args = list(block.args)
    for buffer in plan.buffers:
        for op in list(views_and_uses(buffer.value)):
            if isinstance(op, memref.DeallocOp):
                Rewriter.erase_op(op)
    arena: SSAValue | None = None
    if any(b.argument is None for b in plan.buffers):
        if workspace_arg:
            arena = add_workspace_argument(plan.function, plan.arena_bytes)
        else:
            typ = MemRefType(i8, [plan.arena_bytes])
            alloc = memref.AllocOp([], [], typ, IntegerAttr(ALIGNMENT, i64))
            alloc.memref.name_hint = "arena"
            Rewriter.insert_op(alloc, InsertPoint.at_start(block))
            arena = alloc.memref
    for buffer in plan.buffers:
        assert buffer.alloc is not None
        if buffer.argument is not None:
            buffer.value.replace_all_uses_with(args[buffer.argument])
            Rewriter.erase_op(buffer.alloc)
            continue
        assert arena is not None and buffer.offset is not None
        offset = arith.ConstantOp(IntegerAttr(buffer.offset, IndexType()))
        Rewriter.insert_op(offset, InsertPoint.before(buffer.alloc))
        Rewriter.replace_op(buffer.alloc, memref.ViewOp(arena, offset, [], buffer.value.type))


def format_report(plan: HostPlan) -> str:
    function = plan.function
    counts = ", ".join(
        f"{name.removeprefix('tess.')} {attr.value.data}"
        for name, attr in function.attributes.items()
        if name.endswith("_bytes") and isinstance(attr, IntegerAttr)
    )
    lines = [f"tess-memory-plan @{function.sym_name.data}: {counts}"]
    for out_index, donor_index in sorted(plan.aliases.items()):
        lines.append(f"  out-param {out_index} aliases donated input {donor_index}")
    rows = [("buffer", "type", "bytes", "interval", "offset")]
    for b in plan.buffers:
        where = str(b.offset) if b.argument is None else f"argument {b.argument}"
        rows.append((b.name, str(b.value.type), str(b.nbytes), f"[{b.start}, {b.end}]", where))
    widths = [max(len(row[c]) for row in rows) for c in range(5)]
    for row in rows if plan.buffers else []:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines)


def plan_function(
    function: func.FuncOp,
    module: ModuleOp,
    donation: bool,
    workspaces: dict[str, int],
    workspace_arg: bool,
) -> HostPlan:
    if len(function.body.blocks) != 1:
        raise PassFailedException(
            f"tess-memory-plan expects single-block hosts, @{function.sym_name.data} has several"
        )
    if workspace_arg:
        pass_callee_workspaces(function.body.block, workspaces)
    planner = HostPlanner(function, module, donation)
    for _ in range(len(planner.args) - planner.split):
        if not (planner.donors and planner.detach_accumulators()):
            break
        planner = HostPlanner(function, module, donation)  # positions moved
    plan = planner.plan()
    rewrite_buffers(plan, workspace_arg)
    if workspace_arg and any(b.argument is None for b in plan.buffers):
        workspaces[function.sym_name.data] = plan.arena_bytes
    for figure, value in plan.figures().items():
        figure.set(function, value)
    return plan


@dataclass(frozen=True)
class TessMemoryPlanPass(ModulePass):
    """Plan each host's intermediates into arguments and one arena; see the docstring."""

    name = "tess-memory-plan"

    workspace_arg: bool = True
    """The arena is a trailing `tess.workspace` argument (else a `memref.alloc`)."""

    donation: bool = True
    """Honour `tess.donated` input arguments (aliased out-params, reused storage)."""

    report: bool = False
    """Print each host's plan to stderr."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        called = called_functions(op)
        workspaces: dict[str, int] = {}
        for function in hosts_callees_first(op):
            name = function.sym_name.data
            if contract.PEAK_BYTES.has(function):
                size = contract.WORKSPACE_BYTES.get(function)
                if size is not None:
                    workspaces[name] = size
                continue
            donation = self.donation and name not in called
            plan = plan_function(function, op, donation, workspaces, self.workspace_arg)
            if self.report:
                print(format_report(plan), file=sys.stderr)


__all__ = [
    "ALIGNMENT",
    "TessMemoryPlanPass",
    "memref_bytes",
]
