"""
`tess-gpu-contract`: contractions become shared-memory tiled GPU kernels (level 5 -> 5g).

A `reduce` kernel whose reduction is `combine(acc, f(a, b))` over one dim `k` of two
inputs, with `i` only in A and the output and `j` only in B and the output (matmuls,
batched and transposed ones, the seed's broadcast zip+sum), runs as blocks of 16 x 16
threads each computing a 64 x 64 output tile, a 4 x 4 register tile per thread. Per k
tile of 16 both operands are staged in double-buffered workgroup memory (k-major, so a
thread's 4 rows or columns are one 16-byte load); the next tile's global loads are issued
before the current tile's unrolled k steps, one barrier per tile. Shapes are static, so
trip counts are constants, bounds checks are emitted only where a tile can overhang, and
index arithmetic is unsigned (`tess.unsigned_indices`). The reference's k order per output
is kept, except split-K: a tall-skinny contraction (few output tiles, K many times the
output's dims) splits its k tiles over grid z into `partials`, then a second launch sums
them in slice order (the same sum on every device) and runs the epilogue. Steps in
lowering/gpu/README.md; other kernels are left to `tess-gpu-reduce`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass

from tessc.dialects import contract
from tessc.lowering.gpu.gpu_common import (
    Body,
    GpuKernel,
    Launch,
    access_indices,
    elementwise_threads,
    emit_element,
    kernel_functions,
    kernels_module,
    launch_kernel,
    linalg_ops,
    maps_of,
)
from tessc.lowering.gpu.gpu_tree import Reduction, TreeKernel, match_reduction

TILE = 64  # a block's output tile: TILE x TILE
THREADS = 16  # per block dim: 256 threads
PER_THREAD = TILE // THREADS  # each thread's register tile: 4 x 4 outputs
DEPTH = THREADS  # k steps per shared tile: one per thread row (or column) when loading
# A shared tile is [buffer, k, TILE + PAD]: a tile filled across k (the thread index walks
# k, the operand's innermost dim) stores with a row stride of 68 words, a 2-way bank
# conflict instead of 16-way, and rows stay 16-byte aligned for the 4-wide loads.
PAD = 4
MAX_GRID_Z = 65535
# Split-K: a contraction of fewer than SPLIT_K_TILES output tiles whose K is at least
# SPLIT_K_RATIO times its larger output dim gives each of up to MAX_SPLIT_K blocks per tile
# an equal share of whole k tiles, at least MIN_SLICE_TILES (the double buffering's
# prefetch needs a few), aiming at TARGET_BLOCKS blocks (an H100 has 132 SMs).
SPLIT_K_TILES = 8
SPLIT_K_RATIO = 4
MAX_SPLIT_K = 16
MIN_SLICE_TILES = 4
TARGET_BLOCKS = 128


def dims_in(affine_map: AffineMap) -> set[int]:
    return {e.position for e in affine_map.results if isinstance(e, AffineDimExpr)}


def innermost_dim(affine_map: AffineMap, shape: Sequence[int]) -> int | None:
    """The loop dim of the operand's last memref dim of size > 1 (None: a constant)."""
    for expr, extent in reversed(list(zip(affine_map.results, shape, strict=True))):
        if extent != 1:
            return expr.position if isinstance(expr, AffineDimExpr) else None
    return None


@dataclass(frozen=True)
class Contraction:
    reduction: Reduction
    k: int
    row: int  # the tile's row dim (i or j)
    col: int  # the tile's column dim: the output's innermost
    batch: tuple[int, ...]
    row_operand: int  # input index holding `row` (and k)
    col_operand: int

    def extent(self, dim: int) -> int:
        return self.reduction.ranges[dim]


