"""
`tess-gpu-rows`: a row-wise kernel (softmax, log-sum-exp) becomes ONE launch, a block per
row (level 5 -> 5g).

Split by `tess-gpu-partition`'s rules a softmax would be four launches, each needing the
previous one's results; but only of the same row, and a block can wait for its own
threads. For a `rows` kernel (every written buffer indexed by the row first, every
reduction one element per row) blocks stride over rows and run the ops in order, each
followed by a `gpu.barrier`: elementwise ops strided over the block's threads, reductions
as trees in workgroup memory. Distinct rows touch disjoint elements, so blocks never race.
The loop is drawn in lowering/gpu/README.md (shape 2b).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from tessc.lowering.gpu.gpu_common import (
    MAX_GRID_X,
    Body,
    GpuKernel,
    emit_element,
    is_reduction,
    kernel_functions,
    launch_kernel,
    linalg_ops,
    loop_ranges,
    store_element,
    yielded,
)
from tessc.lowering.gpu.gpu_tree import (
    TreeKernel,
    match_reduction,
    row_dim,
    written_buffers,
)

MAX_THREADS = 256


def row_threads(ops: Sequence[LinalgStructuredOperation], written: set[SSAValue]) -> int:
    widest = 1
    for op in ops:
        ranges = loop_ranges(op)
        dim = row_dim(op, written)
        widest = max(widest, math.prod(r for d, r in enumerate(ranges) if d != dim))
    threads = 32
    while threads < widest and threads < MAX_THREADS:
        threads *= 2
    return threads


def rows_kernel(kernel: func.FuncOp, module: ModuleOp) -> None:
    ops = linalg_ops(kernel)
    written = written_buffers(ops)
    dims = [row_dim(op, written) for op in ops]
    rows = loop_ranges(ops[0])[dims[0]]  # type: ignore[index]
    threads = row_threads(ops, written)
    gk = GpuKernel.create(kernel.sym_name.data, kernel, ops)
    b = gk.body()
    trees: dict[LinalgStructuredOperation, SSAValue] = {}
    for op in ops:
        if is_reduction(op):
            element_type = op.outputs[0].type.element_type  # type: ignore[attr-defined]
            trees[op] = gk.workgroup_buffer(element_type, [threads], "tree")
    tx, bx, gdx = b.thread_id("x"), b.block_id("x"), b.grid_dim("x")

    def per_row(br: Body, row: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        for op, dim in zip(ops, dims, strict=True):
            assert dim is not None
            ranges = loop_ranges(op)
            if is_reduction(op):
                reduce_row(br, op, dim, row, tx, threads, trees[op], gk)
            else:
                rest = [d for d in range(len(ranges)) if d != dim]

                def element(
                    be: Body, e: SSAValue, _: Sequence[SSAValue], op=op, dim=dim, rest=rest
                ) -> Sequence[SSAValue]:
                    induction = [row] * len(loop_ranges(op))
                    positions = be.delinearize(e, [loop_ranges(op)[d] for d in rest])
                    for d, v in zip(rest, positions, strict=True):
                        induction[d] = v
                    mapping = emit_element(be, op, induction, gk.values)
                    store_element(be, op, yielded(op, mapping), induction, gk.values)
                    return ()

                total = math.prod(ranges[d] for d in rest)
                br.loop(tx, br.c(total), br.c(threads), element, hint="e")
            br.barrier()
        return ()

    b.loop(bx, b.c(rows), gdx, per_row, hint="row")
    launch = gk.finish((min(rows, MAX_GRID_X), 1, 1), (threads, 1, 1), module, grid_stride=True)
    launch_kernel(module, kernel, [launch])


def reduce_row(
    b: Body,
    op: LinalgStructuredOperation,
    dim: int,
    row: SSAValue,
    tx: SSAValue,
    threads: int,
    tree: SSAValue,
    gk: GpuKernel,
) -> None:
    """The row's one output element of reduction `op`, by the whole block."""
    reduction = match_reduction([op])
    assert reduction is not None
    tk = TreeKernel(reduction, gk, reduction.combine.results[0].type)
    out_pos = [row if d == dim else b.c(0) for d in reduction.out_dims]
    steps = math.prod(reduction.red_shape)

    def fold(bf: Body, r: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
        red_pos = bf.delinearize(r, reduction.red_shape)
        return [reduction.combined(bf, acc[0], tk.element(bf, out_pos, red_pos))]

    (partial,) = b.loop(tx, b.c(steps), b.c(threads), fold, [tk.identity(b)], hint="r")
    b.store(partial, tree, [tx])
    tk.tree(b, tree, tx, threads, None)

    def last(bl: Body) -> Sequence[SSAValue]:
        tk.finish(bl, bl.load(tree, [bl.c(0)]), out_pos)
        return ()

    b.when(b.cmp(tx, b.c(0), "eq"), last)


@dataclass(frozen=True)
class TessGpuRowsPass(ModulePass):
    """Map `rows` kernels to one block per row (module docstring)."""

    name = "tess-gpu-rows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernel_functions(op, "rows"):
            rows_kernel(kernel, op)
        op.verify()


__all__ = ["TessGpuRowsPass"]
