"""
`tess-memory-plan`: liveness-based buffer reuse in one byte arena, donation, peak memory.

Runs on level-4/5 host functions, after `tess-bufferize` and before or after
`tess-outline-kernels` (a host op that touches memory is then a `linalg` op or a
`func.call` of a kernel; the plan only needs to know which ops use which buffers). A host
is a `func.func` on memrefs with a body and without `tess.kernel`. For each host:

1. Buffers. Every `memref.alloc` of static shape at the top level of the host is an
   intermediate, unless one of its views reaches `func.return` (it escapes). A buffer's
   uses are the uses of the alloc and, transitively, of its views (`memref.collapse_shape`,
   `expand_shape`, `subview`, `cast`, `view`); a view op itself touches no memory, so it
   is not a use. `memref.dealloc`s of planned buffers are erased (the arena owns them).
2. Live intervals. Ops are numbered in block order; a use nested in a region counts at its
   top-level ancestor (a loop that uses a buffer keeps it live for the whole loop). A
   buffer is live on [first use, last use], both ends included, so two buffers that one op
   reads and writes never share bytes.
3. Donation. An input argument with the unit arg attribute `tess.donated` may be
   overwritten by the host. Only hosts that no other function of the module calls honour
   it (a caller's buffer may be live after the call). Supported, in this order:
   - an out-param aliases a donated input of the same type (`tess.aliases_input = k : i64`
     on the out-param; the runtime then passes input k's array as that output) when the
     first op W that touches the out-param uses it once and directly, no use of the input
     (or of its views) comes after W, and W is either `memref.copy(input, out)` (erased:
     the data is already there) or a `linalg.generic` (directly, or the single generic of
     a called `tess.kernel`) with only parallel iterators that writes the out-param
     through an identity map and reads the input, if at all, only directly (not through a
     view) and only through identity maps: every element of the input is read at the index
     it is then written to, before it is written. Each input backs at most one out-param.
   - an intermediate of exactly the input's type lives in the input's storage when its
     interval starts after the input's last use and ends before the first use of the
     out-param aliasing the input, if any (its alloc is replaced by the input; several such
     intermediates share the input when their intervals are disjoint).
4. Offsets. The remaining intermediates get byte offsets in one arena, greedy by size
   (largest first; ties by first use, then program order) and best fit: each goes into the
   smallest gap between the buffers already placed that overlap it in time and that fits
   it at an offset aligned to `ALIGNMENT` (64 bytes, a cache line and an AVX-512 vector),
   else after the highest of them. Buffers whose lifetimes are disjoint share bytes.
5. Rewrite. Each planned alloc becomes `memref.view %arena[%offset][]`, viewing the arena
   (`memref<Nxi8>`) as the buffer's type, the upstream MLIR idiom. With `workspace-arg`
   (the default) the arena is a trailing argument after the out-params, marked with the
   arg attribute `tess.workspace` and the function attribute `tess.workspace_bytes = N`,
   so the runtime allocates it once and reuses it across calls (allocating a large buffer
   on every call costs page faults: ~20 ms per 64 MiB). A call of a host that has a
   workspace gets one carved out of the caller's arena, live at the call (so hosts are
   planned callees first; recursion is refused). With `workspace-arg=false` the arena is
   a `memref.alloc` with 64-byte alignment at the top of the host.

The host gets these attributes (bytes, `i64`), which tests and reports read:

- `tess.peak_bytes`: the static peak of the memory one call allocates: its out-params
  (less those aliasing donated inputs) plus the arena. Inputs are the caller's and not
  counted. The seed example, fused, peaks at its (3,4) output: 48 bytes.
- `tess.arena_bytes`: the arena of intermediates alone (plus any static alloc the plan had
  to keep, counted without reuse);
- `tess.unplanned_bytes`: the same as `peak_bytes` without the plan: out-params plus every
  intermediate in its own buffer (what `tess-bufferize` alone allocates);
- `tess.live_peak_bytes`: out-params plus the largest sum of intermediates live at one op,
  a lower bound on any plan (`peak - live_peak` is lost to alignment and fragmentation);
- `tess.input_bytes`, `tess.output_bytes`, `tess.aliased_bytes` (out-params that alias
  donated inputs, which the runtime does not allocate).

Dynamically shaped allocs, allocs nested in regions, and buffers that escape are left as
they are. Functions that already carry `tess.peak_bytes` are not planned again. With
`report=true` the pass prints each host's plan to stderr (buffer, type, bytes, interval,
offset). xDSL has no memory planning pass (its buffer passes work on `bufferization`
ops), hence this one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from io import StringIO

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    TensorType,
    UnitAttr,
    i8,
    i64,
)
from xdsl.dialects.linalg.ops import GenericOp, IteratorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

ALIGNMENT = 64
"""Byte alignment of every buffer in the arena."""

KERNEL_ATTR = "tess.kernel"
NUM_OUTPUTS_ATTR = "tess.num_outputs"
DONATED_ATTR = "tess.donated"
ALIASES_INPUT_ATTR = "tess.aliases_input"
WORKSPACE_ATTR = "tess.workspace"
WORKSPACE_BYTES_ATTR = "tess.workspace_bytes"
PEAK_BYTES_ATTR = "tess.peak_bytes"
ARENA_BYTES_ATTR = "tess.arena_bytes"
UNPLANNED_BYTES_ATTR = "tess.unplanned_bytes"
LIVE_PEAK_BYTES_ATTR = "tess.live_peak_bytes"
INPUT_BYTES_ATTR = "tess.input_bytes"
OUTPUT_BYTES_ATTR = "tess.output_bytes"
ALIASED_BYTES_ATTR = "tess.aliased_bytes"

VIEW_OPS = (
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    memref.CastOp,
    memref.ViewOp,
)
"""Ops whose result is another name for (part of) their source's memory."""