def match_contraction(reduction: Reduction) -> Contraction | None:
    op = reduction.op
    if (
        len(reduction.red_dims) != 1
        or len(op.inputs) != 2
        or not isinstance(reduction.combine, arith.AddfOp | arith.AddiOp)
    ):
        return None
    if any(not isinstance(v.type, MemRefType) for v in op.inputs):
        return None
    if any(isinstance(inner, IndexOp) for inner in op.body.walk()):
        return None
    (k,) = reduction.red_dims
    maps = maps_of(op)
    a_dims, b_dims = dims_in(maps[0]), dims_in(maps[1])
    parallel = set(reduction.out_dims)
    i_dims, j_dims = (a_dims - b_dims) & parallel, (b_dims - a_dims) & parallel
    if k not in a_dims or k not in b_dims or len(i_dims) != 1 or len(j_dims) != 1:
        return None
    (i,), (j,) = i_dims, j_dims
    batch = tuple(d for d in reduction.out_dims if d not in (i, j))
    out_shape = op.outputs[0].type.get_shape()  # type: ignore[attr-defined]
    if innermost_dim(maps[2], out_shape) == i:
        return Contraction(reduction, k, j, i, batch, 1, 0)
    return Contraction(reduction, k, i, j, batch, 0, 1)


@dataclass
class TiledKernel:
    contraction: Contraction
    gk: GpuKernel
    tree: TreeKernel
    ids: tuple[SSAValue, SSAValue]  # thread x, thread y

    def tile_loads(
        self,
        b: Body,
        operand: int,
        tile_dim: int,
        tile_origin: SSAValue,
        k0: SSAValue,
        batch: dict[int, SSAValue],
        k_guard: bool,
    ) -> list[tuple[SSAValue, SSAValue, SSAValue]]:
        """Load this thread's 4 elements of operand `operand`'s DEPTH x TILE tile at
        (tile_origin along `tile_dim`, k0): (value, k in tile, position in tile) each.
        Elements outside the operand are zeros; the checks are emitted only where the tile
        can overhang (`k_guard`: the tile may pass K)."""
        c = self.contraction
        op = c.reduction.op
        memory = self.gk.values[op.inputs[operand]]
        affine_map = maps_of(op)[operand]
        shape = op.inputs[operand].type.get_shape()  # type: ignore[attr-defined]
        # The thread index walks the operand's innermost dim: coalesced loads.
        walks_k = innermost_dim(affine_map, shape) == c.k
        tx, ty = self.ids
        element_type = memory.type.element_type  # type: ignore[attr-defined]
        overhangs = c.extent(tile_dim) % TILE != 0
        loads = []
        for u in range(PER_THREAD):
            kk, tt = (
                (tx, b.add(ty, b.c(THREADS * u))) if walks_k else (ty, b.add(tx, b.c(THREADS * u)))
            )
            gk_, gt = b.add(k0, kk), b.add(tile_origin, tt)
            induction: list[SSAValue | None] = [None] * len(c.reduction.ranges)
            for d, value in batch.items():
                induction[d] = value
            induction[tile_dim], induction[c.k] = gt, gk_
            checks = []
            if overhangs:
                checks.append(b.cmp(gt, b.c(c.extent(tile_dim)), "ult"))
            if k_guard:
                checks.append(b.cmp(gk_, b.c(c.extent(c.k)), "ult"))

            def copy(inner: Body, induction=induction) -> Sequence[SSAValue]:
                indices = access_indices(inner, affine_map, induction)  # type: ignore[arg-type]
                return [inner.load(memory, indices)]

            if checks:
                inside = checks[0] if len(checks) == 1 else b.andi(*checks)
                (value,) = b.when(
                    inside,
                    copy,
                    lambda inner: [inner.constants.scalar(0, element_type)],
                    types=[element_type],
                )
            else:
                (value,) = copy(b)
            loads.append((value, kk, tt))
        return loads

    def product(self, b: Body, a: SSAValue, bv: SSAValue) -> SSAValue:
        """f(a, b): the body's producer part on one value of each operand."""
        c = self.contraction
        op = c.reduction.op
        values = {0: a, 1: bv} if c.row_operand == 0 else {0: bv, 1: a}
        values[2] = self.tree.identity(b)
        mapping = emit_element(b, op, [], self.gk.values, values, skip=(c.reduction.combine,))
        acc = op.body.block.args[-1]
        (x,) = (v for v in c.reduction.combine.operands if v is not acc)
        return mapping.get(x, x)

    def k_steps(
        self,
        b: Body,
        tiles: tuple[SSAValue, SSAValue],
        buffer: SSAValue,
        steps: int,
        accs: Sequence[SSAValue],
    ) -> list[SSAValue]:
        """`steps` k steps (unrolled) of the 4 x 4 accumulators on shared buffer `buffer`:
        a thread's 4 rows (columns) are adjacent in a k row of the tile."""
        tx, ty = self.ids
        reduction = self.contraction.reduction
        row_base, col_base = b.mul(ty, b.c(PER_THREAD)), b.mul(tx, b.c(PER_THREAD))
        accs = list(accs)
        for kk in range(steps):
            k = b.c(kk)
            rows = [
                b.load(tiles[0], [buffer, k, b.add(row_base, b.c(u))]) for u in range(PER_THREAD)
            ]
            cols = [
                b.load(tiles[1], [buffer, k, b.add(col_base, b.c(v))]) for v in range(PER_THREAD)
            ]
            accs = [
                reduction.combined(b, accs[PER_THREAD * u + v], self.product(b, rows[u], cols[v]))
                for u in range(PER_THREAD)
                for v in range(PER_THREAD)
            ]
        return accs


