"""
`tess-gpu-reduce`: reductions become block-wide tree reductions in workgroup memory
(level 5 -> 5g).

A `reduce` kernel (an optional fill, a linalg op `yield combine(acc, f(inputs))` with a
known combiner, an optional elementwise epilogue) runs as: each thread folds a strided
share into a register, the block halves a workgroup buffer per step (a barrier each), lane
0 combines with the initial value and runs the epilogue. Threads share a reduction by rows
or by columns, whichever keeps reads coalesced; whole-tensor and tall-column reductions
too large for one block take two launches through a `partials` buffer. Other reductions
are left to `tess-gpu-map`. Details in lowering/gpu/README.md (shape 2). xDSL's
`gpu.all_reduce` lacks a lowering to shared memory and barriers in xDSL 0.74.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass

from tessc.lowering.gpu.gpu_common import (
    MAX_GRID_X,
    Body,
    GpuKernel,
    Launch,
    kernel_functions,
    launch_kernel,
    linalg_ops,
    maps_of,
)
from tessc.lowering.gpu.gpu_tree import Reduction, TreeKernel, match_reduction

MAX_THREADS = 256
COLUMN_LANES = (32, 8)
MAX_PARTIALS = 1024
"""A whole-tensor reduction's first pass folds into at most this many partials (blocks stride
over them: the grid the device gets does not change the sum); one block adds them up."""
MAX_COLUMN_SPLIT = 64
MIN_STEPS = 4
FEW_BLOCKS = 16
COLUMN_SPLIT_STEPS = 512
"""A column reduction over fewer than `FEW_BLOCKS` blocks of outputs and at least this many
steps splits its steps over grid y (64 steps per y lane), then a second pass."""
"""Reductions of fewer steps per output (and more than one output) stay with `tess-gpu-map`:
one thread per output, the steps sequential."""


def innermost_is_reduced(reduction: Reduction) -> bool:
    """Whether the largest input's last non-unit memref dim is a reduction dim."""
    inputs = [
        (operand, affine_map)
        for operand, affine_map in zip(reduction.op.inputs, maps_of(reduction.op), strict=False)
        if isinstance(operand.type, MemRefType) and operand.type.get_shape()
    ]
    if not inputs:
        return True
    operand, affine_map = max(inputs, key=lambda pair: math.prod(pair[0].type.get_shape()))
    shape = operand.type.get_shape()
    for expr, extent in reversed(list(zip(affine_map.results, shape, strict=True))):
        if extent != 1:
            return isinstance(expr, AffineDimExpr) and expr.position in reduction.red_dims
    return True


def pow2_threads(count: int, cap: int = MAX_THREADS) -> int:
    threads = 32
    while threads < count and threads < cap:
        threads *= 2
    return threads


@dataclass(frozen=True)
class ElementAt:
    """The reduced element at (output p, step r): `prepare(b, p)` once per output (its
    indices: `divui`/`remui` of p), `value(b, prepared, r)` per step."""

    prepare: Callable[[Body, SSAValue], Sequence[SSAValue]]
    value: Callable[[Body, Sequence[SSAValue], SSAValue], SSAValue]


