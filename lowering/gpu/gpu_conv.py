"""
`tess-gpu-conv`: convolutions become shared-memory direct-convolution kernels (5 -> 5g).

A `reduce` kernel whose reduction is `acc + f(image, weight)` with the image read at
`(batch.., c, a*o + b*k + e ..)` and the weight at `(f, c, k..)` in any order (every
`tess.conv`, forward and both gradients, which are convs of their own) runs as blocks that
each own an output tile of `F_TILE` out-channels by a box of spatial positions. Per chunk of
input channels the block copies the image patch the box needs (its halo: `a*(T-1) +
b*(K-1) + 1` per spatial dim) and the weight slice into workgroup memory, one element per
thread per step (zeros outside), `gpu.barrier`, then each thread runs the chunk's `(c, k..)`
steps on its register tile of `ROWS x COLS` outputs, `gpu.barrier` before the next chunk.
The reference's order of terms per output is kept; the fill and the fused epilogue (bias,
activation) run per stored output. Kernels that do not fit (no static shape, workgroup
memory over `SHARED_BYTES`) are left to `tess-gpu-reduce`. Steps in lowering/gpu/README.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import AnyFloat, IntegerType, MemRefType, ModuleOp
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
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

LANES_X = 16  # threads along the spatial box (each owns up to COLS positions)
LANES_Y = 16  # threads along out-channels (each owns up to ROWS channels)
MAX_BOX = 64  # spatial positions per block tile
MAX_ROW = 16  # of which along the innermost dim, with several spatial dims
MAX_CHUNK = 8  # input channels staged per step
SHARED_BYTES = 48 * 1024  # static shared memory a block may use
MAX_GRID_Z = 65535


def linear_form(expr: AffineExpr) -> dict[int | None, int] | None:
    """`expr` as {dim: coefficient, None: constant}, or None if it is not linear."""
    if isinstance(expr, AffineDimExpr):
        return {expr.position: 1}
    if isinstance(expr, AffineConstantExpr):
        return {None: expr.value}
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    lhs, rhs = linear_form(expr.lhs), linear_form(expr.rhs)
    if lhs is None or rhs is None:
        return None
    if expr.kind == AffineBinaryOpKind.Add:
        return {k: lhs.get(k, 0) + rhs.get(k, 0) for k in {*lhs, *rhs}}
    if expr.kind == AffineBinaryOpKind.Mul:
        if set(rhs) == {None}:
            return {k: v * rhs[None] for k, v in lhs.items()}
        if set(lhs) == {None}:
            return {k: v * lhs[None] for k, v in rhs.items()}
    return None


@dataclass(frozen=True)
class Window:
    """One spatial dim: the image is read at `stride * out + dilation * tap + offset`."""

    position: int  # the image memref dim
    out: int  # loop dims
    tap: int
    stride: int
    dilation: int
    offset: int


@dataclass(frozen=True)
class Convolution:
    reduction: Reduction
    image: int  # input operand indices
    weight: int
    channel: int  # loop dims
    feature: int
    outer: tuple[int, ...]  # batch and group dims: grid z
    windows: tuple[Window, ...]

    def extent(self, dim: int) -> int:
        return self.reduction.ranges[dim]


def single_dims(affine_map: AffineMap) -> set[int] | None:
    """The dims of a map whose every result reads at most one dim (a weight's: `k`, or
    `K - 1 - k` where autodiff's flip fused in), None if some result reads more."""
    dims: set[int] = set()
    for expr in affine_map.results:
        form = linear_form(expr)
        if form is None:
            return None
        used = {d for d, k in form.items() if d is not None and k != 0}
        if len(used) > 1:
            return None
        dims |= used  # type: ignore[arg-type]
    return dims


def match_convolution(reduction: Reduction) -> Convolution | None:
    op = reduction.op
    if not isinstance(reduction.combine, arith.AddfOp | arith.AddiOp):
        return None
    if any(isinstance(inner, IndexOp) for inner in op.body.walk()):
        return None
    # Inputs the body never reads (left by fusion) are not loaded.
    read = [k for k, arg in enumerate(op.body.block.args[: len(op.inputs)]) if arg.uses]
    if len(read) != 2 or any(not isinstance(op.inputs[k].type, MemRefType) for k in read):
        return None
    maps = maps_of(op)
    if not all(isinstance(e, AffineDimExpr) for e in maps[-1].results):
        return None
    single = {k: single_dims(maps[k]) for k in read}
    weights = [k for k in read if single[k] is not None]
    images = [k for k in read if single[k] is None]
    if len(weights) != 1 or len(images) != 1:
        return None
    (image,), (weight,) = images, weights
    weight_dims = single[weight]
    assert weight_dims is not None
    reduced, parallel = set(reduction.red_dims), set(reduction.out_dims)
    windows: list[Window] = []
    image_plain: set[int] = set()
    for position, expr in enumerate(maps[image].results):
        if isinstance(expr, AffineDimExpr):
            image_plain.add(expr.position)
            continue
        form = linear_form(expr)
        if form is None:
            return None
        offset = form.pop(None, 0)
        terms = {d: k for d, k in form.items() if k != 0}
        outs = [d for d in terms if d in parallel and d not in weight_dims]
        taps = [d for d in terms if d in reduced and d in weight_dims]
        if len(terms) != 2 or len(outs) != 1 or len(taps) != 1 or offset < 0:
            return None
        (o,), (k,) = outs, taps
        if terms[o] < 1 or terms[k] < 1:
            return None
        windows.append(Window(position, o, k, terms[o], terms[k], offset))
    taps = {w.tap for w in windows}
    outs = {w.out for w in windows}
    channels = (reduced & image_plain & weight_dims) - taps
    features = (parallel & weight_dims) - image_plain - outs
    if not windows or len(channels) != 1 or len(features) != 1 or reduced != channels | taps:
        return None
    if len(taps) != len(windows) or len(outs) != len(windows):
        return None
    outer = tuple(d for d in reduction.out_dims if d not in outs | features)
    if any(d not in image_plain for d in outer) or image_plain - {*outer, *channels}:
        return None
    if weight_dims - {*outer, *channels, *features, *taps}:
        return None
    (c,), (f,) = channels, features
    return Convolution(reduction, image, weight, c, f, outer, tuple(windows))


def byte_size(element_type: Attribute) -> int | None:
    if isinstance(element_type, AnyFloat | IntegerType):
        width = (
            element_type.bitwidth if isinstance(element_type, AnyFloat) else element_type.width.data
        )
        return max(1, width // 8)
    return None


@dataclass(frozen=True)
class Tiling:
    box: tuple[int, ...]  # output positions per spatial dim (a block's box)
    patch: tuple[int, ...]  # image positions the box reads per spatial dim (with halo)
    chunk: int  # input channels staged at once
    rows: int  # out-channels per thread
    cols: int  # spatial positions per thread
    lanes_x: int
    lanes_y: int

    @property
    def features(self) -> int:
        return self.rows * self.lanes_y


def product(values: Sequence[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def plan(conv: Convolution, element_bytes: int) -> Tiling | None:
    """Tile sizes for `conv`: a box of at most MAX_BOX positions (the innermost spatial dim
    first), channels chunked so the patch and weight slice fit in SHARED_BYTES."""
    box: list[int] = []
    room = MAX_BOX
    for window in reversed(conv.windows):
        # Rows of 16 at most in 2-D and 3-D: a squarer box reads less halo per output.
        widest = room if len(box) or len(conv.windows) == 1 else MAX_ROW
        box.insert(0, max(1, min(conv.extent(window.out), room, widest)))
        room = max(1, room // box[0])
    patch = tuple(
        w.stride * (t - 1) + w.dilation * (conv.extent(w.tap) - 1) + 1
        for w, t in zip(conv.windows, box, strict=True)
    )
    positions = product(box)
    lanes_x = min(LANES_X, positions)
    cols = -(-positions // lanes_x)
    lanes_y = min(LANES_Y, conv.extent(conv.feature))
    rows = min(2, -(-conv.extent(conv.feature) // lanes_y))
    taps = product([conv.extent(w.tap) for w in conv.windows])
    chunk = min(MAX_CHUNK, conv.extent(conv.channel))
    while chunk > 0:
        words = chunk * product(patch) + rows * lanes_y * chunk * taps
        if words * element_bytes <= SHARED_BYTES:
            return Tiling(tuple(box), patch, chunk, rows, cols, lanes_x, lanes_y)
        chunk //= 2
    return None


@dataclass
class ConvKernel:
    conv: Convolution
    tiling: Tiling
    gk: GpuKernel
    tree: TreeKernel
    patch_buffer: SSAValue
    weight_buffer: SSAValue
    thread: SSAValue  # the thread's index in its block, ty * lanes_x + tx

    def load_patch(
        self, b: Body, c0: SSAValue, origin: Sequence[SSAValue], outer: dict[int, SSAValue]
    ) -> None:
        """Stage image[outer.., c0 + cc, origin + p ..] into the patch buffer, zeros outside."""
        conv, t = self.conv, self.tiling
        op = conv.reduction.op
        memory = self.gk.values[op.inputs[conv.image]]
        image_map = maps_of(op)[conv.image]
        shape = op.inputs[conv.image].type.get_shape()  # type: ignore[attr-defined]
        extents = [t.chunk, *t.patch]
        element_type = memory.type.element_type  # type: ignore[attr-defined]
        threads = t.lanes_x * t.lanes_y
        lane = self.thread

        def copy(bl: Body, e: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            cc, *p = bl.delinearize(e, extents)
            channel = bl.add(c0, cc)
            inside = bl.cmp(channel, bl.c(conv.extent(conv.channel)), "ult")
            at = [bl.add(o, q) for o, q in zip(origin, p, strict=True)]
            for window, index in zip(conv.windows, at, strict=True):
                below = bl.cmp(index, bl.c(shape[window.position]), "ult")
                inside = bl.andi(inside, below)

            spatial = {w.position: v for w, v in zip(conv.windows, at, strict=True)}
            plain = {**outer, conv.channel: channel}
            indices = [
                spatial[position] if position in spatial else plain[expr.position]  # type: ignore[attr-defined]
                for position, expr in enumerate(image_map.results)
            ]

            def load(inner: Body) -> Sequence[SSAValue]:
                return [inner.load(memory, indices)]

            (value,) = bl.when(inside, load, self.zero(element_type), types=[element_type])
            bl.store(value, self.patch_buffer, [cc, *p])
            return ()

        b.loop(lane, b.c(product(extents)), b.c(threads), copy, hint="e")

    def load_weights(self, b: Body, c0: SSAValue, f0: SSAValue, outer: dict[int, SSAValue]) -> None:
        """Stage weight[f0 + ff, c0 + cc, k..] into the weight buffer, zeros outside."""
        conv, t = self.conv, self.tiling
        op = conv.reduction.op
        memory = self.gk.values[op.inputs[conv.weight]]
        weight_map = maps_of(op)[conv.weight]
        taps = [conv.extent(w.tap) for w in conv.windows]
        extents = [t.features, t.chunk, *taps]
        element_type = memory.type.element_type  # type: ignore[attr-defined]
        lane = self.thread

        def copy(bl: Body, e: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            ff, cc, *k = bl.delinearize(e, extents)
            feature, channel = bl.add(f0, ff), bl.add(c0, cc)
            inside = bl.andi(
                bl.cmp(feature, bl.c(conv.extent(conv.feature)), "ult"),
                bl.cmp(channel, bl.c(conv.extent(conv.channel)), "ult"),
            )
            induction: list[SSAValue | None] = [None] * len(conv.reduction.ranges)
            for d, v in outer.items():
                induction[d] = v
            induction[conv.feature], induction[conv.channel] = feature, channel
            for window, tap in zip(conv.windows, k, strict=True):
                induction[window.tap] = tap

            def load(inner: Body) -> Sequence[SSAValue]:
                indices = access_indices(inner, weight_map, induction)  # type: ignore[arg-type]
                return [inner.load(memory, indices)]

            (value,) = bl.when(inside, load, self.zero(element_type), types=[element_type])
            bl.store(value, self.weight_buffer, [ff, cc, *k])
            return ()

        b.loop(lane, b.c(product(extents)), b.c(t.lanes_x * t.lanes_y), copy, hint="e")

    @staticmethod
    def zero(element_type: Attribute) -> Callable[[Body], Sequence[SSAValue]]:
        def make(inner: Body) -> Sequence[SSAValue]:
            return [inner.constants.scalar(0, element_type)]

        return make

    def product_of(self, b: Body, image: SSAValue, weight: SSAValue) -> SSAValue:
        """f(image, weight): the body's producer part on one value of each operand."""
        conv = self.conv
        op = conv.reduction.op
        values = {conv.image: image, conv.weight: weight, len(op.inputs): self.tree.identity(b)}
        mapping = emit_element(b, op, [], self.gk.values, values, skip=(conv.reduction.combine,))
        acc = op.body.block.args[-1]
        (x,) = (v for v in conv.reduction.combine.operands if v is not acc)
        return mapping.get(x, x)


def conv_kernel(kernel: func.FuncOp, module: ModuleOp) -> bool:
    ops = linalg_ops(kernel)
    reduction = match_reduction(ops)
    conv = match_convolution(reduction) if reduction else None
    if conv is None or reduction is None or 0 in reduction.ranges:
        return False
    element_type = reduction.combine.results[0].type
    size = byte_size(element_type)
    tiling = plan(conv, size) if size else None
    if tiling is None:
        return False
    t = tiling
    gk = GpuKernel.create(kernel.sym_name.data, kernel, ops)
    taps = [conv.extent(w.tap) for w in conv.windows]
    patch = gk.workgroup_buffer(element_type, [t.chunk, *t.patch], "patch")
    weights = gk.workgroup_buffer(element_type, [t.features, t.chunk, *taps], "weights")
    b = gk.body()
    tx, ty = b.thread_id("x"), b.thread_id("y")
    thread = b.add(b.mul(ty, b.c(t.lanes_x)), tx)
    tree = TreeKernel(reduction, gk, element_type)
    ck = ConvKernel(conv, t, gk, tree, patch, weights, thread)
    outs = [conv.extent(w.out) for w in conv.windows]
    box_counts = [-(-o // s) for o, s in zip(outs, t.box, strict=True)]
    box_index = b.delinearize(b.block_id("x"), box_counts)
    box_origin = [b.mul(i, b.c(s)) for i, s in zip(box_index, t.box, strict=True)]
    f0 = b.mul(b.block_id("y"), b.c(t.features))
    # Each thread's positions in the box, their local coordinates and whether they exist.
    local = [b.add(tx, b.c(t.lanes_x * v)) for v in range(t.cols)]
    # Lanes past the box read (and never store) position p mod box: in the patch.
    coords = [b.delinearize(b.remui(p, b.c(product(t.box))), list(t.box)) for p in local]
    # Where each position's window starts in the patch (tap 0), hoisted out of the loops.
    starts = [
        [b.mul(q, b.c(w.stride)) for q, w in zip(coords[v], conv.windows, strict=True)]
        for v in range(t.cols)
    ]
    channels = conv.extent(conv.channel)

    def chunk_step(
        bk: Body, ct: SSAValue, accs: Sequence[SSAValue], outer: dict[int, SSAValue]
    ) -> Sequence[SSAValue]:
        c0 = bk.mul(ct, bk.c(t.chunk))
        origin = [
            bk.mul(o, bk.c(w.stride))
            if w.offset == 0
            else bk.add(bk.mul(o, bk.c(w.stride)), bk.c(w.offset))
            for o, w in zip(box_origin, conv.windows, strict=True)
        ]
        ck.load_patch(bk, c0, origin, outer)
        ck.load_weights(bk, c0, f0, outer)
        bk.barrier()
        steps = bk.minsi(bk.c(t.chunk), bk.sub(bk.c(channels), c0))

        def channel_step(bc: Body, cc: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            return tap_steps(bc, cc, acc, 0, [])

        def tap_steps(
            bt: Body, cc: SSAValue, acc: Sequence[SSAValue], depth: int, k: list[SSAValue]
        ) -> Sequence[SSAValue]:
            if depth < len(conv.windows):
                return bt.loop(
                    bt.c(0),
                    bt.c(taps[depth]),
                    bt.c(1),
                    lambda bi, kv, a: tap_steps(bi, cc, a, depth + 1, [*k, kv]),
                    acc,
                    hint=f"k{depth}",
                )
            row_values = [
                bt.load(weights, [bt.add(ty, bt.c(t.lanes_y * u)), cc, *k]) for u in range(t.rows)
            ]
            col_values = []
            for v in range(t.cols):
                at = [
                    bt.add(start, bt.mul(kv, bt.c(w.dilation)))
                    for start, kv, w in zip(starts[v], k, conv.windows, strict=True)
                ]
                col_values.append(bt.load(patch, [cc, *at]))
            return [
                reduction.combined(
                    bt, acc[t.cols * u + v], ck.product_of(bt, col_values[v], row_values[u])
                )
                for u in range(t.rows)
                for v in range(t.cols)
            ]

        inner = bk.loop(bk.c(0), steps, bk.c(1), channel_step, accs, hint="cc")
        bk.barrier()
        return inner

    def output_tile(bt: Body, outer: dict[int, SSAValue]) -> None:
        identity = ck.tree.identity(bt)
        accs = bt.loop(
            bt.c(0),
            bt.c(-(-channels // t.chunk)),
            bt.c(1),
            lambda bk, ct, acc: chunk_step(bk, ct, acc, outer),
            [identity] * (t.rows * t.cols),
            hint="ct",
        )
        for u in range(t.rows):
            feature = bt.add(f0, bt.add(ty, bt.c(t.lanes_y * u)))
            for v in range(t.cols):
                inside = bt.cmp(feature, bt.c(conv.extent(conv.feature)), "ult")
                inside = bt.andi(inside, bt.cmp(local[v], bt.c(product(t.box)), "ult"))
                position = {**outer, conv.feature: feature}
                for w, o, q, extent in zip(conv.windows, box_origin, coords[v], outs, strict=True):
                    position[w.out] = bt.add(o, q)
                    inside = bt.andi(inside, bt.cmp(position[w.out], bt.c(extent), "ult"))

                def finish(
                    bf: Body, acc=accs[t.cols * u + v], position=position
                ) -> Sequence[SSAValue]:
                    ck.tree.finish(bf, acc, [position[d] for d in reduction.out_dims])
                    return ()

                bt.when(inside, finish)

    outer_extents = [conv.extent(d) for d in conv.outer]
    batches = product(outer_extents)
    if conv.outer:

        def per_batch(bb: Body, index: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            output_tile(
                bb, dict(zip(conv.outer, bb.delinearize(index, outer_extents), strict=True))
            )
            return ()

        b.loop(b.block_id("z"), b.c(batches), b.grid_dim("z"), per_batch, hint="bt")
    else:
        output_tile(b, {})
    grid = (
        product(box_counts),
        -(-conv.extent(conv.feature) // t.features),
        max(1, min(batches, MAX_GRID_Z)),
    )
    launch = gk.finish(grid, (t.lanes_x, t.lanes_y, 1), module)
    launch_kernel(module, kernel, [launch])
    return True


@dataclass(frozen=True)
class TessGpuConvPass(ModulePass):
    """Map convolution kernels to shared-memory direct convolutions (module docstring)."""

    name = "tess-gpu-conv"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernel_functions(op, "reduce"):
            conv_kernel(kernel, op)
        op.verify()


__all__ = ["Convolution", "TessGpuConvPass", "match_convolution"]
