"""
`tess-gpu-partition`: split outlined kernels into what ONE GPU launch can run.

Level 5 (outlined kernels, linalg on memrefs) -> the same, each `tess.kernel` function
marked `tess.gpu_shape` (`map`, `reduce` or `rows`), and the module given its (still
empty) `gpu.module @kernels`. A launch's threads only synchronise within a block, so
members that need each other's finished results across blocks become separate launches
(`<kernel>_0`, `<kernel>_1`, ...); first, neighbouring kernels that one launch runs better
join (a fill and its reduction, a mean's divide). The rules are in lowering/gpu/README.md.
The GPU counterpart of `tess-linalg-to-loops`' nest fusion; xDSL's outlining passes work on
`gpu.launch` regions, not on linalg kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import Block, BlockArgument, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from tessc.dialects import contract
from tessc.lowering.gpu.gpu_common import (
    is_reduction,
    kernels_module,
    linalg_ops,
    loop_ranges,
    maps_of,
)
from tessc.lowering.gpu.gpu_overlap import byte_range, disjoint
from tessc.lowering.gpu.gpu_tree import is_row_kernel, row_dim


def is_fill_of(op: LinalgStructuredOperation, buffer: SSAValue) -> bool:
    """Whether `op` only writes a constant into all of `buffer`."""
    if is_reduction(op) or op.inputs or len(op.outputs) != 1 or op.outputs[0] != buffer:
        return False
    terminator = op.body.block.last_op
    assert terminator is not None
    value = terminator.operands[0]
    return isinstance(value.owner, arith.ConstantOp) and is_identity(maps_of(op)[0])


def is_identity(affine_map: AffineMap) -> bool:
    return affine_map == AffineMap.identity(affine_map.num_dims)


def accesses(op: LinalgStructuredOperation) -> list[tuple[SSAValue, AffineMap, bool]]:
    """(buffer, map, writes) per memref operand."""
    num_inputs = len(op.inputs)
    return [
        (operand, affine_map, k >= num_inputs)
        for k, (operand, affine_map) in enumerate(zip(op.operands, maps_of(op), strict=True))
        if hasattr(operand.type, "get_shape")
    ]


@dataclass
class LaunchGroup:
    shape: str  # "map", "reduce" or "rows" (`merge_row_runs`)
    ops: list[LinalgStructuredOperation] = field(default_factory=list[LinalgStructuredOperation])

    @property
    def reduction(self) -> LinalgStructuredOperation | None:
        return next((op for op in self.ops if is_reduction(op)), None)

    @property
    def elementwise(self) -> list[LinalgStructuredOperation]:
        """The ops every thread runs per element: all of a map launch, a reduce launch's
        epilogue."""
        if self.shape == "map":
            return self.ops
        reduction = self.reduction
        return self.ops[self.ops.index(reduction) + 1 :] if reduction else []

    def accepts(self, op: LinalgStructuredOperation) -> bool:
        if is_reduction(op):
            return False
        members = [*self.elementwise, op]
        reduction = self.reduction
        if self.shape == "reduce":
            assert reduction is not None
            out_map = maps_of(reduction)[-1]
            if not all(isinstance(e, AffineDimExpr | AffineConstantExpr) for e in out_map.results):
                return False
            domain = tuple(reduction.outputs[0].type.get_shape())  # type: ignore[attr-defined]
            if len(reduction.outputs) != 1 or loop_ranges(op) != domain:
                return False
            reads = set(reduction.inputs)
            if any(w and buffer in reads for buffer, _, w in accesses(op)):
                return False
            written = {reduction.outputs[0]}
        else:
            if loop_ranges(op) != loop_ranges(self.ops[0]):
                return False
            written = set()
        for member in members:
            written.update(buffer for buffer, _, w in accesses(member) if w)
        seen: dict[SSAValue, AffineMap] = {}
        for member in members:
            for buffer, affine_map, _ in accesses(member):
                if buffer not in written:
                    continue
                if self.shape == "reduce" and not is_identity(affine_map):
                    return False
                if seen.setdefault(buffer, affine_map) != affine_map:
                    return False
        return True


def partition(ops: Sequence[LinalgStructuredOperation]) -> list[LaunchGroup]:
    """The kernel's ops as launches (module docstring)."""
    groups: list[LaunchGroup] = []
    for op in ops:
        current = groups[-1] if groups else None
        if is_reduction(op):
            group = LaunchGroup("reduce")
            if (
                current is not None
                and current.shape == "map"
                and len(op.outputs) == 1
                and is_fill_of(current.ops[-1], op.outputs[0])
            ):
                group.ops.append(current.ops.pop())
                if not current.ops:
                    groups.pop()
            group.ops.append(op)
            groups.append(group)
        elif current is not None and current.accepts(op):
            current.ops.append(op)
        else:
            groups.append(LaunchGroup("map", [op]))
    return groups


