"""
A horizontally fused host's second form, reading some arenas' members where they lie.

Separate caller arrays (an optimizer's gradients) were copied into an arena every call
(200 small gradients: 733 KB). Where an input arena is only read at the arena loop's
index, codegen also emits `<host>_members`: that arena is an int64 table, entry m member
m's data address less its byte offset, and the loop runs member by member over
`[lo_m, hi_m)`, indexing a `carray` at that address (`member_pointer`): the same body and
indices. A threaded host (`codegen.numba_threads`) launches `<kernel>_members` instead,
whose share of the loop's chunks runs each member's part of it. The runtime
(`Executable.pack_inputs`) fills the table in the compiled call that checks the arrays
and calls this form when some tabled arena is not already one buffer. Only the simple
form: a host that is one call of a kernel (emitted into it, or threaded), that kernel's
one `scf.parallel` 1-D from 0 by 1 over the whole arena, the tabled arenas read only
there, each filled back to back by members of one layout and of a plain dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func, memref, scf
from xdsl.dialects.builtin import MemRefType

from tessc.dialects import contract
from tessc.lowering.codegen.numba_function import FunctionEmitter, is_memref_index, trip_count
from tessc.lowering.codegen.numba_source import NoDtypeError, dtype_name
from tessc.lowering.loops.index_values import constant_int
from tessc.lowering.loops.trip_counts import static_work_of

TABLE_DTYPES = frozenset(
    ["float32", "float64", "int8", "int16", "int32", "int64"]
    + ["uint8", "uint16", "uint32", "uint64"]
)
"""Element types a member `carray` can take (no 16-bit float bits, no bool)."""

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


def _member_bounds(layout: contract.ArenaLayout, h: int, extent: int) -> tuple[int, ...] | None:
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


def member_plan(host: func.FuncOp, kernels: dict[str, func.FuncOp]) -> MemberPlan | None:
    """`host`'s member form, when it has one (module docstring); else None. `kernels`: the
    kernels whose body the form may rewrite (emitted into their hosts, or threaded)."""
    layout = contract.ARENA_LAYOUT.get(host)
    if layout is None or contract.KERNEL.has(host) or contract.WORKSPACE_BYTES.has(host):
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
    num_outputs = contract.NUM_OUTPUTS.get(host) or 0
    host_args = host.body.block.args
    split = len(host_args) - num_outputs
    aliased = {contract.ALIASES_INPUT.get_arg(host, k) for k in range(split, len(host_args))}
    tabled: list[int] = []
    kernel_tabled: list[int] = []
    bounds: tuple[int, ...] | None = None
    for h in range(split):
        arg = host_args[h]
        typ = arg.type
        if h in aliased or not isinstance(typ, MemRefType) or typ.get_shape() != (extent,):
            continue
        try:
            if dtype_name(typ.element_type) not in TABLE_DTYPES:
                continue
        except NoDtypeError:
            continue
        found = _member_bounds(layout, h, extent)
        if found is None or (bounds is not None and found != bounds):
            continue
        uses = list(arg.uses)
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
    if not tabled or bounds is None or len(bounds) < 3:
        return None  # one member: its array is the arena (no copy to save)
    return MemberPlan(host, kernel, loop, tuple(tabled), tuple(kernel_tabled), bounds)


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
    """Emits a host's member form (`MemberPlan`): its arguments, then the kernel's loop
    as a loop over members, each tabled arena a `carray` at the member's address."""

    def __init__(
        self,
        plan: MemberPlan,
        function_names: dict[str, str],
        parallel: bool,
        inlined: dict[str, func.FuncOp],
        bounds_name: str,
        serial_below: float,
    ):
        super().__init__(
            plan.host,
            {**function_names, "": bounds_name},
            parallel,
            inlined,
            serial_below,
        )
        self.plan = plan
        self.bounds_name = bounds_name
        self.tables: dict[str, tuple[str, str]] = {}  # arena name -> (table name, dtype)

    def emit(self, num_outputs: int) -> None:
        names = self.argument_names(num_outputs)
        self.tables = bind_member_tables(self, names, self.plan.tabled)
        self.arg_names = names
        self.indent = 0
        self.emit_body(self.fn.body.block)

    def emit_parallel(self, op: scf.ParallelOp) -> None:
        if op is not self.plan.loop:
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
    "MemberEmitter",
    "MemberPlan",
    "ThreadedMemberEmitter",
    "bind_member_tables",
    "bounds_definition",
    "member_carray_lines",
    "member_plan",
    "threaded_member_host",
]