# ---------------------------------------------------------------------------------------
# sizes
# ---------------------------------------------------------------------------------------


def element_bytes(typ: Attribute) -> int:
    """Bytes per element as the generated NumPy code stores it (`i1` is one-byte bool)."""
    if isinstance(typ, IndexType):
        return 8
    width = getattr(typ, "bitwidth", None)
    if isinstance(typ, IntegerType):
        width = typ.width.data
    if not isinstance(width, int):
        raise PassFailedException(f"tess-memory-plan: no byte size for element type {typ}")
    return max(1, width // 8)


def memref_bytes(typ: Attribute) -> int | None:
    """The size of a memref with static shape, or None (dynamic shape, not a memref)."""
    if not isinstance(typ, MemRefType):
        return None
    shape = typ.get_shape()
    if any(d < 0 for d in shape):
        return None
    count = 1
    for d in shape:
        count *= d
    return count * element_bytes(typ.element_type)


def align_up(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


# ---------------------------------------------------------------------------------------
# uses and live intervals
# ---------------------------------------------------------------------------------------


def views_and_uses(value: SSAValue) -> Iterator[Operation]:
    """Every op using `value` or, transitively, a view of it (view ops included)."""
    pending = [value]
    while pending:
        current = pending.pop()
        for use in current.uses:
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
    """The ancestor of `op` that is an op of `block`."""
    while op.parent is not block:
        parent = op.parent_op()
        if parent is None:
            raise PassFailedException(f"tess-memory-plan: '{op.name}' is outside the host")
        op = parent
    return op


@dataclass
class Buffer:
    """One intermediate: its alloc, size and live interval [start, end] in op positions."""

    name: str
    alloc: memref.AllocOp
    nbytes: int
    start: int
    end: int
    offset: int | None = None
    donated_input: int | None = None  # lives in that input argument's storage

    @property
    def type(self) -> Attribute:
        return self.alloc.memref.type

    def overlaps(self, other: Buffer) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class HostPlan:
    """What the plan decided for one host function, and its byte counts."""

    function: func.FuncOp
    buffers: list[Buffer] = field(default_factory=list)
    kept_bytes: int = 0  # static allocs left as they are (escaping)
    arena_bytes: int = 0
    aliases: dict[int, int] = field(default_factory=dict)  # out-param arg -> input arg
    input_bytes: int = 0
    output_bytes: int = 0
    aliased_bytes: int = 0

    def live_peak_bytes(self) -> int:
        own = [b for b in self.buffers if b.donated_input is None]
        points = {b.start for b in own}
        live = [sum(b.nbytes for b in own if b.start <= p <= b.end) for p in points]
        return max(live, default=0)

    def attributes(self) -> dict[str, int]:
        """The host's byte counts, by attribute name (see the module docstring)."""
        owned_outputs = self.output_bytes - self.aliased_bytes
        intermediates = self.arena_bytes + self.kept_bytes
        unplanned = self.output_bytes + self.kept_bytes + sum(b.nbytes for b in self.buffers)
        return {
            PEAK_BYTES_ATTR: owned_outputs + intermediates,
            ARENA_BYTES_ATTR: intermediates,
            UNPLANNED_BYTES_ATTR: unplanned,
            LIVE_PEAK_BYTES_ATTR: owned_outputs + self.kept_bytes + self.live_peak_bytes(),
            INPUT_BYTES_ATTR: self.input_bytes,
            OUTPUT_BYTES_ATTR: self.output_bytes,
            ALIASED_BYTES_ATTR: self.aliased_bytes,
        }


def positions_of(block: Block) -> dict[Operation, int]:
    return {op: k for k, op in enumerate(block.ops)}


def use_positions(value: SSAValue, block: Block, positions: dict[Operation, int]) -> list[int]:
    return [positions[top_level(op, block)] for op in memory_uses(value)]


def escapes(value: SSAValue) -> bool:
    return any(isinstance(op, func.ReturnOp) for op in views_and_uses(value))


# ---------------------------------------------------------------------------------------
# offsets
# ---------------------------------------------------------------------------------------


def assign_offsets(buffers: Sequence[Buffer]) -> int:
    """Greedy by size, best fit (see the module docstring); returns the arena size."""
    order = sorted(enumerate(buffers), key=lambda kb: (-kb[1].nbytes, kb[1].start, kb[0]))
    placed: list[Buffer] = []
    arena = 0
    for _, buffer in order:
        busy = sorted(
            ((b.offset or 0, (b.offset or 0) + b.nbytes) for b in placed if b.overlaps(buffer)),
        )
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for begin, end in busy:
            gap = begin - cursor
            if gap >= buffer.nbytes and (best is None or gap < best[0]):
                best = (gap, cursor)
            cursor = max(cursor, align_up(end))
        buffer.offset = best[1] if best is not None else cursor
        arena = max(arena, buffer.offset + buffer.nbytes)
        placed.append(buffer)
    return arena


# ---------------------------------------------------------------------------------------
# donation
# ---------------------------------------------------------------------------------------


def arg_attr(function: func.FuncOp, index: int, name: str) -> Attribute | None:
    attrs = function.arg_attrs
    if attrs is None or index >= len(attrs.data):
        return None
    return attrs.data[index].data.get(name)


def set_arg_attr(function: func.FuncOp, index: int, name: str, value: Attribute) -> None:
    count = len(function.function_type.inputs.data)
    old = list(function.arg_attrs.data) if function.arg_attrs is not None else []
    old += [DictionaryAttr({})] * (count - len(old))
    old[index] = DictionaryAttr({**old[index].data, name: value})
    function.properties["arg_attrs"] = ArrayAttr(old)


def num_outputs(function: func.FuncOp) -> int:
    attr = function.attributes.get(NUM_OUTPUTS_ATTR)
    return int(attr.value.data) if isinstance(attr, IntegerAttr) else 0


def kernel_generic(
    op: Operation, module: ModuleOp
) -> tuple[GenericOp, dict[SSAValue, SSAValue]] | None:
    """The generic `op` runs and a map from its operands to host values, if `op` is a
    linalg.generic or a call of a `tess.kernel` whose body is one generic."""
    if isinstance(op, GenericOp):
        return op, {v: v for v in op.operands}
    if not isinstance(op, func.CallOp):
        return None
    callee = SymbolTable.lookup_symbol(module, op.callee.root_reference.data)
    if not isinstance(callee, func.FuncOp) or KERNEL_ATTR not in callee.attributes:
        return None
    if not callee.body.blocks:
        return None
    body = [o for o in callee.body.block.ops if not isinstance(o, arith.ConstantOp)]
    if (
        len(body) != 2
        or not isinstance(body[0], GenericOp)
        or not isinstance(body[1], func.ReturnOp)
    ):
        return None
    host_values = dict(zip(callee.body.block.args, op.arguments, strict=True))
    generic = body[0]
    if any(v not in host_values for v in generic.operands):
        return None
    return generic, {v: host_values[v] for v in generic.operands}


def is_identity(map_attr: Attribute) -> bool:
    if not isinstance(map_attr, AffineMapAttr):
        return False
    affine_map = map_attr.data
    return affine_map.num_symbols == 0 and affine_map == type(affine_map).identity(
        affine_map.num_dims
    )


def overwrites_in_place(
    writer: Operation, out: SSAValue, donor: SSAValue, module: ModuleOp
) -> bool:
    """Whether `writer` may write `out` into `donor`'s storage (see the module docstring)."""
    if isinstance(writer, memref.CopyOp):
        return writer.source is donor and writer.destination is out
    found = kernel_generic(writer, module)
    if found is None:
        return False
    generic, host_value = found
    if any(it.data != IteratorType.PARALLEL for it in generic.iterator_types.data):
        return False
    maps = generic.indexing_maps.data
    donor_views = {
        r for op in views_and_uses(donor) if isinstance(op, VIEW_OPS) for r in op.results
    }
    wrote = False
    for index, operand in enumerate(generic.operands):
        value = host_value[operand]
        is_output = index >= len(generic.inputs)
        if value in donor_views:
            return False  # the donor seen through a view: its elements at other indices
        if value is out:
            if not is_output or not is_identity(maps[index]):
                return False
            wrote = True
        elif value is donor and (is_output or not is_identity(maps[index])):
            return False
    return wrote


def first_writer(out: SSAValue, block: Block, positions: dict[Operation, int]) -> Operation | None:
    """The op of `block` that first touches `out`, if it does so once and directly."""
    touching = [top_level(op, block) for op in memory_uses(out)]
    if not touching:
        return None
    first = min(positions[op] for op in touching)
    at_first = [op for op in touching if positions[op] == first]
    direct = [use.operation for use in out.uses]
    if len(at_first) != 1 or at_first[0] not in direct:
        return None
    return at_first[0]


def find_aliases(
    function: func.FuncOp, module: ModuleOp, positions: dict[Operation, int]
) -> list[tuple[int, int, Operation]]:
    """Out-params that may live in a donated input: (out-param arg, input arg, first writer)."""
    block = function.body.block
    args = list(block.args)
    split = len(args) - num_outputs(function)
    donors = [k for k in range(split) if arg_attr(function, k, DONATED_ATTR) is not None]
    aliases: list[tuple[int, int, Operation]] = []
    for out_index in range(split, len(args)):
        out = args[out_index]
        writer = first_writer(out, block, positions)
        if writer is None:
            continue
        for donor_index in donors:
            donor = args[donor_index]
            if any(d == donor_index for _, d, _ in aliases) or donor.type != out.type:
                continue
            last_use = max(use_positions(donor, block, positions), default=-1)
            if last_use <= positions[writer] and overwrites_in_place(writer, out, donor, module):
                aliases.append((out_index, donor_index, writer))
                break
    return aliases


def reuse_donated(
    function: func.FuncOp,
    buffers: Sequence[Buffer],
    aliases: dict[int, int],
    positions: dict[Operation, int],
) -> None:
    """Place intermediates of a donated input's type in its storage when it is free."""
    block = function.body.block
    args = list(block.args)
    end_of_block = len(positions)
    for index, arg in enumerate(args[: len(args) - num_outputs(function)]):
        if arg_attr(function, index, DONATED_ATTR) is None:
            continue
        free_from = max(use_positions(arg, block, positions), default=-1) + 1
        free_until = end_of_block
        for out_index, donor_index in aliases.items():
            if donor_index == index:
                free_until = min(use_positions(args[out_index], block, positions))
        tenants: list[Buffer] = []
        for buffer in sorted(buffers, key=lambda b: b.start):
            fits = free_from <= buffer.start and buffer.end < free_until
            if (
                fits
                and buffer.donated_input is None
                and buffer.type == arg.type
                and not any(t.overlaps(buffer) for t in tenants)
            ):
                buffer.donated_input = index
                tenants.append(buffer)


# ---------------------------------------------------------------------------------------
# planning one host
# ---------------------------------------------------------------------------------------


def is_host(function: func.FuncOp) -> bool:
    """A bufferized function with a body that is not a kernel."""
    if not function.body.blocks or KERNEL_ATTR in function.attributes:
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


def called_functions(module: ModuleOp) -> set[str]:
    return {op.callee.root_reference.data for op in module.walk() if isinstance(op, func.CallOp)}


def pass_callee_workspaces(block: Block, workspaces: dict[str, int]) -> None:
    """Give each call of a host with a workspace a fresh buffer of that size, to plan."""
    for call in [op for op in block.ops if isinstance(op, func.CallOp)]:
        size = workspaces.get(call.callee.root_reference.data)
        if not size:
            continue
        alloc = memref.AllocOp([], [], MemRefType(i8, [size]))
        alloc.memref.name_hint = f"{call.callee.root_reference.data}_workspace"
        new_call = func.CallOp(call.callee, [*call.arguments, alloc.memref], call.result_types)
        new_call.attributes.update(call.attributes)
        Rewriter.insert_op(alloc, InsertPoint.before(call))
        Rewriter.replace_op(call, new_call)


def collect_buffers(block: Block, positions: dict[Operation, int], plan: HostPlan) -> None:
    for op in block.ops:
        if not isinstance(op, memref.AllocOp):
            continue
        nbytes = memref_bytes(op.memref.type)
        if nbytes is None:
            continue
        if escapes(op.memref):
            plan.kept_bytes += nbytes
            continue
        where = use_positions(op.memref, block, positions) or [positions[op]]
        name = op.memref.name_hint or f"#{len(plan.buffers)}"
        plan.buffers.append(Buffer(name, op, nbytes, min(where), max(where)))


def add_workspace_argument(function: func.FuncOp, size: int) -> SSAValue:
    block = function.body.block
    arena = block.insert_arg(MemRefType(i8, [size]), len(block.args))
    arena.name_hint = "workspace"
    inputs = [*function.function_type.inputs.data, arena.type]
    function.properties["function_type"] = FunctionType.from_lists(
        inputs, list(function.function_type.outputs.data)
    )
    set_arg_attr(function, len(inputs) - 1, WORKSPACE_ATTR, UnitAttr())
    function.attributes[WORKSPACE_BYTES_ATTR] = IntegerAttr(size, i64)
    return arena


def rewrite_buffers(plan: HostPlan, workspace_arg: bool) -> None:
    function = plan.function
    block = function.body.block
    args = list(block.args)
    for buffer in plan.buffers:
        for op in list(views_and_uses(buffer.alloc.memref)):
            if isinstance(op, memref.DeallocOp):
                Rewriter.erase_op(op)
    in_arena = [b for b in plan.buffers if b.donated_input is None]
    arena: SSAValue | None = None
    if in_arena and workspace_arg:
        arena = add_workspace_argument(function, plan.arena_bytes)
    elif in_arena:
        alloc = memref.AllocOp(
            [], [], MemRefType(i8, [plan.arena_bytes]), IntegerAttr(ALIGNMENT, i64)
        )
        alloc.memref.name_hint = "arena"
        Rewriter.insert_op(alloc, InsertPoint.at_start(block))
        arena = alloc.memref
    for buffer in plan.buffers:
        if buffer.donated_input is not None:
            buffer.alloc.memref.replace_all_uses_with(args[buffer.donated_input])
            Rewriter.erase_op(buffer.alloc)
            continue
        assert arena is not None and buffer.offset is not None
        offset = arith.ConstantOp(IntegerAttr(buffer.offset, IndexType()))
        view = memref.ViewOp(arena, offset, [], buffer.alloc.memref.type)
        Rewriter.insert_op(offset, InsertPoint.before(buffer.alloc))
        Rewriter.replace_op(buffer.alloc, view)


def plan_host(
    function: func.FuncOp,
    module: ModuleOp,
    workspaces: dict[str, int],
    donation: bool,
    workspace_arg: bool,
) -> HostPlan:
    block = function.body.block
    if workspace_arg:
        pass_callee_workspaces(block, workspaces)
    positions = positions_of(block)
    plan = HostPlan(function)
    collect_buffers(block, positions, plan)
    aliases = find_aliases(function, module, positions) if donation else []
    plan.aliases = {out_index: donor_index for out_index, donor_index, _ in aliases}
    if donation:
        reuse_donated(function, plan.buffers, plan.aliases, positions)
    plan.arena_bytes = assign_offsets([b for b in plan.buffers if b.donated_input is None])

    args = list(block.args)
    split = len(args) - num_outputs(function)
    plan.input_bytes = sum(memref_bytes(a.type) or 0 for a in args[:split])
    plan.output_bytes = sum(memref_bytes(a.type) or 0 for a in args[split:])
    plan.aliased_bytes = sum(memref_bytes(args[k].type) or 0 for k in plan.aliases)
    for out_index, donor_index, writer in aliases:
        set_arg_attr(function, out_index, ALIASES_INPUT_ATTR, IntegerAttr(donor_index, i64))
        if isinstance(writer, memref.CopyOp):
            Rewriter.erase_op(writer)  # the donated input already holds the data
    rewrite_buffers(plan, workspace_arg)
    if workspace_arg and plan.arena_bytes:
        workspaces[function.sym_name.data] = plan.arena_bytes
    for name, value in plan.attributes().items():
        function.attributes[name] = IntegerAttr(value, i64)
    return plan


def attribute_text(attr: Attribute) -> str:
    stream = StringIO()
    Printer(stream=stream).print_attribute(attr)
    return stream.getvalue()


def format_report(plan: HostPlan) -> str:
    function = plan.function
    attrs = {
        name.removeprefix("tess."): int(attr.value.data)
        for name, attr in function.attributes.items()
        if name.endswith("_bytes") and isinstance(attr, IntegerAttr)
    }
    summary = ", ".join(f"{k} {v}" for k, v in attrs.items())
    lines = [f"tess-memory-plan @{function.sym_name.data}: {summary}"]
    for out_index, donor_index in sorted(plan.aliases.items()):
        lines.append(f"  out-param {out_index} aliases donated input {donor_index}")
    if plan.buffers:
        rows = [("buffer", "type", "bytes", "interval", "offset")]
        for b in plan.buffers:
            where = f"input {b.donated_input}" if b.donated_input is not None else str(b.offset)
            rows.append(
                (b.name, attribute_text(b.type), str(b.nbytes), f"[{b.start}, {b.end}]", where)
            )
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        for row in rows:
            lines.append(
                "  "
                + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class TessMemoryPlanPass(ModulePass):
    """Plan each host's intermediates into one arena; see the module docstring."""

    name = "tess-memory-plan"

    workspace_arg: bool = True
    """The arena is a trailing `tess.workspace` argument (else a `memref.alloc`)."""

    donation: bool = True
    """Honour `tess.donated` input arguments (in-place outputs, reused storage)."""

    report: bool = False
    """Print each host's plan to stderr."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        called = called_functions(op)
        workspaces: dict[str, int] = {}
        for function in hosts_callees_first(op):
            if PEAK_BYTES_ATTR in function.attributes:
                size = function.attributes.get(WORKSPACE_BYTES_ATTR)
                if isinstance(size, IntegerAttr):
                    workspaces[function.sym_name.data] = int(size.value.data)
                continue
            if len(function.body.blocks) != 1:
                raise PassFailedException(
                    f"tess-memory-plan expects single-block hosts, @{function.sym_name.data} "
                    "has several"
                )
            donation = self.donation and function.sym_name.data not in called
            plan = plan_host(function, op, workspaces, donation, self.workspace_arg)
            if self.report:
                print(format_report(plan), file=sys.stderr)


__all__ = [
    "ALIASES_INPUT_ATTR",
    "ALIGNMENT",
    "DONATED_ATTR",
    "PEAK_BYTES_ATTR",
    "UNPLANNED_BYTES_ATTR",
    "WORKSPACE_ATTR",
    "WORKSPACE_BYTES_ATTR",
    "TessMemoryPlanPass",
    "memref_bytes",
]