def row_runnable(ops: Sequence[LinalgStructuredOperation]) -> bool:
    """`is_row_kernel`, for ops none of which loads memory in its body (a gather's
    `memref.load` at a computed row is no indexing map `is_row_kernel` could check)."""
    return is_row_kernel(ops) and not any(
        isinstance(operand.type, MemRefType)
        for op in ops
        for inner in op.body.walk()
        for operand in inner.operands
    )


def merge_row_runs(groups: Sequence[LaunchGroup]) -> list[LaunchGroup]:
    """`groups` with each longest run of two or more consecutive launches that one block per
    row runs together (`is_row_kernel`) as one `rows` launch: the softmax after a matmul,
    split by its reductions, is one launch, as it is when it is a kernel of its own."""
    merged: list[LaunchGroup] = []
    i = 0
    while i < len(groups):
        j = len(groups)
        while j > i + 1 and not row_runnable([op for g in groups[i:j] for op in g.ops]):
            j -= 1
        if j > i + 1:
            merged.append(LaunchGroup("rows", [op for g in groups[i:j] for op in g.ops]))
        else:
            merged.append(groups[i])
        i = j if j > i + 1 else i + 1
    return merged


def split_kernel(kernel: func.FuncOp, groups: list[LaunchGroup], module: ModuleOp) -> None:
    """Make one kernel function per group (module docstring) and call them in order."""
    name = kernel.sym_name.data
    if len(groups) == 1:
        contract.GPU_SHAPE.set(kernel, groups[0].shape)
        return
    if is_row_kernel(linalg_ops(kernel)):
        contract.GPU_SHAPE.set(kernel, "rows")  # one launch after all: a block per row
        return
    groups = merge_row_runs(groups)
    constants = [op for op in kernel.body.block.ops if isinstance(op, arith.ConstantOp)]
    parts: list[func.FuncOp] = []
    for j, group in enumerate(groups):
        block = Block(arg_types=kernel.body.block.arg_types)
        values: dict[SSAValue, SSAValue] = {}
        for old, new in zip(kernel.body.block.args, block.args, strict=True):
            new.name_hint = old.name_hint
            values[old] = new
        for constant in constants:
            block.add_op(constant.clone(values))
        for op in group.ops:
            block.add_op(op.clone(values))
        block.add_op(func.ReturnOp())
        part = func.FuncOp(f"{name}_{j}", kernel.function_type, Region(block), visibility="private")
        contract.KERNEL.copy(kernel, part)
        contract.GPU_SHAPE.set(part, group.shape)
        parts.append(part)
    for call in [op for op in module.walk() if isinstance(op, func.CallOp)]:
        if call.callee.string_value() == name:
            new_calls = [func.CallOp(p.sym_name.data, call.arguments, []) for p in parts]
            Rewriter.replace_op(call, new_calls, [])
    Rewriter.insert_op(parts, InsertPoint.after(kernel))
    Rewriter.erase_op(kernel)


_BETWEEN_CALLS = (arith.ConstantOp, memref.ViewOp, memref.CollapseShapeOp, memref.ExpandShapeOp)


def kernel_called(call: func.CallOp, module: ModuleOp) -> func.FuncOp | None:
    callee = SymbolTable.lookup_symbol(module, call.callee.string_value())
    if isinstance(callee, func.FuncOp) and contract.KERNEL.has(callee):
        return callee
    return None


