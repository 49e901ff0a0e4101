"""
`tess-gpu-map`: elementwise kernels become grid-stride `gpu.func`s, one thread per element
(level 5 -> 5g).

Every kernel still left after `tess-gpu-contract` and `tess-gpu-reduce` (all `map`
kernels, and leftover reductions) runs over its first output flattened row-major, so
consecutive threads write consecutive addresses, in a grid-stride loop; loop dims the
threads do not cover run sequentially in iterator order. Block 256 threads (or the count
rounded up to a warp); grid x: every block with work, cut to what the device runs at once
at launch (`tess.grid_stride`). A horizontally fused optimizer update is one such launch
over its arenas. Details in lowering/gpu/README.md
(shape 1). xDSL's `gpu-map-parallel-loops` only annotates loops, and xDSL 0.74 has no pass
from a mapped loop to `gpu.launch_func`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr
from xdsl.passes import ModulePass

from tessc.lowering.gpu.gpu_common import (
    Body,
    GpuKernel,
    elementwise_threads,
    emit_element,
    is_reduction,
    kernel_functions,
    launch_kernel,
    linalg_ops,
    loop_ranges,
    maps_of,
    store_element,
    yielded,
)


def run_element(
    b: Body,
    op: LinalgStructuredOperation,
    bound: dict[int, SSAValue],
    values: dict[SSAValue, SSAValue],
) -> None:
    """`op` at the dims in `bound`, the other dims as sequential loops around it."""
    ranges = loop_ranges(op)
    free = [d for d in range(len(ranges)) if d not in bound]

    def nest(inner: Body, depth: int, induction: dict[int, SSAValue]) -> None:
        if depth == len(free):
            ivs = [induction[d] for d in range(len(ranges))]
            mapping = emit_element(inner, op, ivs, values)
            store_element(inner, op, yielded(op, mapping), ivs, values)
            return
        d = free[depth]

        def body(loop: Body, iv: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            nest(loop, depth + 1, {**induction, d: iv})
            return ()

        inner.loop(inner.c(0), inner.c(ranges[d]), inner.c(1), body, hint=f"i{d}")

    nest(b, 0, dict(bound))


def output_dims(op: LinalgStructuredOperation) -> list[int | None]:
    """For each position of the first output, the loop dim indexing it (None: constant)."""
    out_map = maps_of(op)[len(op.inputs)]
    return [e.position if isinstance(e, AffineDimExpr) else None for e in out_map.results]


def map_kernel(kernel: func.FuncOp, module: ModuleOp) -> None:
    ops = linalg_ops(kernel)
    name = kernel.sym_name.data
    first = ops[0]
    shape = tuple(first.outputs[0].type.get_shape())  # type: ignore[attr-defined]
    total = 1
    for extent in shape:
        total *= extent
    gk = GpuKernel.create(name, kernel, ops)
    b = gk.body()
    threads, blocks = elementwise_threads(total)
    if total > 0:
        tid, bid = b.thread_id("x"), b.block_id("x")
        bdim, gdim = b.block_dim("x"), b.grid_dim("x")
        start = b.add(b.mul(bid, bdim), tid)
        stride = b.mul(bdim, gdim)
        shared_dims = not any(map(is_reduction, ops))

        def element(inner: Body, linear: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            positions = inner.delinearize(linear, shape)
            for op in ops:
                # Elementwise members share loop dims (partition: same space, same maps);
                # a leftover reduction's members meet at its output positions.
                reference = first if shared_dims else op
                bound = {
                    d: positions[q] for q, d in enumerate(output_dims(reference)) if d is not None
                }
                run_element(inner, op, bound, gk.values)
            return ()

        b.loop(start, b.c(total), stride, element, hint="l")
    launch = gk.finish((blocks, 1, 1), (threads, 1, 1), module, grid_stride=True)
    launch_kernel(module, kernel, [launch])


@dataclass(frozen=True)
class TessGpuMapPass(ModulePass):
    """Map every remaining kernel to a grid-stride `gpu.func` (module docstring)."""

    name = "tess-gpu-map"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for shape in ("map", "reduce"):
            for kernel in kernel_functions(op, shape):
                map_kernel(kernel, op)
        op.verify()


__all__ = ["TessGpuMapPass"]