def build_rows(
    tk: TreeKernel,
    threads: int,
    outputs: int,
    first_step: Callable[[Body, SSAValue, SSAValue], tuple[SSAValue, SSAValue]],
    element: ElementAt,
    finish: Callable[[Body, SSAValue, SSAValue], None],
    steps: int,
) -> None:
    """Row variant: blocks stride over `outputs` (none: every block works on output 0);
    per output, lanes stride over `steps` from `first_step(b, p, tx)` = (start, stride),
    folding `element`'s value at step r (its output indices made once per output, outside
    the loop); lane 0 runs `finish(b, total, p)`."""
    b = tk.gk.body()
    tree_buffer = tk.gk.workgroup_buffer(tk.element_type, [threads], "tree")
    tx, bx, gdx = b.thread_id("x"), b.block_id("x"), b.grid_dim("x")

    def per_output(bp: Body, p: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        start, stride = first_step(bp, p, tx)
        at = element.prepare(bp, p)

        def fold(br: Body, r: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            return [tk.reduction.combined(br, acc[0], element.value(br, at, r))]

        (partial,) = bp.loop(start, bp.c(steps), stride, fold, [tk.identity(bp)], hint="r")
        bp.store(partial, tree_buffer, [tx])
        tk.tree(bp, tree_buffer, tx, threads, None)

        def last(bl: Body) -> Sequence[SSAValue]:
            finish(bl, bl.load(tree_buffer, [bl.c(0)]), p)
            return ()

        bp.when(bp.cmp(tx, bp.c(0), "eq"), last)
        return ()

    if outputs:
        b.loop(bx, b.c(outputs), gdx, per_output, hint="p")
    else:
        per_output(b, b.c(0), ())


def reduce_kernel(kernel: func.FuncOp, module: ModuleOp) -> bool:
    ops = linalg_ops(kernel)
    reduction = match_reduction(ops)
    if reduction is None:
        return False
    name = kernel.sym_name.data
    element_type = reduction.combine.results[0].type
    outputs = 1
    for extent in reduction.out_shape:
        outputs *= extent
    steps = 1
    for extent in reduction.red_shape:
        steps *= extent

    def out_positions(b: Body, p: SSAValue) -> list[SSAValue]:
        return b.delinearize(p, reduction.out_shape)

    def element_at(tk: TreeKernel, output: int | None = None) -> ElementAt:
        """`output`: every p reduces into that one output (a whole-tensor first pass)."""
        return ElementAt(
            lambda b, p: out_positions(b, p if output is None else b.c(output)),
            lambda b, at, r: tk.element(b, at, b.delinearize(r, reduction.red_shape)),
        )

    def finish_at(tk: TreeKernel) -> Callable[[Body, SSAValue, SSAValue], None]:
        return lambda b, total, p: tk.finish(b, total, out_positions(b, p))

    def lanes_from(threads: int) -> Callable[[Body, SSAValue, SSAValue], tuple[SSAValue, SSAValue]]:
        return lambda b, p, tx: (tx, b.c(threads))

    if steps == 0 or outputs == 0:
        return False  # no step (the identity) or no output: `tess-gpu-map`'s loop is enough
    if steps < MIN_STEPS and outputs > 1:
        return False  # a thread per output folds a few steps faster than a block would
    threads = pow2_threads(steps)
    if outputs == 1 and steps >= 2 * threads:
        blocks = min(MAX_PARTIALS, -(-steps // threads))
        partial_type = MemRefType(element_type, [blocks])
        first = GpuKernel.create(
            f"{name}_0", kernel, ops[: ops.index(reduction.op) + 1], [(0, partial_type)]
        )
        tk = TreeKernel(reduction, first, element_type)
        (partials,) = first.scratch_args
        partials.name_hint = "partials"
        # Partial p folds steps p * threads + lane, + threads * blocks, ...: blocks stride
        # over the partials, so every partial is written, whatever grid the device gets,
        # and each is the same sum on every device.
        build_rows(
            tk,
            threads,
            blocks,
            lambda b, p, tx: (b.add(b.mul(p, b.c(threads)), tx), b.c(threads * blocks)),
            element_at(tk, 0),
            lambda b, total, p: b.store(total, partials, [p]),
            steps,
        )
        launch_first = first.finish((blocks, 1, 1), (threads, 1, 1), module, grid_stride=True)
        second = GpuKernel.create(f"{name}_1", kernel, ops, [(0, partial_type)])
        tk2 = TreeKernel(reduction, second, element_type)
        (partials2,) = second.scratch_args
        partials2.name_hint = "partials"
        threads2 = pow2_threads(blocks)
        build_rows(
            tk2,
            threads2,
            1,
            lanes_from(threads2),
            ElementAt(lambda b, p: (), lambda b, at, r: b.load(partials2, [r])),
            finish_at(tk2),
            blocks,
        )
        launch_second = second.finish((1, 1, 1), (threads2, 1, 1), module)
        launch_kernel(module, kernel, [launch_first, launch_second], [partial_type])
        return True

    columns = outputs > 1 and not innermost_is_reduced(reduction)
    width, height = COLUMN_LANES
    if columns and -(-outputs // width) < FEW_BLOCKS and steps >= COLUMN_SPLIT_STEPS:
        split = min(MAX_COLUMN_SPLIT, -(-steps // COLUMN_SPLIT_STEPS))
        partial_type = MemRefType(element_type, [split, outputs])
        first = GpuKernel.create(
            f"{name}_0", kernel, ops[: ops.index(reduction.op) + 1], [(0, partial_type)]
        )
        tk = TreeKernel(reduction, first, element_type)
        (partials,) = first.scratch_args
        partials.name_hint = "partials"
        launch_first = build_columns(
            tk,
            outputs,
            steps,
            element_at(tk),
            lambda b, total, p: b.store(total, partials, [b.block_id("y"), p]),
            module,
            split,
        )
        second = GpuKernel.create(f"{name}_1", kernel, ops, [(0, partial_type)])
        tk2 = TreeKernel(reduction, second, element_type)
        (partials2,) = second.scratch_args
        partials2.name_hint = "partials"
        launch_second = build_columns(
            tk2,
            outputs,
            split,
            ElementAt(lambda b, p: (p,), lambda b, at, r: b.load(partials2, [r, at[0]])),
            finish_at(tk2),
            module,
        )
        launch_kernel(module, kernel, [launch_first, launch_second], [partial_type])
        return True

    gk = GpuKernel.create(name, kernel, ops)
    tk = TreeKernel(reduction, gk, element_type)
    if columns:
        launch = build_columns(tk, outputs, steps, element_at(tk), finish_at(tk), module)
    else:
        build_rows(tk, threads, outputs, lanes_from(threads), element_at(tk), finish_at(tk), steps)
        launch = gk.finish(
            (min(outputs, MAX_GRID_X), 1, 1), (threads, 1, 1), module, grid_stride=True
        )
    launch_kernel(module, kernel, [launch])
    return True


def build_columns(
    tk: TreeKernel,
    outputs: int,
    steps: int,
    element: ElementAt,
    finish: Callable[[Body, SSAValue, SSAValue], None],
    module: ModuleOp,
    split: int = 1,
) -> Launch:
    """Column variant (module docstring, step 2): x picks the output, y strides over r;
    with `split` > 1, grid y splits r too (`r = block_id y * 8 + ty, ...`)."""
    width, height = COLUMN_LANES
    b = tk.gk.body()
    tree = tk.gk.workgroup_buffer(tk.element_type, [height, width], "tree")
    tx, ty, bx, gdx = b.thread_id("x"), b.thread_id("y"), b.block_id("x"), b.grid_dim("x")

    def per_block(bp: Body, first: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        p = bp.add(first, tx)
        inside = bp.cmp(p, bp.c(outputs), "ult")

        def fold_all(bi: Body) -> Sequence[SSAValue]:
            at = element.prepare(bi, p)

            def fold(br: Body, r: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
                return [tk.reduction.combined(br, acc[0], element.value(br, at, r))]

            start = bi.add(bi.mul(b.block_id("y"), bi.c(height)), ty) if split > 1 else ty
            stride = bi.c(height * split)
            return bi.loop(start, bi.c(steps), stride, fold, [tk.identity(bi)], hint="r")

        (partial,) = bp.when(
            inside, fold_all, lambda be: [tk.identity(be)], types=[tk.element_type]
        )
        bp.store(partial, tree, [ty, tx])
        tk.tree(bp, tree, ty, height, tx)

        def last(bl: Body) -> Sequence[SSAValue]:
            finish(bl, bl.load(tree, [bl.c(0), tx]), p)
            return ()

        bp.when(bp.andi(bp.cmp(ty, bp.c(0), "eq"), inside), last)
        return ()

    blocks = min(-(-outputs // width), MAX_GRID_X)
    b.loop(b.mul(bx, b.c(width)), b.c(outputs), b.mul(gdx, b.c(width)), per_block, hint="p0")
    return tk.gk.finish((blocks, split, 1), (width, height, 1), module, grid_stride=True)


@dataclass(frozen=True)
class TessGpuReducePass(ModulePass):
    """Map `reduce` kernels to block tree reductions (module docstring)."""

    name = "tess-gpu-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernel_functions(op, "reduce"):
            reduce_kernel(kernel, op)
        op.verify()


__all__ = ["TessGpuReducePass"]
