"""
A CUDA host's member form: separate device arrays read where they lie (issue 24 §3).

As on the CPU (`codegen.numba_members`), an input arena that the host only launches kernels
on, each reading it only at the index of a top-level loop over the whole arena (a
grid-stride `scf.for` in uint64, `tess.unsigned_indices`), is also taken as an int64 table:
entry m member m's device address less its byte offset. The kernel's member form runs that
loop member by member; in member m's range `[lo_m, hi_m)` each thread takes exactly the
indices it takes in the packed loop (its start plus multiples of the stride), reading each
tabled arena through a `carray` at member m's address (`member_pointer`). The host's member
form launches those kernels with the tables instead. The runtime (`runtime.cuda`) fills and
uploads the tables and calls that form instead of copying every member into a pooled device
arena. Under the simulator a kernel runs as Python: `member_pointer` is a ctypes pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import func, gpu, memref, scf
from xdsl.ir import BlockArgument, SSAValue

from tessc.dialects import contract
from tessc.lowering.codegen.numba_function import is_memref_index
from tessc.lowering.codegen.numba_members import table_candidates
from tessc.lowering.loops.index_values import constant_int

KernelKey = tuple[str, str]
"""A kernel by (gpu.module, gpu.func) name."""

SIMULATOR_MEMBER_POINTER = """
if config.ENABLE_CUDASIM:

    def member_pointer(address):  # noqa: F811 - the simulator's stand-in
        return ctypes.c_void_p(int(address))
""".strip()


@dataclass(frozen=True)
class CudaMemberPlan:
    """A host's member form: its input arenas read through tables (`tabled`, by argument
    index), their members' element `bounds`, the kernels launched on them (`kernels`: each
    with the arguments that are tables in its member form) and those kernels' loops run
    member by member (`loops`)."""

    host: func.FuncOp
    tabled: tuple[int, ...]
    bounds: tuple[int, ...]
    kernels: dict[KernelKey, tuple[int, ...]]
    loops: frozenset[scf.ForOp]


@dataclass(frozen=True)
class MemberForm:
    """What an emitter of a member form needs: a kernel's `tabled` arguments (a host's
    tabled inputs), the `loops` it runs member by member, the bounds table's name and the
    members' `count`; a host's `kernels`, launched as their member forms (by name)."""

    tabled: tuple[int, ...]
    loops: frozenset[scf.ForOp] = frozenset()
    bounds_name: str = ""
    count: int = 0
    kernels: dict[KernelKey, str] = field(default_factory=dict)


def launched(op: gpu.LaunchFuncOp) -> KernelKey:
    return (op.kernel.root_reference.data, op.kernel.nested_references.data[-1].data)


def _arena_loop(kernel: gpu.FuncOp, position: int, extent: int) -> list[scf.ForOp] | None:
    """The loops at whose index `kernel`'s argument `position` is read, if it is only read
    at the index of loops over `[.., extent)` in no other loop (under branches at most),
    whose index only indexes memrefs."""
    if not contract.UNSIGNED_INDICES.has(kernel):
        return None  # (the member bounds are emitted as uint64)
    loops: list[scf.ForOp] = []
    for use in kernel.body.block.args[position].uses:
        load = use.operation
        if not isinstance(load, memref.LoadOp) or use.index != 0 or len(load.indices) != 1:
            return None
        iv = load.indices[0]
        loop = iv.owner.parent_op() if isinstance(iv, BlockArgument) else None
        if not isinstance(loop, scf.ForOp) or iv is not loop.body.block.args[0]:
            return None
        outer = loop.parent_op()
        while isinstance(outer, scf.IfOp):  # (a side-by-side kernel's part: under a branch)
            outer = outer.parent_op()
        if outer is not kernel or constant_int(loop.ub) != extent:
            return None
        if loop.iter_args or not all(is_memref_index(u) for u in loop.body.block.args[0].uses):
            return None
        loops.append(loop)
    return loops


def cuda_member_plan(
    host: func.FuncOp, kernels: dict[KernelKey, gpu.FuncOp]
) -> CudaMemberPlan | None:
    """`host`'s member form (module docstring), when it has one; else None."""
    args = host.body.block.args
    tabled: list[int] = []
    bounds: tuple[int, ...] | None = None
    positions: dict[KernelKey, set[int]] = {}
    loops: set[scf.ForOp] = set()
    for h, found in table_candidates(host):
        if bounds is not None and found != bounds:
            continue
        uses = _launch_uses(args[h], kernels, found[-1])
        if uses is None:
            continue
        tabled.append(h)
        bounds = found
        for key, position, kernel_loops in uses:
            positions.setdefault(key, set()).add(position)
            loops.update(kernel_loops)
    if not tabled or bounds is None:
        return None
    tables = {args[h] for h in tabled}
    for op in host.body.block.ops:  # each launch passes a table wherever its kernel takes one
        if isinstance(op, gpu.LaunchFuncOp) and launched(op) in positions:
            operands = list(op.kernelOperands)
            if any(operands[k] not in tables for k in positions[launched(op)]):
                return None
    kernel_tables = {key: tuple(sorted(p)) for key, p in sorted(positions.items())}
    return CudaMemberPlan(host, tuple(tabled), bounds, kernel_tables, frozenset(loops))


def _launch_uses(
    arena: SSAValue, kernels: dict[KernelKey, gpu.FuncOp], extent: int
) -> list[tuple[KernelKey, int, list[scf.ForOp]]] | None:
    """Each (kernel, argument, loops reading it) that host input `arena` is launched as, if
    it is only launched on, and only read in loops `_arena_loop` accepts; else None."""
    found: list[tuple[KernelKey, int, list[scf.ForOp]]] = []
    for use in arena.uses:
        op = use.operation
        if not isinstance(op, gpu.LaunchFuncOp) or launched(op) not in kernels:
            return None
        operands = list(op.kernelOperands)
        for position, operand in enumerate(operands):
            if operand is arena:
                loops = _arena_loop(kernels[launched(op)], position, extent)
                if loops is None:
                    return None
                found.append((launched(op), position, loops))
    return found


def member_loop_lines(
    index: str,
    start: str,
    step: str,
    member: str,
    bounds: tuple[str, str, str],
    tables: dict[str, tuple[str, str]],
) -> list[str]:
    """The head of a grid-stride loop's run over one member (in a loop over `member`):
    its range (`bounds`: the bounds table's name, then the names `lo` and `hi` take), its
    tabled arenas' `carray`s, and `index` set to the first index at or past `lo` that the
    packed loop, from `start` by `step`, takes (the body then runs while `index < hi`)."""
    table_name, lo, hi = bounds
    return [
        f"{lo} = np.uint64({table_name}[{member}])",
        f"{hi} = np.uint64({table_name}[{member} + 1])",
        *(
            f"{arena} = carray(member_pointer({table}[{member}]), "
            f"({table_name}[{member} + 1],), np.{dtype})"
            for arena, (table, dtype) in tables.items()
        ),
        f"{index} = {start}",
        f"if {index} < {lo}:",
        f"    {index} = {lo} + ({step} - ({lo} - {index}) % {step}) % {step}",
    ]


__all__ = [
    "SIMULATOR_MEMBER_POINTER",
    "CudaMemberPlan",
    "KernelKey",
    "MemberForm",
    "cuda_member_plan",
    "launched",
    "member_loop_lines",
]
