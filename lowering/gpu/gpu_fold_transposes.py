"""
`tess-gpu-fold-transposes`: a kernel that only copies an operand transposed (`w.T` for a
matmul's gradient) is gone; the kernels that read the copy read the operand in place,
through the composed indexing map (level 5 -> 5, before `tess-gpu-partition`).

The tiled matmul stages its operands through workgroup memory along whichever dim is
innermost in memory (`tess-gpu-contract`), so a transposed operand costs it nothing, and
the copy was a launch and a round trip through memory. Taken when the copy's destination
is a window of the host (not an argument nor a result), read afterwards only as linalg
inputs of kernels each called once, before anything else touches that memory, and its
source is not written until the last of those reads. The CPU pipeline reads operands in
place the same way (`tess-pack-matmul`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, FunctionType, ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable

from tessc.dialects import contract
from tessc.lowering.gpu.gpu_common import is_reduction, linalg_ops, maps_of
from tessc.lowering.gpu.gpu_overlap import disjoint
from tessc.lowering.linalg.generic_analysis import copy_permutation


def transposing_copy(kernel: func.FuncOp) -> GenericOp | None:
    """The kernel's one op when it is `out[d] = in[perm(d)]` (nothing else computed)."""
    ops = linalg_ops(kernel)
    if len(ops) != 1 or not isinstance(ops[0], GenericOp) or is_reduction(ops[0]):
        return None
    return ops[0] if copy_permutation(ops[0]) is not None else None


def called_kernel(call: func.CallOp, module: ModuleOp) -> func.FuncOp | None:
    callee = SymbolTable.lookup_symbol(module, call.callee.string_value())
    if isinstance(callee, func.FuncOp) and contract.KERNEL.has(callee):
        return callee
    return None


def calls_of(module: ModuleOp, name: str) -> list[func.CallOp]:
    return [
        op
        for op in module.walk()
        if isinstance(op, func.CallOp) and op.callee.string_value() == name
    ]


def overlaps(a: SSAValue, b: SSAValue) -> bool:
    return a is b or not disjoint([a, b])


def only_read(arg: BlockArgument) -> bool:
    """Whether the kernel uses `arg` only as linalg generic inputs."""
    return all(
        isinstance(use.operation, GenericOp) and use.operation.inputs.count(arg) > 0
        and arg not in use.operation.outputs
        for use in arg.uses
    )  # fmt: skip


def readers(
    host: func.FuncOp, copy: func.CallOp, destination: SSAValue, source: SSAValue, module: ModuleOp
) -> list[func.CallOp] | None:
    """The kernel calls after `copy` that read `destination` until a call writes its memory
    (module docstring), or None when the copy cannot go."""
    found: list[func.CallOp] = []
    source_written = False
    block = host.body.block
    for op in list(block.ops)[block.get_operation_index(copy) + 1 :]:
        if isinstance(op, func.CallOp):
            kernel = called_kernel(op, module)
            if kernel is None or len(calls_of(module, kernel.sym_name.data)) != 1:
                return None
            args = kernel.body.block.args
            touching = [k for k, v in enumerate(op.arguments) if overlaps(v, destination)]
            reads = [k for k in touching if args[k].uses and only_read(args[k])]
            writes = [k for k in touching if not only_read(args[k])]
            if any(op.arguments[k] is not destination for k in reads) or (reads and writes):
                return None  # the copy's memory read through another window, or updated
            if reads and source_written:
                return None
            if reads:
                found.append(op)
            if writes:
                return found  # a later value in the copy's memory: its readers are done
            source_written |= any(
                overlaps(v, source)
                for k, v in enumerate(op.arguments)
                if args[k].uses and not only_read(args[k])
            )
        elif any(operand is destination for operand in op.operands):
            return None
        elif isinstance(op, memref.CopyOp):
            return None
    return found


def read_in_place(
    call: func.CallOp, kernel: func.FuncOp, destination: SSAValue, source: SSAValue,
    in_map: AffineMap,
) -> None:  # fmt: skip
    """`kernel` reads `source` through `in_map` where it read `destination`."""
    args = kernel.body.block.args
    if source in call.arguments:
        new_arg = args[list(call.arguments).index(source)]
    else:
        new_arg = kernel.body.block.insert_arg(source.type, len(args))
        new_arg.name_hint = source.name_hint
        inputs = [*kernel.function_type.inputs.data, source.type]
        kernel.function_type = FunctionType.from_lists(inputs, [])
        Rewriter.replace_op(call, func.CallOp(call.callee, [*call.arguments, source], []))
    old_arg = args[list(call.arguments).index(destination)]
    for use in list(old_arg.uses):
        op = use.operation
        assert isinstance(op, GenericOp)
        maps = maps_of(op)
        maps[use.index] = in_map.compose(maps[use.index])
        op.operands[use.index] = new_arg
        op.properties["indexing_maps"] = ArrayAttr([AffineMapAttr(m) for m in maps])


def fold_one(host: func.FuncOp, module: ModuleOp) -> bool:
    """Fold the first transposing copy of `host` that can go; whether one went."""
    for call in [op for op in host.body.block.ops if isinstance(op, func.CallOp)]:
        kernel = called_kernel(call, module)
        op = transposing_copy(kernel) if kernel is not None else None
        if kernel is None or op is None:
            continue
        args = list(kernel.body.block.args)
        source = call.arguments[args.index(op.inputs[0])]
        destination = call.arguments[args.index(op.outputs[0])]
        if isinstance(destination, BlockArgument):
            continue  # an argument or a result of the host: the copy is wanted
        found = readers(host, call, destination, source, module)
        if not found:
            continue
        in_map = maps_of(op)[0]
        for reader in found:
            reader_kernel = called_kernel(reader, module)
            assert reader_kernel is not None
            read_in_place(reader, reader_kernel, destination, source, in_map)
        Rewriter.erase_op(call)
        if not calls_of(module, kernel.sym_name.data):
            Rewriter.erase_op(kernel)
        return True
    return False


@dataclass(frozen=True)
class TessGpuFoldTransposesPass(ModulePass):
    """Kernels read a transposed operand in place instead of a copy (module docstring)."""

    name = "tess-gpu-fold-transposes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hosts = [
            f
            for f in op.body.block.ops
            if isinstance(f, func.FuncOp) and not contract.KERNEL.has(f) and not f.is_declaration
        ]
        for host in hosts:
            while fold_one(host, op):
                pass
        op.verify()


__all__ = ["TessGpuFoldTransposesPass", "transposing_copy"]
