"""
`tess-gpu-horizontal`: launches that do not depend on each other run as ONE launch (level
5g -> 5g), the GPU counterpart of `tess-fuse-horizontal`'s groups.

In each run of a host's launches (only index constants, workspace views, reshapes and
allocs between them), a launch depends on an earlier one when one of them writes memory
the other touches (`gpu_overlap`). Launches are placed in program order, each in the first
group after every launch it depends on whose block it fits: the same thread count, or
fewer threads and no barrier (its extra threads skip it). A group of several becomes one
`gpu.func`: grid x is the members' blocks one after the other, and a block runs its
member's body under `scf.if` on the block index (uniform in the block: the member's
barriers stay uniform), its thread, block and grid ids recomputed from the merged ones
(a grid-stride member runs its launch's grid x). A launch of one block that depends on a
group of one block runs after it in that block, a barrier between. Groups launch in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, SymbolRefAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import SymbolTable

from tessc.dialects import contract
from tessc.dialects.gpu_func import GpuFuncOp
from tessc.dialects.gpu_memory import is_workgroup
from tessc.lowering.gpu.gpu_common import (
    KERNELS_MODULE,
    MAX_GRID_X,
    Body,
    Constants,
    constant_index,
    kernels_module,
)
from tessc.lowering.gpu.gpu_overlap import disjoint

SHARED_BYTES = 48 * 1024
"""Static shared memory a block may declare: a group's members' workgroup buffers together."""

_BETWEEN_LAUNCHES = (
    arith.ConstantOp,
    memref.ViewOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.AllocOp,
)
_HARDWARE = (gpu.ThreadIdOp, gpu.BlockIdOp, gpu.BlockDimOp, gpu.GridDimOp)
_DIMS = {gpu.DimensionEnum.X: 0, gpu.DimensionEnum.Y: 1, gpu.DimensionEnum.Z: 2}


@dataclass
class Member:
    """One launch and the kernel it runs."""

    launch: gpu.LaunchFuncOp
    kernel: GpuFuncOp
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    written: list[SSAValue]  # the launch's operands the kernel stores to
    after_barrier: bool = False  # runs after the group's members before it (one block)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    @property
    def has_barrier(self) -> bool:
        return any(isinstance(op, gpu.BarrierOp) for op in self.kernel.walk())

    @property
    def shared_bytes(self) -> int:
        return sum(
            math.prod(arg.type.get_shape()) * arg.type.element_type.bitwidth // 8  # type: ignore[attr-defined]
            for arg in self.kernel.body.block.args
            if isinstance(arg.type, MemRefType) and is_workgroup(arg.type)
        )


def member_of(launch: gpu.LaunchFuncOp, module: ModuleOp) -> Member | None:
    """The launch as a `Member`, or None when its sizes are not constants."""
    sizes = [
        constant_index(v)
        for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)
        + (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)
    ]
    if None in sizes or 0 in sizes or launch.dynamicSharedMemorySize is not None:
        return None
    kernel = SymbolTable.lookup_symbol(module, launch.kernel)
    if not isinstance(kernel, GpuFuncOp) or len(kernel.body.blocks) != 1:
        return None
    args = kernel.body.block.args
    written = [
        operand
        for operand, arg in zip(launch.kernelOperands, args, strict=False)
        if any(not isinstance(use.operation, memref.LoadOp) for use in arg.uses)
    ]
    grid, block = tuple(sizes[:3]), tuple(sizes[3:])
    return Member(launch, kernel, grid, block, written)  # type: ignore[arg-type]


def may_overlap(a: SSAValue, b: SSAValue) -> bool:
    if a is b:
        return True
    if isinstance(a.owner, memref.AllocOp) or isinstance(b.owner, memref.AllocOp):
        return False  # a fresh buffer, and the other value is not it
    return not disjoint([a, b])


def depends(later: Member, earlier: Member) -> bool:
    """Whether one of the two writes memory the other touches."""
    return any(
        (x in later.written or y in earlier.written) and may_overlap(x, y)
        for x in later.launch.kernelOperands
        for y in earlier.launch.kernelOperands
    )


def fits(group: Sequence[Member], member: Member) -> bool:
    """Whether `member` can join `group` (module docstring)."""
    if any(m.after_barrier for m in group):
        return False
    return block_fits([*group, member]) and grid_blocks([*group, member]) <= MAX_GRID_X


def block_fits(members: Sequence[Member]) -> bool:
    threads = max(m.threads for m in members)
    return all(m.threads == threads or not m.has_barrier for m in members) and (
        sum(m.shared_bytes for m in members) <= SHARED_BYTES
    )


def chains(group: Sequence[Member], member: Member) -> bool:
    """Whether `member`, which reads or writes what `group` does, can run after it in the
    same launch: everything is one block, where a barrier orders them."""
    return grid_blocks(group) == 1 and member.blocks == 1 and block_fits([*group, member])


def schedule(members: Sequence[Member]) -> list[list[Member]]:
    """The launches as groups, in launch order (module docstring)."""
    groups: list[list[Member]] = []
    for member in members:
        earliest = 0
        for position, group in enumerate(groups):
            if any(depends(member, other) for other in group):
                earliest = position + 1
        target = next((p for p in range(earliest, len(groups)) if fits(groups[p], member)), None)
        if target is None and earliest == len(groups) and groups and chains(groups[-1], member):
            member.after_barrier = True
            groups[-1].append(member)
        elif target is None:
            groups.insert(earliest, [member])
        else:
            groups[target].append(member)
    return groups


def merged_kernel(group: Sequence[Member], name: str) -> tuple[GpuFuncOp, list[SSAValue]]:
    """One `gpu.func` running every member's blocks (module docstring), and its operands."""
    operands: list[SSAValue] = []
    for member in group:
        operands.extend(v for v in member.launch.kernelOperands if v not in operands)
    shared = [
        arg.type for m in group for arg in m.kernel.body.block.args[len(m.launch.kernelOperands) :]
    ]
    block = Block(arg_types=[*(v.type for v in operands), *shared])
    constants = Constants()
    b = Body(block, constants)
    widest = max(group, key=lambda m: m.threads)
    ids = [b.thread_id(d) for d in "xyz"]
    linear = b.add(ids[0], b.mul(ids[1], b.c(widest.block[0])))
    linear = b.add(linear, b.mul(ids[2], b.c(widest.block[0] * widest.block[1])))
    block_id = b.block_id("x")
    first_block = grid = 0
    next_shared = len(operands)
    for member in group:
        if member.after_barrier:
            b.barrier()  # the block's global writes so far are visible to all its threads
            first_block = 0
        args = member.kernel.body.block.args
        values: dict[SSAValue, SSAValue] = {
            arg: block.args[operands.index(v)]
            for arg, v in zip(args, member.launch.kernelOperands, strict=False)
        }
        for arg in args[len(member.launch.kernelOperands) :]:
            values[arg] = block.args[next_shared]
            next_shared += 1
        mine = b.cmp(block_id, b.c(first_block + member.blocks), "ult")
        if first_block:
            mine = b.andi(b.cmp(block_id, b.c(first_block), "uge"), mine)
        if member.threads < widest.threads:
            mine = b.andi(mine, b.cmp(linear, b.c(member.threads), "ult"))

        def run(bm: Body, member: Member = member, first: int = first_block, values=values):
            inline_member(bm, member, first, values, block_id, ids, linear, widest)
            return ()

        b.when(mine, run)
        first_block += member.blocks
        grid = max(grid, first_block)
    block.add_op(gpu.ReturnOp([]))
    for op in reversed(constants.ops):
        assert block.first_op is not None
        block.insert_op_before(op, block.first_op)
    kernel = GpuFuncOp(
        name,
        ([v.type for v in operands], []),
        Region(block),
        kernel=True,
        known_block_size=widest.block,
        known_grid_size=(grid, 1, 1),
        workgroup_attributions=len(shared),
    )
    # The merge adds only thread/block ids, constants and `block_id - first` under
    # `block_id >= first`: non-negative when every member's indices are.
    if all(contract.UNSIGNED_INDICES.has(m.kernel) for m in group):
        contract.UNSIGNED_INDICES.set(kernel)
    return kernel, operands


