"""
Static trip counts and work at the loop level: the optional rewrites (`tess-tile`,
`tess-tile-dot`, `tess-expand-math`) and codegen's choice of a parallel kernel gate
themselves on how often a loop runs (measured by `bench/bench_loop_gates.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.loops.index_values import constant_int

PARALLEL_WORK = 1 << 18
"""Static loop iterations from which codegen runs a kernel in parallel (its default
`parallel_threshold`); below, serially (`static_work`)."""

MMA_WORK_PER_FMA = 0.25
"""What one vector FMA of a `micro.mma` register tile counts as in `static_work`: a
quarter of a loop iteration, so a packed product runs in parallel from 2^20 vector FMAs
(the seed's 256^3). Its two-thread form pays a launch that the 2-core AVX-512 machine
measured at ~110 us idle (W2 on two threads - one, halved: 192^3 and 256^3 alike); a
product serial under ~220 us (224^3 read in place: 0.20 ms) does not win it back.
Counted as nothing, a 384^3 product read in place (no packing loops left to count) ran
serially."""


DYNAMIC_TRIPS = 16
"""What a loop over a `?` dim (N, `dialects/dynamic_dims.py`) counts as in `static_work`:
a small batch (the sizes a generic program serves: a last partial batch, an evaluation
batch). Counted as unbounded, every kernel of the generic MLP step was a parfor, a thread
launch per call; a kernel parallel only from large N would need both forms compiled.
"""


def unit_loop_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The extent of a loop `0 to ub step 1` with a constant `ub`, else None."""
    if constant_int(lb) != 0 or constant_int(step) != 1:
        return None
    return constant_int(ub)


def dynamic_loop_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | SSAValue | None:
    """`unit_loop_bound`, or for a loop `0 to N step 1` over a `?` dim (N a `memref.dim`
    read at the kernel's entry, `dialects/dynamic_dims.py`), N itself: the extent a
    tiling pass bounds its full tiles and remainder loops by at run time."""
    if (extent := unit_loop_bound(lb, ub, step)) is not None:
        return extent
    if constant_int(lb) == 0 and constant_int(step) == 1 and isinstance(ub.owner, memref.DimOp):
        return ub
    return None


def trip_count(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The trip count of a loop `lb to ub step step` with constant bounds, else None."""
    low, high, stride = constant_int(lb), constant_int(ub), constant_int(step)
    if low is None or high is None or stride is None or stride < 1:
        return None
    return max(0, -(-(high - low) // stride))


def trip_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """`trip_count`, or where the upper bound is `min(c, x)` with a constant `c` (an edge
    tile's extent: `tess-pack-matmul`), the count up to `c`: at most that many trips."""
    trips = trip_count(lb, ub, step)
    if trips is not None or not isinstance(owner := ub.owner, arith.MinSIOp | arith.MinUIOp):
        return trips
    bounds = [b for v in owner.operands if (b := trip_count(lb, v, step)) is not None]
    return min(bounds) if bounds else None


def upper_bound(value: SSAValue, depth: int = 8) -> int | None:
    """An upper bound of a non-negative index `value` built from constants by `min`,
    division and multiplication by a constant, and subtraction of a non-negative index
    (an edge tile's rows, `min(8, n - i0)`, strip-mined by `tess-row-dots`: `rows // 8`,
    `rows - 8 * (rows // 8)`); None where there is none."""
    if (known := constant_int(value)) is not None:
        return known
    owner = value.owner
    if isinstance(owner, memref.DimOp):  # a `?` dim, N: counted as a typical batch
        return DYNAMIC_TRIPS
    if depth == 0 or not isinstance(owner, Operation):
        return None
    if isinstance(owner, arith.MinSIOp | arith.MinUIOp):
        bounds = [b for v in owner.operands if (b := upper_bound(v, depth - 1)) is not None]
        return min(bounds) if bounds else None
    if isinstance(owner, arith.DivSIOp | arith.DivUIOp | arith.FloorDivSIOp):
        divisor = constant_int(owner.rhs)
        bound = upper_bound(owner.lhs, depth - 1)
        return bound // divisor if bound is not None and divisor and divisor > 0 else None
    if isinstance(owner, arith.MuliOp):
        factors = [upper_bound(v, depth - 1) for v in owner.operands]
        return factors[0] * factors[1] if None not in factors else None  # type: ignore[operator]
    if isinstance(owner, arith.SubiOp):  # index arithmetic: the subtrahend is >= 0
        return upper_bound(owner.lhs, depth - 1)
    if isinstance(owner, arith.AddiOp) and _reads_dynamic_size(value):
        # a tile count over a `?` dim: (N + mc - 1) // mc, (min(mc, N - i0) + 7) // 8
        # (static nests keep the bounds, and so the serial/parallel choice, they had)
        terms = [upper_bound(v, depth - 1) for v in owner.operands]
        return terms[0] + terms[1] if None not in terms else None  # type: ignore[operator]
    return None


def _reads_dynamic_size(value: SSAValue, depth: int = 8) -> bool:
    """Whether the index `value` is computed from a `?` dim's N (a `memref.dim`)."""
    owner = value.owner
    if isinstance(owner, memref.DimOp):
        return True
    if depth == 0 or not isinstance(owner, arith.AddiOp | arith.SubiOp | arith.MinSIOp):
        return False
    return any(_reads_dynamic_size(v, depth - 1) for v in owner.operands)


def _work_trips(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """`trip_count`, or for a unit-step loop from a constant, at most `upper_bound(ub)`."""
    trips = trip_count(lb, ub, step)
    if trips is not None or constant_int(step) != 1 or (low := constant_int(lb)) is None:
        return trips
    high = upper_bound(ub)
    return max(0, high - low) if high is not None else None


def _per_thread(bound: SSAValue) -> bool:
    """Whether `bound` is the thread count, or its minimum with a constant."""
    owner = bound.owner
    if isinstance(owner, arith.MinSIOp | arith.MinUIOp):
        return any(isinstance(v.owner, NumThreadsOp) for v in owner.operands)
    return isinstance(owner, NumThreadsOp)


def static_work(block: Block) -> float:
    """Iterations of the loop nests in `block` when their trip counts are constants."""
    return sum(static_work_of(op) for op in block.ops)


def static_work_of(op: Operation) -> float:
    """Iterations of the loop nest `op`, a `micro.mma` counting `MMA_WORK_PER_FMA` per
    vector FMA (0 if it is neither)."""
    if isinstance(op, scf.ForOp):
        # A remainder loop of an edge tile (`for rt in range(rows // 8)`) counts as its
        # bound: unbounded, a 17-row MLP step's kernel counted as infinite work and ran
        # as a parfor, a thread launch per call (10-60x the step at 16 or 32 rows).
        trips = trip_bound(op.lb, op.ub, op.step) or _work_trips(op.lb, op.ub, op.step)
        return (math.inf if trips is None else trips) * max(1.0, static_work(op.body.block))
    if (rows := contract.ROW_RANGES.get(op)) is not None:  # rows of varying ranges
        return float(sum(rows[1::2]) - sum(rows[::2]))
    if isinstance(op, scf.ParallelOp):
        bounds = zip(op.lowerBound, op.upperBound, op.step, strict=True)
        # A loop over the threads (`micro.num_threads`) splits its body's work: once.
        counts = [1 if _per_thread(ub) else _work_trips(lb, ub, st) for lb, ub, st in bounds]
        trips = math.inf if None in counts else math.prod(c or 0 for c in counts)
        return trips * max(1.0, static_work(op.body.block))
    if isinstance(op, scf.IfOp):
        return max(static_work(r.block) for r in op.regions if r.blocks)
    if isinstance(op, MmaOp):
        # depth k steps of rows x cols / lanes vector FMAs; an edge block's depth,
        # min(kc, k - k0), as kc; an unknown depth as an unbounded loop.
        rows, cols, lanes = op.tile
        depth = upper_bound(op.depth)
        fmas = (math.inf if depth is None else float(depth)) * rows * -(-cols // lanes)
        return fmas * MMA_WORK_PER_FMA
    return 0.0


@dataclass(frozen=True)
class EnclosingTrips:
    """How often an op runs per call of its function, by its enclosing loops."""

    total: int | None
    """The product of the enclosing loops' trip counts (1 outside loops), None when one is
    not static."""
    innermost: int | None
    """The trip count of the innermost enclosing loop (of an `scf.parallel`, its last dim,
    the loop the code generator emits innermost): the loop LLVM vectorises. 1 outside
    loops, None when not static."""


def enclosing_trips(op: Operation) -> EnclosingTrips:
    """`op`'s `EnclosingTrips`, from the `scf.for`/`scf.parallel` loops around it (other
    region ops count once: an `scf.if` may run its region or not, so this is the most)."""
    total: int | None = 1
    innermost: int | None = 1
    first = True
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, scf.ForOp):
            counts = [trip_count(parent.lb, parent.ub, parent.step)]
        elif isinstance(parent, scf.ParallelOp):
            counts = [
                trip_count(lb, ub, step)
                for lb, ub, step in zip(
                    parent.lowerBound, parent.upperBound, parent.step, strict=True
                )
            ]
        elif isinstance(parent, scf.WhileOp):
            counts = [None]
        else:
            parent = parent.parent_op()
            continue
        if first:
            innermost, first = counts[-1], False
        for count in counts:
            total = None if total is None or count is None else total * count
        parent = parent.parent_op()
    return EnclosingTrips(total, innermost)
