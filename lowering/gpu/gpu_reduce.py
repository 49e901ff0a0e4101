"""
`tess-gpu-reduce`: reductions become block-wide tree reductions in workgroup memory.

Level 5 (a `reduce` kernel of `tess-gpu-partition`: an optional fill of the output, a
reduction, an optional elementwise epilogue) -> level 5g. The reduction is a linalg op
whose body is `yield combine(acc, f(inputs))` with `combine` one of `addf`, `mulf`,
`maximumf`, `minimumf`, `maxnumf`, `minnumf` (or their integer kin) and `acc` used by
nothing else: `sum`, `mean` (a sum, then the divide as epilogue), `reduce_max`, and every
elementwise producer fused into them (the seed's `(3,5,1) * (1,5,4)` summed over dim 1 is
`f = mulf` of two broadcast loads: no (3,5,4) buffer). Output elements `p` range over the
parallel dims (the output's positions), reduction steps `r` over the reduction dims, both
flattened row-major.

1. Each thread folds its strided share of `r` into a register that starts at `combine`'s
   identity (`scf.for` with `iter_args`), stores it to a workgroup buffer, and the block
   halves the live part of that buffer per step (`if lane < s: t[lane] = combine(t[lane],
   t[lane + s])`, then `gpu.barrier`; the block size is a power of two). Lane 0 then
   combines the total with the output's initial value (the fill's constant when the fill
   is in this kernel, else the value in memory), stores it, and runs the epilogue for that
   element. Integer and float combiners are reassociated by the tree: floats round
   differently from a sequential sum, within the tolerance every test allows.
2. Which threads share a reduction depends on the input's innermost dim, so that
   consecutive threads read consecutive addresses:
   - rows (the innermost dim is reduced, or there is one output): a block of B <= 256
     threads per output, `r = lane, lane + B, ...`; blocks stride over outputs;
   - columns (the innermost dim indexes outputs, e.g. `sum(x, dim=0)`): a block of 32 x 8
     threads; `thread_id x` picks one of 32 consecutive outputs, `thread_id y` strides
     over `r`, the tree runs over `y` in a `memref<8x32x..>`.
3. A whole-tensor reduction too large for one block (one output, r >= 2B) takes two
   launches: G <= 64 blocks each reduce a strided share to `partials[block]` (a host
   `memref.alloc`, device scratch), then one block reduces the G partials as in 1. A tall
   column reduction (few blocks of outputs, r >= 512) likewise: grid y splits r into G
   shares, `partials[G, outputs]`, then the column variant over the G partials.

A reduction that is no `combine(acc, f(...))` (several outputs, an accumulator used
twice), or that has several outputs of fewer than `MIN_STEPS` steps each (a block of 32
threads would idle), is left for `tess-gpu-map`: one thread per output element, its steps
sequential.
xDSL's `gpu.all_reduce` would express step 1 in one op, but needs a lowering to shared
memory and barriers that xDSL 0.74 lacks (and the emitter would have to do it), so the
tree is spelled out here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass

from tessc.dialects.gpu_memory import WORKGROUP
from tessc.lowering.gpu.gpu_common import (
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
MAX_PARTIAL_BLOCKS = 64
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


def build_rows(
    tk: TreeKernel,
    threads: int,
    outputs: int,
    first_step: Callable[[Body, SSAValue, SSAValue], tuple[SSAValue, SSAValue]],
    element: Callable[[Body, SSAValue, SSAValue], SSAValue],
    finish: Callable[[Body, SSAValue, SSAValue], None],
    steps: int,
) -> None:
    """Row variant: blocks stride over `outputs` (none: every block works on output 0);
    per output, lanes stride over `steps` from `first_step(b, p, tx)` = (start, stride),
    folding `element(b, p, r)`; lane 0 runs `finish(b, total, p)`."""
    b = tk.gk.body()
    alloca = memref.AllocaOp.get(tk.element_type, shape=[threads], memory_space=WORKGROUP)
    tree_buffer = b.add_op(alloca).results[0]
    tx, bx, gdx = b.thread_id("x"), b.block_id("x"), b.grid_dim("x")

    def per_output(bp: Body, p: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        start, stride = first_step(bp, p, tx)

        def fold(br: Body, r: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            return [tk.reduction.combined(br, acc[0], element(br, p, r))]

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

    def element_at(tk: TreeKernel) -> Callable[[Body, SSAValue, SSAValue], SSAValue]:
        return lambda b, p, r: tk.element(
            b, out_positions(b, p), b.delinearize(r, reduction.red_shape)
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
        blocks = min(MAX_PARTIAL_BLOCKS, -(-steps // threads))
        partial_type = MemRefType(element_type, [blocks])
        first = GpuKernel.create(
            f"{name}_0", kernel, ops[: ops.index(reduction.op) + 1], [(0, partial_type)]
        )
        tk = TreeKernel(reduction, first, element_type)
        (partials,) = first.scratch_args
        partials.name_hint = "partials"
        build_rows(
            tk,
            threads,
            0,
            lambda b, p, tx: (
                b.add(b.mul(b.block_id("x"), b.c(threads)), tx),
                b.c(threads * blocks),
            ),
            element_at(tk),
            lambda b, total, p: b.store(total, partials, [b.block_id("x")]),
            steps,
        )
        launch_first = first.finish((blocks, 1, 1), (threads, 1, 1), module)
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
            lambda b, p, r: b.load(partials2, [r]),
            finish_at(tk2),
            blocks,
        )
        launch_second = second.finish((1, 1, 1), (threads2, 1, 1), module)
        launch_kernel(module, kernel, [launch_first, launch_second], [partial_type])
        return True

    columns = outputs > 1 and not innermost_is_reduced(reduction)
    width, height = COLUMN_LANES
    if columns and -(-outputs // width) < FEW_BLOCKS and steps >= COLUMN_SPLIT_STEPS:
        split = min(MAX_PARTIAL_BLOCKS, -(-steps // COLUMN_SPLIT_STEPS))
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
            tk2, outputs, split, lambda b, p, r: b.load(partials2, [r, p]), finish_at(tk2), module
        )
        launch_kernel(module, kernel, [launch_first, launch_second], [partial_type])
        return True

    gk = GpuKernel.create(name, kernel, ops)
    tk = TreeKernel(reduction, gk, element_type)
    if columns:
        launch = build_columns(tk, outputs, steps, element_at(tk), finish_at(tk), module)
    else:
        build_rows(tk, threads, outputs, lanes_from(threads), element_at(tk), finish_at(tk), steps)
        launch = gk.finish((min(outputs, 1024), 1, 1), (threads, 1, 1), module)
    launch_kernel(module, kernel, [launch])
    return True


def build_columns(
    tk: TreeKernel,
    outputs: int,
    steps: int,
    element: Callable[[Body, SSAValue, SSAValue], SSAValue],
    finish: Callable[[Body, SSAValue, SSAValue], None],
    module: ModuleOp,
    split: int = 1,
) -> Launch:
    """Column variant (module docstring, step 2): x picks the output, y strides over r;
    with `split` > 1, grid y splits r too (`r = block_id y * 8 + ty, ...`)."""
    width, height = COLUMN_LANES
    b = tk.gk.body()
    tree = b.add_op(
        memref.AllocaOp.get(tk.element_type, shape=[height, width], memory_space=WORKGROUP)
    ).results[0]
    tx, ty, bx, gdx = b.thread_id("x"), b.thread_id("y"), b.block_id("x"), b.grid_dim("x")

    def per_block(bp: Body, first: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
        p = bp.add(first, tx)
        inside = bp.cmp(p, bp.c(outputs), "ult")

        def fold_all(bi: Body) -> Sequence[SSAValue]:
            def fold(br: Body, r: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
                return [tk.reduction.combined(br, acc[0], element(br, p, r))]

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

    blocks = min(-(-outputs // width), 1024)
    b.loop(b.mul(bx, b.c(width)), b.c(outputs), b.mul(gdx, b.c(width)), per_block, hint="p0")
    return tk.gk.finish((blocks, split, 1), (width, height, 1), module)


@dataclass(frozen=True)
class TessGpuReducePass(ModulePass):
    """Map `reduce` kernels to block tree reductions (module docstring)."""

    name = "tess-gpu-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernel_functions(op, "reduce"):
            reduce_kernel(kernel, op)
        op.verify()


__all__ = ["TessGpuReducePass"]