def joinable(
    first: func.FuncOp, first_call: func.CallOp, second: func.FuncOp, second_call: func.CallOp
) -> bool:
    """Whether two kernels called one after the other join (module docstring)."""
    ops1, ops2 = linalg_ops(first), linalg_ops(second)
    if not ops1 or not ops2:
        return False

    def host_value(kernel: func.FuncOp, call: func.CallOp, value: SSAValue) -> SSAValue | None:
        args = list(kernel.body.block.args)
        return call.arguments[args.index(value)] if value in args else None

    if len(ops1) == 1 and not is_reduction(ops1[0]) and len(ops1[0].outputs) == 1:
        fill = ops1[0]
        reduction = ops2[0]
        filled = host_value(first, first_call, fill.outputs[0])
        return (
            is_reduction(reduction)
            and len(reduction.outputs) == 1
            and is_fill_of(fill, fill.outputs[0])
            and filled is not None
            and filled == host_value(second, second_call, reduction.outputs[0])
        )
    reductions = [op for op in ops1 if is_reduction(op)]
    if not reductions or len(reductions[-1].outputs) != 1 or any(map(is_reduction, ops2)):
        return False
    reduced = host_value(first, first_call, reductions[-1].outputs[0])
    written = {host_value(second, second_call, v) for op in ops2 for v in op.outputs}
    return reduced is not None and written == {reduced}


def joined_function(
    first: func.FuncOp, first_call: func.CallOp, second: func.FuncOp, second_call: func.CallOp
) -> tuple[func.FuncOp, list[SSAValue]]:
    """One kernel running `first`'s ops, then `second`'s, and the host values it takes
    (one argument for host values that are the same memory: two views of one window)."""
    operands: list[SSAValue] = []
    position: dict[object, int] = {}
    for value in (*first_call.arguments, *second_call.arguments):
        key = same_memory_key(value)
        if key not in position:
            position[key] = len(operands)
            operands.append(value)
    block = Block(arg_types=[v.type for v in operands])
    for kernel, call in ((first, first_call), (second, second_call)):
        values: dict[SSAValue, SSAValue] = {}
        for old, value in zip(kernel.body.block.args, call.arguments, strict=True):
            new = block.args[position[same_memory_key(value)]]
            new.name_hint = new.name_hint or old.name_hint
            values[old] = new
        for op in kernel.body.block.ops:
            if not isinstance(op, func.ReturnOp):
                block.add_op(op.clone(values))
    block.add_op(func.ReturnOp())
    joined = func.FuncOp(
        first.sym_name.data, ([v.type for v in operands], []), Region(block), visibility="private"
    )
    contract.KERNEL.copy(first, joined)
    return joined, operands


def same_memory_key(value: SSAValue) -> object:
    """`value`, or for a window of the workspace (a `memref.view`, perhaps reshaped) its
    (buffer, start, end, type): two SSA values with one key are the same array."""
    window = byte_range(value)
    if window is None or isinstance(value, BlockArgument):
        return value
    return (*window, value.type)


def join(
    first: func.FuncOp,
    first_call: func.CallOp,
    second: func.FuncOp,
    second_call: func.CallOp,
    built: tuple[func.FuncOp, list[SSAValue]] | None = None,
    at_first: bool = False,
) -> func.CallOp:
    """One kernel running `first`'s ops, then `second`'s, called where `second` was (or,
    `at_first`, where `first` was)."""
    joined, operands = built or joined_function(first, first_call, second, second_call)
    call = func.CallOp(joined.sym_name.data, operands, [])
    if at_first:
        Rewriter.replace_op(first_call, call)
        Rewriter.erase_op(second_call)
    else:
        Rewriter.replace_op(second_call, call)
        Rewriter.erase_op(first_call)
    Rewriter.insert_op(joined, InsertPoint.after(first))
    Rewriter.erase_op(first)
    Rewriter.erase_op(second)
    return call


def row_join(
    first: func.FuncOp, first_call: func.CallOp, second: func.FuncOp, second_call: func.CallOp
) -> tuple[func.FuncOp, list[SSAValue]] | None:
    """The joined kernel, when one block per row runs both kernels' ops (two row-wise steps
    of a softmax gradient) on buffers that do not overlap; else None."""
    built = joined_function(first, first_call, second, second_call)
    ops = linalg_ops(built[0])
    if row_runnable(ops) and disjoint(built[1]) and all(map(reads_rows_contiguously, ops)):
        return built
    return None