def inline_member(
    b: Body,
    member: Member,
    first_block: int,
    values: dict[SSAValue, SSAValue],
    block_id: SSAValue,
    ids: Sequence[SSAValue],
    linear: SSAValue,
    widest: Member,
) -> None:
    """`member`'s body at `b`, its hardware ids those of its own launch."""
    if member.block == widest.block:
        threads = list(ids)
    elif member.block[1:] == (1, 1):  # `linear` is below the member's threads
        threads = [linear, b.c(0), b.c(0)]
    else:
        threads = b.delinearize(linear, list(reversed(member.block)))[::-1]
    own_block = b.sub(block_id, b.c(first_block))
    blocks = b.delinearize(own_block, list(reversed(member.grid)))[::-1]
    hardware = {
        gpu.ThreadIdOp: threads,
        gpu.BlockIdOp: blocks,
        gpu.BlockDimOp: [b.c(n) for n in member.block],
        gpu.GridDimOp: [b.c(n) for n in member.grid],
    }
    cloned: list[Operation] = []
    for op in member.kernel.body.block.ops:
        if isinstance(op, arith.ConstantOp):
            b.constants.adopt(op, values)
        elif not isinstance(op, gpu.ReturnOp):
            cloned.append(b.add_op(op.clone(values)))
    for op in [inner for top in cloned for inner in top.walk()]:
        if isinstance(op, _HARDWARE):
            new = hardware[type(op)][_DIMS[op.dimension.data]]  # type: ignore[attr-defined]
            op.results[0].replace_all_uses_with(new)
            Rewriter.erase_op(op)