def unsigned_maps(contraction: Contraction) -> bool:
    """Whether every operand index is a loop dim or a non-negative constant: then all index
    arithmetic of the kernel is on non-negative values."""
    for affine_map in maps_of(contraction.reduction.op):
        for expr in affine_map.results:
            if isinstance(expr, AffineConstantExpr) and expr.value >= 0:
                continue
            if not isinstance(expr, AffineDimExpr):
                return False
    return True


def split_k(c: Contraction) -> int:
    """How many k slices a tall-skinny contraction's tiles split into (1: none)."""
    rows, cols, depth = c.extent(c.row), c.extent(c.col), c.extent(c.k)
    tiles = -(-rows // TILE) * -(-cols // TILE)
    k_tiles, tail = divmod(depth, DEPTH)
    if c.batch or tail or tiles >= SPLIT_K_TILES or depth < SPLIT_K_RATIO * max(rows, cols):
        return 1
    cap = min(MAX_SPLIT_K, -(-TARGET_BLOCKS // tiles), k_tiles // MIN_SLICE_TILES)
    return max((d for d in range(1, cap + 1) if k_tiles % d == 0), default=1)


def tiled_kernel(
    gk: GpuKernel,
    c: Contraction,
    module: ModuleOp,
    k_tiles: int,
    tail: int,
    finish: Callable[[TiledKernel, Body, SSAValue, dict[int, SSAValue]], None],
    slices: int = 1,
) -> Launch:
    """The tiled body on `gk`: each block's output tile over `k_tiles` k tiles (the last
    `tail` deep, 0: whole), starting at block z's slice when `slices` > 1; `finish(tiled,
    b, acc, position)` for each in-range output."""
    reduction = c.reduction
    element_type = reduction.combine.results[0].type
    b = gk.body()
    tile_type = [2, DEPTH, TILE + PAD]
    tiles = (
        gk.workgroup_buffer(element_type, tile_type, "row_tile"),
        gk.workgroup_buffer(element_type, tile_type, "col_tile"),
    )
    tx, ty = b.thread_id("x"), b.thread_id("y")
    tiled = TiledKernel(c, gk, TreeKernel(reduction, gk, element_type), (tx, ty))
    bx, by = b.block_id("x"), b.block_id("y")
    r0, c0 = b.mul(by, b.c(TILE)), b.mul(bx, b.c(TILE))
    first_tile = b.mul(b.block_id("z"), b.c(k_tiles)) if slices > 1 else None
    batch_extents = [c.extent(d) for d in c.batch]

    def stage(
        bs: Body, k_tile: SSAValue, buffer: SSAValue, batch: dict[int, SSAValue], guard: bool
    ) -> Callable[[Body], None]:
        """Issue the global loads of k tile `k_tile`; the returned callback stores them
        into shared buffer `buffer`."""
        if first_tile is not None:
            k_tile = bs.add(first_tile, k_tile)
        k0 = bs.mul(k_tile, bs.c(DEPTH))
        loads = [
            tiled.tile_loads(bs, c.row_operand, c.row, r0, k0, batch, guard),
            tiled.tile_loads(bs, c.col_operand, c.col, c0, k0, batch, guard),
        ]

        def store(bt: Body) -> None:
            for tile, operand_loads in zip(tiles, loads, strict=True):
                for value, kk, tt in operand_loads:
                    bt.store(value, tile, [buffer, kk, tt])

        return store

    def output_tile(bt: Body, batch: dict[int, SSAValue]) -> None:
        """The k tiles of one output tile (double-buffered), then its in-range outputs."""
        accs: Sequence[SSAValue] = [tiled.tree.identity(bt)] * PER_THREAD**2
        if k_tiles:
            stage(bt, bt.c(0), bt.c(0), batch, k_tiles == 1 and tail > 0)(bt)
            bt.barrier()

            # Whole k tiles: the loop runs them all, the last one's "next" tile its own
            # again (in range, no check; staged into the buffer no step reads), rather than
            # its k steps emitted a second time after the loop: half the kernel's
            # statements, what Numba's typing costs. A partial last tile (`tail`) has
            # fewer steps: it stays after the loop.
            whole = tail == 0

            def k_tile(bk: Body, kt: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
                # The next tile's loads first: their latency hides behind this tile's steps.
                following = bk.add(kt, bk.c(1))
                source = bk.minsi(following, bk.c(k_tiles - 1)) if whole else following
                buffer = bk.remui(following, bk.c(2))
                store_next = stage(bk, source, buffer, batch, tail > 0)
                acc = tiled.k_steps(bk, tiles, bk.remui(kt, bk.c(2)), DEPTH, acc)
                store_next(bk)
                bk.barrier()
                return acc

            looped = k_tiles if whole else k_tiles - 1
            if looped:
                accs = bt.loop(bt.c(0), bt.c(looped), bt.c(1), k_tile, accs, hint="kt")
            if not whole:
                last = (k_tiles - 1) % 2
                accs = tiled.k_steps(bt, tiles, bt.c(last), tail, accs)
            if c.batch:
                bt.barrier()  # the next batch's first tile overwrites buffer 0
        row_base, col_base = bt.mul(ty, bt.c(PER_THREAD)), bt.mul(tx, bt.c(PER_THREAD))
        for u in range(PER_THREAD):
            r = bt.add(r0, bt.add(row_base, bt.c(u)))
            for v in range(PER_THREAD):
                col = bt.add(c0, bt.add(col_base, bt.c(v)))
                checks = []
                if c.extent(c.row) % TILE:
                    checks.append(bt.cmp(r, bt.c(c.extent(c.row)), "ult"))
                if c.extent(c.col) % TILE:
                    checks.append(bt.cmp(col, bt.c(c.extent(c.col)), "ult"))
                position = {**batch, c.row: r, c.col: col}

                def finish_one(
                    bf: Body, acc=accs[PER_THREAD * u + v], position=position
                ) -> Sequence[SSAValue]:
                    finish(tiled, bf, acc, position)
                    return ()

                if checks:
                    bt.when(checks[0] if len(checks) == 1 else bt.andi(*checks), finish_one)
                else:
                    finish_one(bt)

    batches = _product(batch_extents)
    if c.batch:
        # Blocks stride over the batch (grid z is at most 65535 blocks).

        def per_batch(bb: Body, index: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            output_tile(bb, dict(zip(c.batch, bb.delinearize(index, batch_extents), strict=True)))
            return ()

        b.loop(b.block_id("z"), b.c(batches), b.grid_dim("z"), per_batch, hint="bt")
    else:
        output_tile(b, {})
    grid = (
        -(-c.extent(c.col) // TILE),
        -(-c.extent(c.row) // TILE),
        slices if slices > 1 else max(1, min(batches, MAX_GRID_Z)),
    )
    launch = gk.finish(grid, (THREADS, THREADS, 1), module)
    if unsigned_maps(c):
        function = kernels_module(module).body.block.last_op
        assert function is not None
        contract.UNSIGNED_INDICES.set(function)
    return launch


def finish_output(tiled: TiledKernel, b: Body, acc: SSAValue, position: dict) -> None:
    """The output element: the initial value combined in, the epilogue, the stores."""
    reduction = tiled.contraction.reduction
    tiled.tree.finish(b, acc, [position[d] for d in reduction.out_dims])


def contract_kernel(kernel: func.FuncOp, module: ModuleOp) -> bool:
    ops = linalg_ops(kernel)
    reduction = match_reduction(ops)
    contraction = match_contraction(reduction) if reduction else None
    if contraction is None or reduction is None:
        return False
    c = contraction
    name = kernel.sym_name.data
    slices = split_k(c)
    if slices == 1:
        gk = GpuKernel.create(name, kernel, ops)
        full_tiles, tail = divmod(c.extent(c.k), DEPTH)
        launch = tiled_kernel(gk, c, module, full_tiles + (tail > 0), tail, finish_output)
        launch_kernel(module, kernel, [launch])
        return True
    # Split-K: slice z of the k tiles into partials[z], then their sum in slice order.
    element_type = reduction.combine.results[0].type
    rows, cols = c.extent(c.row), c.extent(c.col)
    partial_type = MemRefType(element_type, [slices, rows, cols])
    first = GpuKernel.create(
        f"{name}_0", kernel, ops[: ops.index(reduction.op) + 1], [(0, partial_type)]
    )
    (partials,) = first.scratch_args
    partials.name_hint = "partials"

    def store_partial(tiled: TiledKernel, b: Body, acc: SSAValue, position: dict) -> None:
        b.store(acc, partials, [b.block_id("z"), position[c.row], position[c.col]])

    k_tiles = c.extent(c.k) // DEPTH // slices
    launch_first = tiled_kernel(first, c, module, k_tiles, 0, store_partial, slices)
    second = GpuKernel.create(f"{name}_1", kernel, ops, [(0, partial_type)])
    (summed,) = second.scratch_args
    summed.name_hint = "partials"
    tree = TreeKernel(reduction, second, element_type)
    b = second.body()
    threads, blocks = elementwise_threads(rows * cols)
    start = b.add(b.mul(b.block_id("x"), b.c(threads)), b.thread_id("x"))
    stride = b.mul(b.grid_dim("x"), b.c(threads))

    def per_output(bp: Body, p: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        r, col = bp.delinearize(p, [rows, cols])

        def add_slice(bs: Body, z: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            return [reduction.combined(bs, acc[0], bs.load(summed, [z, r, col]))]

        (total,) = bp.loop(bp.c(0), bp.c(slices), bp.c(1), add_slice, [tree.identity(bp)])
        position = {c.row: r, c.col: col}
        tree.finish(bp, total, [position[d] for d in reduction.out_dims])
        return ()

    b.loop(start, b.c(rows * cols), stride, per_output, hint="p")
    launch_second = second.finish((blocks, 1, 1), (threads, 1, 1), module, grid_stride=True)
    launch_kernel(module, kernel, [launch_first, launch_second], [partial_type])
    return True


def _product(values: Sequence[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


@dataclass(frozen=True)
class TessGpuContractPass(ModulePass):
    """Map contraction kernels to shared-memory tiled kernels (module docstring)."""

    name = "tess-gpu-contract"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernel_functions(op, "reduce"):
            contract_kernel(kernel, op)
        op.verify()


__all__ = ["Contraction", "TessGpuContractPass", "match_contraction"]