def reads_rows_contiguously(op: LinalgStructuredOperation) -> bool:
    """Whether a reduction's largest input does not have the row as its innermost dim: a
    block per row then reads consecutive addresses. (A column sum, run as rows, would read
    with a stride; alone it is `tess-gpu-reduce`'s coalesced column variant.)"""
    if not is_reduction(op):
        return True
    written = {v for v in op.outputs}
    row = row_dim(op, written)
    inputs = [
        (operand.type.get_shape(), affine_map)
        for operand, affine_map in zip(op.inputs, maps_of(op), strict=False)
        if isinstance(operand.type, MemRefType) and operand.type.get_shape()
    ]
    if not inputs:
        return True
    shape, affine_map = max(inputs, key=lambda pair: math.prod(pair[0]))
    for expr, extent in reversed(list(zip(affine_map.results, shape, strict=True))):
        if extent != 1:
            return not (isinstance(expr, AffineDimExpr) and expr.position == row)
    return True


def join_kernels(host: func.FuncOp, module: ModuleOp) -> None:
    """Join neighbouring kernel calls of `host` (module docstring)."""
    previous: func.CallOp | None = None
    for op in list(host.body.block.ops):
        if isinstance(op, _BETWEEN_CALLS):
            continue
        if not isinstance(op, func.CallOp) or (second := kernel_called(op, module)) is None:
            previous = None
            continue
        first = kernel_called(previous, module) if previous is not None else None
        if previous is None or first is None:
            previous = op
        elif joinable(first, previous, second, op):
            previous = join(first, previous, second, op)
        elif (rows := row_join(first, previous, second, op)) is not None:
            previous = join(first, previous, second, op, rows)
        else:
            previous = op


def separate(a: Sequence[SSAValue], b: Sequence[SSAValue]) -> bool:
    """Whether no host value of `a` shares memory with one of `b`."""
    return all(disjoint([x, y]) and x is not y for x in a for y in b)


def join_distant_epilogues(host: func.FuncOp, module: ModuleOp) -> bool:
    """Join one elementwise kernel that only rewrites a reduction kernel's output (a bias
    gradient's update) into that reduction, across the kernel calls between them, when
    none of those touches the memory it uses and its operands exist at the reduction's
    call: it runs there. Whether it joined one."""
    block = host.body.block
    calls = [op for op in block.ops if isinstance(op, func.CallOp) and kernel_called(op, module)]
    for j, second_call in enumerate(calls):
        second = kernel_called(second_call, module)
        assert second is not None
        for first_call in reversed(calls[:j]):
            first = kernel_called(first_call, module)
            assert first is not None
            if joinable(first, first_call, second, second_call):
                defined = all(
                    isinstance(v, BlockArgument)
                    or (v.owner.parent is block and block.get_operation_index(v.owner)
                        < block.get_operation_index(first_call))
                    for v in second_call.arguments
                )  # fmt: skip
                start = block.get_operation_index(first_call)
                between = list(block.ops)[start + 1 : block.get_operation_index(second_call)]
                plain = all(
                    isinstance(op, _BETWEEN_CALLS) or op in calls for op in between
                )  # no host copy between
                if defined and plain:
                    join(first, first_call, second, second_call, at_first=True)
                    return True
            if not separate(first_call.arguments, second_call.arguments):
                break  # `second` cannot run before this call
    return False


@dataclass(frozen=True)
class TessGpuPartitionPass(ModulePass):
    """Split each outlined kernel into GPU launches and mark each with its shape."""

    name = "tess-gpu-partition"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels_module(op)  # the gpu level always has one, if only empty (no kernels)
        hosts = [
            f
            for f in op.body.block.ops
            if isinstance(f, func.FuncOp) and not contract.KERNEL.has(f) and not f.is_declaration
        ]
        for host in hosts:
            join_kernels(host, op)
            while join_distant_epilogues(host, op):
                pass
        kernels = [
            f
            for f in op.body.block.ops
            if isinstance(f, func.FuncOp) and contract.KERNEL.has(f) and not f.is_declaration
        ]
        for kernel in kernels:
            ops = linalg_ops(kernel)
            if ops:
                split_kernel(kernel, partition(ops), op)
        op.verify()


__all__ = ["LaunchGroup", "TessGpuPartitionPass", "partition"]
