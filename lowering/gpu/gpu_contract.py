"""
`tess-gpu-contract`: contractions become shared-memory tiled GPU kernels (level 5 -> 5g).

A `reduce` kernel whose reduction is `combine(acc, f(a, b))` over one dim `k` of two
inputs, with `i` only in A and the output and `j` only in B and the output (matmuls,
batched and transposed ones, the seed's broadcast zip+sum), runs as blocks of 16 x 16
threads each computing a 32 x 32 output tile, 2 x 2 outputs per thread; per k tile of 32
both operands are staged in workgroup memory (coalesced, zeros outside), then every thread
takes the tile's k steps between two barriers. The fused epilogue runs per output. No
padding enters a sum: the reference's k order per output is kept. Steps in
lowering/gpu/README.md; other kernels are left to `tess-gpu-reduce`. xDSL's tiling passes
do not stage operands through workgroup memory or synchronise a block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass

from tessc.lowering.gpu.gpu_common import (
    Body,
    GpuKernel,
    access_indices,
    emit_element,
    kernel_functions,
    launch_kernel,
    linalg_ops,
    maps_of,
)
from tessc.lowering.gpu.gpu_tree import Reduction, TreeKernel, match_reduction

TILE = 32
THREADS = 16  # per block dim: each thread owns TILE // THREADS = 2 rows and 2 columns
PER_THREAD = TILE // THREADS
MAX_GRID_Z = 65535


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

    def load_tile(
        self,
        b: Body,
        operand: int,
        tile: SSAValue,
        tile_dim: int,
        tile_origin: SSAValue,
        k0: SSAValue,
        batch: dict[int, SSAValue],
        k_first: bool,
        ids: tuple[SSAValue, SSAValue],
    ) -> None:
        """Copy operand `operand`'s 32 x 32 tile at (tile_origin along `tile_dim`, k0) into
        `tile` (indexed [tile_dim, k] or, `k_first`, [k, tile_dim])."""
        c = self.contraction
        op = c.reduction.op
        memory = self.gk.values[op.inputs[operand]]
        affine_map = maps_of(op)[operand]
        shape = op.inputs[operand].type.get_shape()  # type: ignore[attr-defined]
        fast = innermost_dim(affine_map, shape)
        tx, ty = ids
        element_type = memory.type.element_type  # type: ignore[attr-defined]

        def zero(inner: Body) -> Sequence[SSAValue]:
            return [inner.constants.scalar(0, element_type)]

        for u in range(PER_THREAD):
            for v in range(PER_THREAD):
                along_x = b.add(tx, b.c(THREADS * v))
                along_y = b.add(ty, b.c(THREADS * u))
                # The thread index walks the operand's innermost dim: coalesced loads.
                if fast == c.k:
                    kk, tt = along_x, along_y
                else:
                    kk, tt = along_y, along_x
                gk_ = b.add(k0, kk)
                gt = b.add(tile_origin, tt)
                inside = b.andi(
                    b.cmp(gt, b.c(c.extent(tile_dim)), "ult"),
                    b.cmp(gk_, b.c(c.extent(c.k)), "ult"),
                )
                induction: list[SSAValue | None] = [None] * len(c.reduction.ranges)
                for d, value in batch.items():
                    induction[d] = value
                induction[tile_dim], induction[c.k] = gt, gk_
                at = [kk, tt] if k_first else [tt, kk]

                def copy(inner: Body, induction=induction) -> Sequence[SSAValue]:
                    indices = access_indices(inner, affine_map, induction)  # type: ignore[arg-type]
                    return [inner.load(memory, indices)]

                (value,) = b.when(inside, copy, zero, types=[element_type])
                b.store(value, tile, at)

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


def contract_kernel(kernel: func.FuncOp, module: ModuleOp) -> bool:
    ops = linalg_ops(kernel)
    reduction = match_reduction(ops)
    contraction = match_contraction(reduction) if reduction else None
    if contraction is None or reduction is None:
        return False
    c = contraction
    element_type = reduction.combine.results[0].type
    gk = GpuKernel.create(kernel.sym_name.data, kernel, ops)
    tiled = TiledKernel(c, gk, TreeKernel(reduction, gk, element_type))
    b = gk.body()
    tile_type = [TILE, TILE]
    row_tile = gk.workgroup_buffer(element_type, tile_type, "row_tile")
    col_tile = gk.workgroup_buffer(element_type, tile_type, "col_tile")
    tx, ty = b.thread_id("x"), b.thread_id("y")
    bx, by = b.block_id("x"), b.block_id("y")
    r0, c0 = b.mul(by, b.c(TILE)), b.mul(bx, b.c(TILE))
    batch_extents = [c.extent(d) for d in c.batch]
    depth = c.extent(c.k)

    def k_tile(
        bk: Body, kt: SSAValue, accs: Sequence[SSAValue], batch: dict[int, SSAValue]
    ) -> Sequence[SSAValue]:
        k0 = bk.mul(kt, bk.c(TILE))
        tiled.load_tile(bk, c.row_operand, row_tile, c.row, r0, k0, batch, False, (tx, ty))
        tiled.load_tile(bk, c.col_operand, col_tile, c.col, c0, k0, batch, True, (tx, ty))
        bk.barrier()
        steps = bk.minsi(bk.c(TILE), bk.sub(bk.c(depth), k0))

        def k_step(bs: Body, kk: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            rows = [bs.load(row_tile, [bs.add(ty, bs.c(THREADS * u)), kk]) for u in range(2)]
            cols = [bs.load(col_tile, [kk, bs.add(tx, bs.c(THREADS * v))]) for v in range(2)]
            return [
                reduction.combined(bs, acc[2 * u + v], tiled.product(bs, rows[u], cols[v]))
                for u in range(PER_THREAD)
                for v in range(PER_THREAD)
            ]

        inner = bk.loop(bk.c(0), steps, bk.c(1), k_step, accs, hint="kk")
        bk.barrier()
        return inner

    def output_tile(bt: Body, batch: dict[int, SSAValue]) -> None:
        """The k tiles of one output tile, then its in-range outputs."""
        identity = tiled.tree.identity(bt)
        tiles = bt.c(-(-depth // TILE))
        accs = bt.loop(
            bt.c(0),
            tiles,
            bt.c(1),
            lambda bk, kt, acc: k_tile(bk, kt, acc, batch),
            [identity] * PER_THREAD**2,
            hint="kt",
        )
        for u in range(PER_THREAD):
            for v in range(PER_THREAD):
                r = bt.add(r0, bt.add(ty, bt.c(THREADS * u)))
                col = bt.add(c0, bt.add(tx, bt.c(THREADS * v)))
                inside = bt.andi(
                    bt.cmp(r, bt.c(c.extent(c.row)), "ult"),
                    bt.cmp(col, bt.c(c.extent(c.col)), "ult"),
                )
                position = {**batch, c.row: r, c.col: col}

                def finish(
                    bf: Body, acc=accs[PER_THREAD * u + v], position=position
                ) -> Sequence[SSAValue]:
                    tiled.tree.finish(bf, acc, [position[d] for d in reduction.out_dims])
                    return ()

                bt.when(inside, finish)

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
        max(1, min(batches, MAX_GRID_Z)),
    )
    launch = gk.finish(grid, (THREADS, THREADS, 1), module)
    launch_kernel(module, kernel, [launch])
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
