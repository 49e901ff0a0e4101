"""
`tess-outline-kernels`: every linalg op or `kernel.group` of a host becomes a kernel
function (level 4 -> level 5, first half).

The k-th linalg op (on memrefs) or `kernel.group` of host `@h` moves into
`func.func private @h_kernel_<k>(...) attributes {tess.kernel}`, right after the host,
and is replaced by a `func.call`. Its arguments are the values it uses from the host, in
first-use order; captured constants are cloned in. A group becomes ONE kernel, its ops in
order, for `tess-linalg-to-loops` to share their outer loop. Afterwards a host holds only
buffer management, calls, constants and `func.return`. Names are deterministic. xDSL's
outlining works on `gpu.launch`/`scf.parallel`, not on linalg ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.kernel import GroupOp
from tessc.dialects.locations import stamp_location


def is_kernel(function: func.FuncOp) -> bool:
    return contract.KERNEL.has(function)


def captured_values(op: Operation) -> list[SSAValue]:
    """Values defined outside `op` that ops nested in `op`'s regions use, in use order."""
    captured: list[SSAValue] = []
    for nested in op.walk():
        if nested is op:
            continue
        for operand in nested.operands:
            owner = operand.owner
            defining_op = owner if isinstance(owner, Operation) else owner.parent_op()
            if defining_op is None or not op.is_ancestor(defining_op):
                if operand not in captured:
                    captured.append(operand)
    return captured


def clonable_constant(value: SSAValue) -> bool:
    return isinstance(value.owner, arith.ConstantOp)


def outline(op: Operation, host: func.FuncOp, kernel_name: str) -> func.FuncOp:
    """Move `op` into a new private kernel function and call it in its place."""
    if any(isinstance(v.type, TensorType) for v in (*op.operands, *op.results)):
        raise PassFailedException(
            f"tess-outline-kernels expects linalg ops on memrefs (run tess-bufferize "
            f"first), got '{op.name}' on tensors in @{host.sym_name.data}"
        )
    location = op.location
    captured = captured_values(op)
    arguments: list[SSAValue] = []
    for value in (*op.operands, *captured):
        if value not in arguments and not clonable_constant(value):
            arguments.append(value)

    block = Block(arg_types=[v.type for v in arguments])
    value_map: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(arguments, block.args, strict=True):
        arg.name_hint = value.name_hint
        value_map[value] = arg
    for value in captured:
        if clonable_constant(value):
            constant = value.owner
            assert isinstance(constant, Operation)
            clone = constant.clone()
            block.add_op(clone)
            value_map[value] = clone.results[0]
    kernel_op = op.clone(value_map)
    if isinstance(kernel_op, GroupOp):
        for member in kernel_op.members():
            member.detach()
            block.add_op(member)
        block.add_op(func.ReturnOp())
        kernel_op.erase()
    else:
        block.add_op(kernel_op)
        block.add_op(func.ReturnOp(*kernel_op.results))

    call = func.CallOp(kernel_name, arguments, [r.type for r in op.results])
    Rewriter.replace_op(op, call)

    kernel = func.FuncOp(
        kernel_name,
        ([v.type for v in arguments], [r.type for r in op.results]),
        Region(block),
        visibility="private",
    )
    contract.KERNEL.set(kernel)
    stamp_location([kernel], location)  # the kernel, its return and cloned constants
    return kernel


def outline_host(host: func.FuncOp, module: ModuleOp) -> list[func.FuncOp]:
    host_name = host.sym_name.data
    linalg_ops = [
        op
        for op in host.body.walk()
        if isinstance(op, GroupOp)
        or (isinstance(op, LinalgStructuredOperation) and not isinstance(op.parent_op(), GroupOp))
    ]
    for op in linalg_ops:  # all checked before any moves (a nested op would move too)
        parent = op.parent_op()
        if parent is not host:
            message = (
                f"tess-outline-kernels expects linalg ops at the top level of "
                f"@{host_name}, found '{op.name}' nested in '{parent.name if parent else '?'}'"
            )
            op.emit_error(message, PassFailedException(message))  # located at `op`
    kernels: list[func.FuncOp] = []
    for op in linalg_ops:
        name = f"{host_name}_kernel_{len(kernels)}"
        if SymbolTable.lookup_symbol(module, name) is not None:
            raise PassFailedException(f"tess-outline-kernels: symbol @{name} already exists")
        kernels.append(outline(op, host, name))
    return kernels


@dataclass(frozen=True)
class TessOutlineKernelsPass(ModulePass):
    """Move each linalg op and `kernel.group` of each host into a `tess.kernel` function."""

    name = "tess-outline-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hosts = [
            f
            for f in op.body.block.ops
            if isinstance(f, func.FuncOp) and not f.is_declaration and not is_kernel(f)
        ]
        for host in hosts:
            kernels = outline_host(host, op)
            Rewriter.insert_op(kernels, InsertPoint.after(host))


__all__ = ["TessOutlineKernelsPass", "is_kernel"]
