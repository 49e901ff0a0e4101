"""
A horizontally fused host's second form, reading some arenas' members where they lie.

Separate caller arrays (an optimizer's gradients) were copied into an arena every call
(200 small gradients: 733 KB). Where an input arena is only read at a loop's index,
codegen also emits `<host>_members`: that arena is an int64 table, entry m member m's
data address less its byte offset, read through a `carray` at that address
(`member_pointer`), with the same body and indices. A host whose kernels are emitted into
it (`host_member_plan`: any number of kernels, a workspace) runs each arena loop (1-D,
from 0 by 1 over the arena) member by member over `[lo_m, hi_m)`, and each segmented
loop (`tess.row_ranges`, Lamb's norms and update) reads per segment the member it lies
in. A threaded host (`codegen.numba_threads`; `member_plan`: one kernel, one arena loop)
launches `<kernel>_members`, whose share of the loop's chunks runs each member's part.
The runtime (`Executable.pack_inputs`) fills the tables and calls this form when some
tabled arena is not already one buffer (members of one layout and dtype, bf16/f16 as bits).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, SSAValue

from tessc.dialects import contract
from tessc.lowering.codegen import numba_external
from tessc.lowering.codegen.numba_function import FunctionEmitter, is_memref_index, trip_count
from tessc.lowering.codegen.numba_source import NoDtypeError, dtype_name
from tessc.lowering.loops.index_values import constant_int
from tessc.lowering.loops.trip_counts import static_work_of

TABLE_DTYPES = frozenset(
    ["float32", "float64", "int8", "int16", "int32", "int64"]
    + ["uint8", "uint16", "uint32", "uint64"]
)
"""Element types a member `carray` can take (`dtype_name`, no bool): a bf16/f16 arena is
"uint16", the bits a kernel holds, so a split-bf16 step's gradients are tabled too."""

MEMBER_POINTER_INTRINSIC = '''
@intrinsic
def member_pointer(typingctx, address):
    """An address from a member table as a `void *` (for `carray`)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return types.voidptr(types.int64), codegen
'''.strip()


@dataclass(frozen=True)
class MemberPlan:
    """How to emit `host`'s member form: the kernel's `loop`, the host inputs read
    through tables (`tabled`, by argument index; `kernel_tabled`, the kernel's arguments
    they are) and the members' element `bounds` (`lo_0 = 0, lo_1, ..., hi_last`)."""

    host: func.FuncOp
    kernel: func.FuncOp
    loop: scf.ParallelOp
    tabled: tuple[int, ...]
    kernel_tabled: tuple[int, ...]
    bounds: tuple[int, ...]


def member_bounds(layout: contract.ArenaLayout, h: int, extent: int) -> tuple[int, ...] | None:
    """The members of input arena `h` (element bounds) if they fill it back to back."""
    slots = sorted(
        (s for s in layout.inputs if s.host == h and s.offset is not None),
        key=lambda s: s.offset or 0,
    )
    bounds = [0]
    for slot in slots:
        if slot.offset != bounds[-1]:
            return None
        bounds.append(bounds[-1] + math.prod(slot.shape))
    if len(bounds) < 2 or bounds[-1] != extent:
        return None
    return tuple(bounds)


