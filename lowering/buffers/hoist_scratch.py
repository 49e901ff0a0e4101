"""
`tess-hoist-scratch`: a kernel's fixed-size scratch buffers become views of its host's
workspace (level 5, loops).

`tess-pack-matmul` gives each packed product its panels as `memref.alloc`s at the top of
the kernel, allocated and freed on every call (three per product, nine in an MLP step). This
pass makes each static entry-block alloc of a kernel a trailing argument, passed as a
`memref.view` of the host's workspace past the planned arena (kernels run one after
another, so all share one region: the largest kernel's scratch). Buffers of `HUGE_PAGE`
bytes or more sit at multiples of it, which the runtime's huge-page workspace keeps; a host
with no plan gets a workspace for the scratch alone. Parallel kernels move too. Details and
the why are in lowering/buffers/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    i8,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tessc.dialects import contract
from tessc.dialects.functions import add_workspace_argument, called_functions
from tessc.lowering.buffers.arena_layout import align_up, memref_bytes
from tessc.runtime.abi import ALIGNMENT, HUGE_PAGE

Layout = tuple[list[tuple[MemRefType, int]], int]
"""A kernel's scratch: each used buffer's type and byte offset in the region (in argument
order), and the region's size."""


def scratch_allocs(kernel: func.FuncOp) -> list[memref.AllocOp]:
    """The kernel's hoistable allocs: entry block, static shape, never deallocated."""
    found: list[memref.AllocOp] = []
    for op in kernel.body.block.ops:
        if not isinstance(op, memref.AllocOp) or op.dynamic_sizes or op.symbol_operands:
            continue
        typ = op.memref.type
        if not isinstance(typ, MemRefType) or any(d < 0 for d in typ.get_shape()):
            continue
        if any(isinstance(use.operation, memref.DeallocOp) for use in op.memref.uses):
            continue
        found.append(op)
    return found


def scratch_layout(types: list[MemRefType]) -> Layout:
    """Offsets for buffers of `types`: those of `HUGE_PAGE` bytes or more first, each at a
    multiple of `HUGE_PAGE`, then the others, 64-byte aligned."""
    offsets = [0] * len(types)
    nbytes = [memref_bytes(typ) or 0 for typ in types]  # static shapes (`scratch_allocs`)
    size = 0
    for k in sorted(range(len(types)), key=lambda k: nbytes[k] < HUGE_PAGE):
        large = nbytes[k] >= HUGE_PAGE
        offsets[k] = align_up(size, HUGE_PAGE if large else ALIGNMENT)
        size = offsets[k] + align_up(nbytes[k])
    return list(zip(types, offsets, strict=True)), size


def _append_arguments(kernel: func.FuncOp, allocs: list[memref.AllocOp]) -> None:
    """Each used alloc of `kernel` becomes a new trailing argument; unused ones go."""
    block = kernel.body.block
    for alloc in allocs:
        if alloc.memref.uses:
            arg = block.insert_arg(alloc.memref.type, len(block.args))
            arg.name_hint = alloc.memref.name_hint
            alloc.memref.replace_all_uses_with(arg)
        Rewriter.erase_op(alloc)
    kernel.properties["function_type"] = FunctionType.from_lists(
        [arg.type for arg in block.args], list(kernel.function_type.outputs.data)
    )
    if kernel.arg_attrs is not None:
        extra = len(block.args) - len(kernel.arg_attrs.data)
        kernel.properties["arg_attrs"] = ArrayAttr(
            [*kernel.arg_attrs.data, *[DictionaryAttr({})] * extra]
        )


def _workspace(host: func.FuncOp) -> int | None:
    """The index of `host`'s workspace argument (its last, flagged), if it has one."""
    count = len(host.body.block.args)
    if count == 0 or not contract.WORKSPACE.has_arg(host, count - 1):
        return None
    return count - 1


@dataclass(frozen=True)
class TessHoistScratchPass(ModulePass):
    """Kernels' fixed scratch into their hosts' workspaces; see the module docstring."""

    name = "tess-hoist-scratch"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        called = called_functions(op)
        hosts = {
            name: f
            for name, f in functions.items()
            if f.body.blocks and not contract.KERNEL.has(f) and name not in called
        }
        callers: dict[str, set[str]] = {}
        for name, f in functions.items():
            for call in f.walk():
                if isinstance(call, func.CallOp):
                    callers.setdefault(call.callee.root_reference.data, set()).add(name)
        layouts: dict[str, Layout] = {}
        for name, kernel in functions.items():
            if not contract.KERNEL.has(kernel) or not kernel.body.blocks:
                continue
            if not callers.get(name) or not callers[name] <= set(hosts):
                continue
            allocs = scratch_allocs(kernel)
            if not any(a.memref.uses for a in allocs):
                continue
            used = [a.memref.type for a in allocs if a.memref.uses]
            _append_arguments(kernel, allocs)
            layouts[name] = scratch_layout(used)  # type: ignore[arg-type]
        for host in hosts.values():
            self.rewrite_host(host, layouts)

    def rewrite_host(self, host: func.FuncOp, layouts: dict[str, Layout]) -> None:
        calls = [
            c
            for c in host.walk()
            if isinstance(c, func.CallOp) and c.callee.root_reference.data in layouts
        ]
        if not calls:
            return
        used = [layouts[c.callee.root_reference.data] for c in calls]
        region = max(size for _, size in used)
        large = any(
            (memref_bytes(typ) or 0) >= HUGE_PAGE for buffers, _ in used for typ, _ in buffers
        )
        index = _workspace(host)
        if index is None:  # nothing planned: the workspace is the scratch alone
            base = 0
            workspace = add_workspace_argument(host, region)
        else:
            planned = contract.WORKSPACE_BYTES.get(host) or 0
            base = align_up(planned, HUGE_PAGE if large else ALIGNMENT)
            old = host.body.block.args[index]
            workspace = Rewriter.replace_value_with_new_type(old, MemRefType(i8, [base + region]))
            host.properties["function_type"] = FunctionType.from_lists(
                [arg.type for arg in host.body.block.args], list(host.function_type.outputs.data)
            )
            contract.WORKSPACE_BYTES.set(host, base + region)
        for call in calls:
            views: list[memref.ViewOp] = []
            for typ, offset in layouts[call.callee.root_reference.data][0]:
                shift = arith.ConstantOp(IntegerAttr(base + offset, IndexType()))
                view = memref.ViewOp(workspace, shift, [], typ)
                Rewriter.insert_op([shift, view], InsertPoint.before(call))
                views.append(view)
            new_call = func.CallOp(
                call.callee, [*call.arguments, *(v.results[0] for v in views)], call.result_types
            )
            new_call.attributes.update(call.attributes)
            Rewriter.replace_op(call, new_call)


__all__ = ["TessHoistScratchPass", "scratch_allocs", "scratch_layout"]
