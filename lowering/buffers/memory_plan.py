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

The planning (steps 1 to 5: `HostPlanner`) is in `memory_plan_planner.py`, the group
rewrite of step 3 in `group_accumulators.py`; here the hosts' order, the rewrite of allocs
into arena views and arguments, the report and the pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, TensorType, i8, i64
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.functions import add_workspace_argument, called_functions
from tessc.lowering.buffers.memory_plan_planner import (
    HostPlan,
    HostPlanner,
    views_and_uses,
)
from tessc.runtime.abi import ALIGNMENT


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


__all__ = ["TessMemoryPlanPass"]