def table_candidates(host: func.FuncOp) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Each input of `host`, a host `tess-fuse-horizontal` packed, that its member form
    could read through a table (argument index, members' element bounds): an arena no
    output aliases, a 1-D memref of a `TABLE_DTYPES` type whose two or more members fill
    it (one member: its array is the arena, no copy to save). The caller tables those its
    kernels read at a loop's index, all of one bounds (a member loop runs over one table
    of bounds)."""
    layout = contract.ARENA_LAYOUT.get(host)
    if layout is None or contract.KERNEL.has(host):
        return
    num_outputs = contract.NUM_OUTPUTS.get(host) or 0
    args = host.body.block.args
    split = len(args) - num_outputs - contract.WORKSPACE_BYTES.has(host)
    aliased = {contract.ALIASES_INPUT.get_arg(host, k) for k in range(split, split + num_outputs)}
    for h in range(split):
        typ = args[h].type
        if h in aliased or not isinstance(typ, MemRefType) or len(typ.get_shape()) != 1:
            continue
        try:
            if dtype_name(typ.element_type) not in TABLE_DTYPES:
                continue
        except NoDtypeError:
            continue
        bounds = member_bounds(layout, h, typ.get_shape()[0])
        if bounds is not None and len(bounds) > 2:
            yield h, bounds


def member_plan(host: func.FuncOp, kernels: dict[str, func.FuncOp]) -> MemberPlan | None:
    """`host`'s member form, when it has one (module docstring); else None. `kernels`: the
    kernels whose body the form may rewrite (emitted into their hosts, or threaded)."""
    if not contract.ARENA_LAYOUT.has(host) or contract.WORKSPACE_BYTES.has(host):
        return None
    ops = list(host.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[1], func.ReturnOp):
        return None
    call = ops[0]
    if not isinstance(call, func.CallOp):
        return None
    kernel = kernels.get(call.callee.root_reference.data)
    if kernel is None or call.results:
        return None
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ParallelOp)]
    if len(loops) != 1:
        return None  # (the kernel's other ops, a step counter's update, are emitted as they are)
    loop = loops[0]
    if len(loop.body.block.args) != 1 or loop.initVals:
        return None
    iv = loop.body.block.args[0]
    extent = trip_count(loop.lowerBound[0], loop.upperBound[0], loop.step[0])
    if constant_int(loop.lowerBound[0]) != 0 or constant_int(loop.step[0]) != 1 or not extent:
        return None
    if not all(is_memref_index(use) for use in iv.uses):
        return None  # the index counts in uint64: only memrefs may take it
    tabled: list[int] = []
    kernel_tabled: list[int] = []
    bounds: tuple[int, ...] | None = None
    for h, found in table_candidates(host):
        if found[-1] != extent or (bounds is not None and found != bounds):
            continue
        uses = list(host.body.block.args[h].uses)
        if len(uses) != 1 or uses[0].operation is not call:
            continue
        inner = kernel.body.block.args[uses[0].index]
        if all(
            isinstance(use.operation, memref.LoadOp)
            and use.index == 0
            and list(use.operation.indices) == [iv]
            for use in inner.uses
        ):
            tabled.append(h)
            kernel_tabled.append(uses[0].index)
            bounds = found
    if not tabled or bounds is None:
        return None
    return MemberPlan(host, kernel, loop, tuple(tabled), tuple(kernel_tabled), bounds)


@dataclass(frozen=True)
class HostMemberPlan:
    """How to emit the member form of a host (or of a kernel it calls): the inputs read
    through tables (`tabled`), the members' element `bounds`, the arena loops run member
    by member (`member_loops`), the segmented loops (`tess.row_ranges`) whose segment lies
    in one member (`segment_loops`: each with its segments' members), and the kernels
    called by name that read tabled arenas (`kernel_tabled`: each with the arguments that
    are tables in its own member form)."""

    host: func.FuncOp
    tabled: tuple[int, ...]
    bounds: tuple[int, ...]
    member_loops: tuple[scf.ParallelOp, ...]
    segment_loops: tuple[tuple[scf.ForOp, tuple[int, ...]], ...]
    kernel_tabled: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def of_kernel(self, kernel: func.FuncOp, tabled: tuple[int, ...]) -> HostMemberPlan:
        """The plan of `kernel`'s member form, its arguments `tabled` tables."""
        return HostMemberPlan(kernel, tabled, self.bounds, self.member_loops, self.segment_loops)


def _segment_members(ranges: Sequence[int], bounds: Sequence[int]) -> tuple[int, ...] | None:
    """The member each segment `[ranges[2r], ranges[2r+1])` lies in, if each lies in one."""
    members: list[int] = []
    for lo, hi in zip(ranges[::2], ranges[1::2], strict=True):
        inside = [
            m
            for m in range(len(bounds) - 1)
            if bounds[m] <= lo and hi <= bounds[m + 1] and (lo < bounds[m + 1] or lo == hi)
        ]
        if not inside:
            return None
        members.append(inside[0])
    return tuple(members)


def _member_loop(
    load: memref.LoadOp, bounds: tuple[int, ...]
) -> scf.ParallelOp | tuple[scf.ForOp, tuple[int, ...]] | None:
    """The loop at whose index `load` reads a tabled arena, if that loop can read it
    member by member: a 1-D `scf.parallel` from 0 by 1 over the whole arena, or a
    segmented loop's inner loop whose every segment lies in one member (with those
    members); else None."""
    if len(load.indices) != 1 or not isinstance(load.indices[0], BlockArgument):
        return None
    iv = load.indices[0]
    loop = iv.owner.parent_op()
    if not all(is_memref_index(use) for use in iv.uses):
        return None  # the index counts in uint64: only memrefs may take it
    if isinstance(loop, scf.ParallelOp):
        if len(loop.body.block.args) != 1 or loop.initVals:
            return None
        extent = trip_count(loop.lowerBound[0], loop.upperBound[0], loop.step[0])
        if constant_int(loop.lowerBound[0]) != 0 or constant_int(loop.step[0]) != 1:
            return None
        return loop if extent == bounds[-1] else None
    if isinstance(loop, scf.ForOp) and iv is loop.body.block.args[0]:
        rows = loop.parent_op()
        ranges = contract.ROW_RANGES.get(rows) if isinstance(rows, scf.ParallelOp) else None
        if ranges is None or constant_int(loop.step) != 1 or len(rows.body.block.args) != 1:
            return None
        members = _segment_members(list(ranges), bounds)
        return None if members is None else (loop, members)
    return None


def host_member_plan(
    host: func.FuncOp,
    inlined: dict[str, func.FuncOp],
    called: dict[str, func.FuncOp] | None = None,
) -> HostMemberPlan | None:
    """The member form of `host`, whose `inlined` kernels are emitted into it and which
    calls the `called` ones (each then gets a member form of its own), when it has one:
    every input arena that only those kernels read, and only in loops `_member_loop`
    accepts, is tabled (all of one members' bounds); else None."""
    called = called or {}
    host_args = host.body.block.args
    tabled: list[int] = []
    bounds: tuple[int, ...] | None = None
    member_loops: dict[scf.ParallelOp, None] = {}
    segment_loops: dict[scf.ForOp, tuple[int, ...]] = {}
    kernel_tabled: dict[str, set[int]] = {}
    for h, found in table_candidates(host):
        if bounds is not None and found != bounds:
            continue
        loops = _arena_loops(host_args[h], inlined, called, found)
        if loops is None:
            continue
        for use in host_args[h].uses:
            callee = use.operation.callee.root_reference.data  # type: ignore[attr-defined]
            if callee in called:
                kernel_tabled.setdefault(callee, set()).add(use.index)
        tabled.append(h)
        bounds = found
        for loop in loops:
            if isinstance(loop, scf.ParallelOp):
                member_loops[loop] = None
            else:
                segment_loops[loop[0]] = loop[1]
    if not tabled or bounds is None:
        return None
    tables = {host_args[h] for h in tabled}
    for op in host.body.block.ops:  # each call passes a table wherever its callee takes one
        if isinstance(op, func.CallOp) and op.callee.root_reference.data in kernel_tabled:
            positions = kernel_tabled[op.callee.root_reference.data]
            if any(op.arguments[k] not in tables for k in positions):
                return None
    kernels = {**inlined, **called}
    order = {  # (in program order: the names codegen gives their tables do not vary)
        op: k
        for k, op in enumerate(
            op
            for call in host.body.block.ops
            if isinstance(call, func.CallOp) and call.callee.root_reference.data in kernels
            for op in kernels[call.callee.root_reference.data].walk()
        )
    }
    return HostMemberPlan(
        host,
        tuple(tabled),
        bounds,
        tuple(sorted(member_loops, key=order.__getitem__)),
        tuple(sorted(segment_loops.items(), key=lambda item: order[item[0]])),
        tuple((callee, tuple(sorted(kernel_tabled[callee]))) for callee in sorted(kernel_tabled)),
    )


def _arena_loops(
    arena: SSAValue,
    inlined: dict[str, func.FuncOp],
    called: dict[str, func.FuncOp],
    bounds: tuple[int, ...],
) -> list[scf.ParallelOp | tuple[scf.ForOp, tuple[int, ...]]] | None:
    """The loops reading host input `arena` (`_member_loop`), if it is only passed to
    `inlined` or `called` kernels that read it only in such loops; else None."""
    loops: list[scf.ParallelOp | tuple[scf.ForOp, tuple[int, ...]]] = []
    for use in arena.uses:
        call = use.operation
        if not isinstance(call, func.CallOp) or call.results:
            return None
        callee = call.callee.root_reference.data
        kernel = inlined.get(callee) or called.get(callee)
        if kernel is None:
            return None
        for inner in kernel.body.block.args[use.index].uses:
            load = inner.operation
            if not isinstance(load, memref.LoadOp) or inner.index != 0:
                return None
            loop = _member_loop(load, bounds)
            if loop is None:
                return None
            loops.append(loop)
    return loops


def bind_member_tables(
    emitter: FunctionEmitter, names: list[str], tabled: Sequence[int]
) -> dict[str, tuple[str, str]]:
    """Renames each tabled argument of `emitter`'s function (by index into `names`, its
    argument names) to its table, `<arena>_table`; returns arena name -> (table, dtype)."""
    args = emitter.fn.body.block.args
    tables: dict[str, tuple[str, str]] = {}
    for k in tabled:
        arena = names[k]
        typ = args[k].type
        assert isinstance(typ, MemRefType)
        tables[arena] = (emitter.names.hinted(f"{arena}_table"), dtype_name(typ.element_type))
        names[k] = tables[arena][0]
    return tables


def member_carray_lines(tables: dict[str, tuple[str, str]], member: str, hi: str) -> list[str]:
    """Each tabled arena rebound, for `member`, to a `carray` at its address (`hi` long)."""
    return [
        f"{arena} = carray(member_pointer({table}[{member}]), ({hi},), np.{dtype})"
        for arena, (table, dtype) in tables.items()
    ]


class MemberEmitter(FunctionEmitter):
    """Emits a host's member form (`HostMemberPlan`): its arguments, then its body with
    each member loop run as a loop over members, each tabled arena a `carray` at the
    member's address, and each segmented loop's segment reading its member's `carray`
    (`segment_tables`: each segment-members tuple's module-level table name)."""

    def __init__(
        self,
        plan: HostMemberPlan,
        function_names: dict[str, str],
        parallel: bool,
        inlined: dict[str, func.FuncOp],
        bounds_name: str,
        serial_below: float,
        segment_tables: dict[tuple[int, ...], str],
        member_kernels: dict[str, str] | None = None,
        externals: frozenset[str] = frozenset(),
    ):
        reserved = {f" segments {k}": name for k, name in enumerate(segment_tables.values())}
        reserved |= {f" members {k}": name for k, name in (member_kernels or {}).items()}
        super().__init__(
            plan.host,
            {**function_names, "": bounds_name, **reserved},
            parallel,
            inlined,
            serial_below,
            externals=externals,
        )
        self.plan = plan
        self.bounds_name = bounds_name
        self.tables: dict[str, tuple[str, str]] = {}  # arena name -> (table name, dtype)
        self.segments = {loop: segment_tables[members] for loop, members in plan.segment_loops}
        self.member_kernels = member_kernels or {}
        """Kernels called by name that read tables -> their member forms' names."""
        self.table_names: dict[SSAValue, str] = {}

    def emit(self, num_outputs: int) -> None:
        names = self.argument_names(num_outputs)
        self.tables = bind_member_tables(self, names, self.plan.tabled)
        args = self.fn.body.block.args
        self.table_names = {args[k]: names[k] for k in self.plan.tabled}
        self.arg_names = names
        self.indent = 0
        self.emit_body(self.fn.body.block)

    def emit_external(self) -> None:
        """A kernel called by name (`codegen.numba_external`): pointers (a tabled
        argument's to its table) and the sizes of `?` dims, its arrays made from them."""
        names = self.argument_names(0)
        self.tables = bind_member_tables(self, names, self.plan.tabled)
        self.indent = 1
        pointers = [self.names.hinted(f"{name}_ptr") for name in names]
        sizes: list[str] = []
        types = self.fn.function_type.inputs.data
        for k, (name, pointer, typ) in enumerate(zip(names, pointers, types, strict=True)):
            assert isinstance(typ, MemRefType)
            if k in self.plan.tabled:
                count = len(self.plan.bounds) - 1
                self.line(f"{name} = carray({pointer}, ({count},), np.int64)")
                continue
            own = [self.names.hinted(f"{name}_n{d}") for d in numba_external.dynamic_dims(typ)]
            self.line(numba_external.carray_line(name, pointer, typ, own))
            sizes += own
        self.arg_names = pointers + sizes
        self.indent = 0
        self.emit_body(self.fn.body.block)

    def emit_call(self, op: func.CallOp) -> None:
        callee = op.callee.root_reference.data
        name = self.member_kernels.get(callee)
        if name is None:
            super().emit_call(op)
            return
        if callee in self.externals:  # pointers: a table's address where it takes one
            sizes = [size for arg in op.arguments for size in self.dynamic_sizes(arg)]
            args = [
                f"{self.table_names[a]}.ctypes.data" if a in self.table_names else self.address(a)
                for a in op.arguments
            ]
            self.line(f"{name}({', '.join([*args, *sizes])})")
            return
        args = [self.table_names.get(a) or self.expr(a) for a in op.arguments]
        self.line(f"{name}({', '.join(args)})")

    def emit_for(self, op: scf.ForOp) -> None:
        table = self.segments.get(op)
        if table is not None:  # the row's segment lies in one member: read that one
            rows = op.parent_op()
            assert isinstance(rows, scf.ParallelOp)
            member = self.names.numbered("member")
            self.line(f"{member} = {table}[{self.expr(rows.body.block.args[0])}]")
            for line in member_carray_lines(self.tables, member, self.expr(op.ub)):
                self.line(line)
        super().emit_for(op)

    def emit_parallel(self, op: scf.ParallelOp) -> None:
        if op not in self.plan.member_loops:
            super().emit_parallel(op)
            return
        iv = op.body.block.args[0]
        member = self.names.numbered("member")
        lo, hi = self.names.numbered("lo"), self.names.numbered("hi")
        count = len(self.plan.bounds) - 1
        if self.parallel and static_work_of(op) >= self.serial_below:
            self.line(self.parallel_header(member, str(count)))
        else:
            self.line(f"for {member} in range({count}):")
        self.indent += 1
        self.line(f"{lo} = {self.bounds_name}[{member}]")
        self.line(f"{hi} = {self.bounds_name}[{member} + 1]")
        for line in member_carray_lines(self.tables, member, hi):
            self.line(line)
        index = self.define(iv, "i")
        self.line(f"for {index} in range(np.uint64({lo}), np.uint64({hi})):")
        self.emit_body(op.body.block)
        self.indent -= 1


class ThreadedMemberEmitter(FunctionEmitter):
    """Emits the member form of a threaded kernel (`MemberPlan.kernel`): its share
    `[lo, hi)` of the arena loop's chunks (`tess.chunk_size`, else single iterations),
    then each member's part of that share, each tabled arena a `carray` at the member's
    address. `extent` is the number of chunks its launch shares out."""

    def __init__(
        self,
        plan: MemberPlan,
        function_names: dict[str, str],
        bounds_name: str,
        serial_below: float,
    ):
        names = {**function_names, "": bounds_name}  # (no local may take the bounds' name)
        super().__init__(plan.kernel, names, True, {}, serial_below)
        self.plan = plan
        self.bounds_name = bounds_name
        self.tables: dict[str, tuple[str, str]] = {}  # arena name -> (table name, dtype)
        trips = plan.bounds[-1]
        size = contract.CHUNK_SIZE.get(plan.loop) or 1
        self.chunk = size if 0 < size < trips else 1
        self.extent = -(-trips // self.chunk)

    def emit(self) -> None:
        share = [self.names.hinted("lo"), self.names.hinted("hi")]
        self.threaded = (share[0], share[1])
        names = self.argument_names(0)
        self.tables = bind_member_tables(self, names, self.plan.kernel_tabled)
        self.arg_names = share + names
        self.indent = 0
        self.emit_body(self.fn.body.block)

    def emit_parallel(self, op: scf.ParallelOp) -> None:
        if op is not self.plan.loop:
            super().emit_parallel(op)
            return
        assert self.threaded is not None
        share_lo, share_hi = self.threaded
        first, last = self.names.numbered("first"), self.names.numbered("last")
        scale = f" * {self.chunk}" if self.chunk > 1 else ""
        self.line(f"{first} = {share_lo}{scale}")
        self.line(f"{last} = min({share_hi}{scale}, {self.plan.bounds[-1]})")
        member = self.names.numbered("member")
        lo, hi = self.names.numbered("lo"), self.names.numbered("hi")
        self.line(f"for {member} in range({len(self.plan.bounds) - 1}):")
        self.indent += 1
        # A member straddling shares runs in each; one outside this share (or empty) in none.
        self.line(f"{lo} = max({self.bounds_name}[{member}], {first})")
        self.line(f"{hi} = min({self.bounds_name}[{member} + 1], {last})")
        self.line(f"if {lo} >= {hi}:")
        self.line("    continue")
        for line in member_carray_lines(self.tables, member, hi):
            self.line(line)
        index = self.define(op.body.block.args[0], "i")
        self.line(f"for {index} in range(np.uint64({lo}), np.uint64({hi})):")
        self.parallel = False  # the share is this thread's: loops inside it are serial
        self.emit_body(op.body.block)
        self.parallel = True
        self.indent -= 1


def threaded_member_host(
    plan: MemberPlan,
    function_names: dict[str, str],
    kernel_name: str,
    extent: int,
    num_outputs: int,
) -> FunctionEmitter:
    """The emitter of a threaded host's member form (after emitting it): the host's
    launch, of the kernel's member form `kernel_name` over `extent` chunks, its tabled
    arenas passed as their tables."""
    callee = plan.kernel.sym_name.data
    emitter = FunctionEmitter(
        plan.host, {**function_names, callee: kernel_name}, False, launches={callee: extent}
    )
    names = emitter.argument_names(num_outputs)
    args = plan.host.body.block.args
    for h in plan.tabled:
        names[h] = emitter.names.hinted(f"{names[h]}_table")
        emitter.exprs[args[h]] = names[h]
    emitter.arg_names = names
    emitter.indent = 0
    emitter.emit_body(plan.host.body.block)
    return emitter


def bounds_definition(name: str, bounds: Sequence[int]) -> str:
    """The module-level table of a member form's bounds (a constant to Numba)."""
    return f"{name} = np.array([{', '.join(map(str, bounds))}], np.int64)"


__all__ = [
    "MEMBER_POINTER_INTRINSIC",
    "HostMemberPlan",
    "MemberEmitter",
    "MemberPlan",
    "ThreadedMemberEmitter",
    "bind_member_tables",
    "bounds_definition",
    "host_member_plan",
    "member_bounds",
    "member_carray_lines",
    "member_plan",
    "table_candidates",
    "threaded_member_host",
]