def merge_run(host: func.FuncOp, run: Sequence[Operation], module: ModuleOp) -> set[str]:
    """Reorder `run` (a host's ops between two others): its other ops first, then the
    launches by group, each group of several one launch of a merged kernel. The names of
    the kernels merged."""
    members = [member_of(op, module) for op in run if isinstance(op, gpu.LaunchFuncOp)]
    if len(members) < 2 or None in members:
        return set()
    groups = schedule(members)  # type: ignore[arg-type]
    if len(groups) == len(members):
        return set()
    merged: set[str] = set()
    after = run[-1]
    anchor = after.next_op
    block = host.body.block
    others = [op for op in run if not isinstance(op, gpu.LaunchFuncOp)]
    for op in others:
        op.detach()
    kernels = kernels_module(module)
    new_ops: list[Operation] = list(others)
    for group in groups:
        if len(group) == 1:
            group[0].launch.detach()
            new_ops.append(group[0].launch)
            continue
        name = unique_name(kernels, f"{group[0].kernel.sym_name.data}_side_by_side")
        kernel, operands = merged_kernel(group, name)
        kernels.body.block.add_op(kernel)
        widest = max(group, key=lambda m: m.threads)
        sizes = [
            arith.ConstantOp(IntegerAttr.from_index_int_value(n))
            for n in (grid_blocks(group), 1, *widest.block)
        ]
        new_ops.extend(sizes)
        one = sizes[1].result
        new_ops.append(
            gpu.LaunchFuncOp(
                SymbolRefAttr(KERNELS_MODULE, [name]),
                [sizes[0].result, one, one],
                [s.result for s in sizes[2:]],
                None,
                operands,
            )
        )
        for member in group:
            merged.add(member.kernel.sym_name.data)
            Rewriter.erase_op(member.launch)
    for op in new_ops:
        if anchor is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, anchor)
    return merged


def grid_blocks(group: Sequence[Member]) -> int:
    """The merged launch's grid x: the most blocks a stage of the group runs."""
    stages: list[int] = [0]
    for member in group:
        if member.after_barrier:
            stages.append(0)
        stages[-1] += member.blocks
    return max(stages)


def unique_name(kernels: gpu.ModuleOp, stem: str) -> str:
    taken = {op.sym_name.data for op in kernels.body.block.ops if isinstance(op, GpuFuncOp)}
    name, k = stem, 1
    while name in taken:
        name, k = f"{stem}_{k}", k + 1
    return name


def runs(host: func.FuncOp) -> list[list[Operation]]:
    """The host's maximal runs of launches and the ops that may move between them."""
    found: list[list[Operation]] = [[]]
    for op in host.body.block.ops:
        if isinstance(op, (gpu.LaunchFuncOp, *_BETWEEN_LAUNCHES)):
            found[-1].append(op)
        elif found[-1]:
            found.append([])
    return [run for run in found if run]


@dataclass(frozen=True)
class TessGpuHorizontalPass(ModulePass):
    """Run independent launches of a host as one launch (module docstring)."""

    name = "tess-gpu-horizontal"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hosts = [f for f in op.body.block.ops if isinstance(f, func.FuncOp) and f.body.blocks]
        merged: set[str] = set()
        for host in hosts:
            for run in runs(host):
                merged |= merge_run(host, run, op)
        launched = {
            launch.kernel.nested_references.data[-1].data
            for launch in op.walk()
            if isinstance(launch, gpu.LaunchFuncOp)
        }
        for kernel in list(kernels_module(op).body.block.ops):
            if isinstance(kernel, GpuFuncOp) and kernel.sym_name.data in merged - launched:
                Rewriter.erase_op(kernel)
        op.verify()


__all__ = ["TessGpuHorizontalPass"]
