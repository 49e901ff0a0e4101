"""
`tess-memory-plan`: liveness-based buffer reuse, in-place updates, donation, peak memory
(level 4-5 hosts).

Each host's intermediates get live intervals; buffers whose intervals are disjoint, or
in-place partners (an elementwise update reading each element where it writes it), share
bytes. Out-params alias donated inputs where their storage does not conflict
(`tess.aliases_input`), intermediates may live in argument arrays, and the rest get offsets
in one 64-byte-aligned byte arena, the trailing `tess.workspace` argument the runtime
allocates once (`tess.workspace_bytes`). The host gets its byte figures (`tess.peak_bytes`,
..., `dialects/contract.py`). The five steps are in lowering/buffers/README.md; the planner
is `memory_plan_planner.py`, the group accumulator rewrite `memory_plan_accumulators.py`;
here the hosts' order, the rewrite into arena views and arguments, the report and the
pass. xDSL has no memory planning pass.
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
from tessc.lowering.buffers.memory_plan_dynamic import plan_dynamic_buffers
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
    plan_dynamic_buffers(function)  # those of a `?` dim: one region sized by N
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
