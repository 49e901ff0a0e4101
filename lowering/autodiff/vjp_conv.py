"""
The VJP rules of the convolution ops (`tessc.dialects.tess_conv`), merged into
`vjp_rules.VJP_RULES`. Each adjoint is built of tess ops, so it lowers and fuses like the
forward:

- conv, input: a transposed convolution as a `tess.conv`: the output gradient dilated by
  the stride and padded by `d*(k-1)` (one `tess.unslice`), convolved with the kernel
  flipped (`tess.slice`, stride -1) and its channels swapped per group, then cropped to
  the input (a slice, only where the forward padding, low or high, exceeds `d*(k-1)`);
  strided (one group): per phase `r` of the padded input, a stride-1 conv with only the
  taps `k*d = r (mod s)`, interleaved (`concatenate`, `reshape`) and cropped: no product
  with the zeros a dilated gradient would hold (autodiff/README.md);
- conv, weight: a correlation of input and output gradient as a `tess.conv`, with the
  batch as the reduced channels: `dw[f, c, k] = sum_{n,o} xp[n, g*C/G + c, o*s + k*d] *
  dy[n, f, o]`, i.e. stride and dilation swapped; the bias gradient is the sum the
  broadcast add's rule makes;
- max pool: `tess.unpool` routed by the first maximum of each window (`tess.pool` kind
  argmax), as PyTorch; avg pool: `tess.unpool` spreading `dy / window size`;
- pad: the slice of the gradient at the input's position.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects.builder import TessBuilder
from tessc.dialects.tess_base import element_type_of, tensor_shape
from tessc.dialects.tess_conv import ConvOp, PadOp, PoolOp, UnpoolOp
from tessc.dialects.tess_index import UnsliceOp

Contributions = list[SSAValue | None]
Rule = Callable[[TessBuilder, Operation, SSAValue, tuple[bool, ...]], Contributions]


def _swapped_weight(emit: TessBuilder, op: ConvOp) -> SSAValue:
    """The weight with its channels swapped per group: (F, C/G, k) -> (C, F/G, k)."""
    w_shape = tensor_shape(op.weight)
    groups, features, cg, kernel = op.group_count, w_shape[0], w_shape[1], w_shape[2:]
    spatial = len(kernel)
    # (F, C/G, k) -> (G, F/G, C/G, k) -> (G, C/G, F/G, k) -> (C, F/G, k).
    if groups == 1:
        return emit.permute(op.weight, (1, 0, *range(2, 2 + spatial)))
    w = emit.reshape(op.weight, (groups, features // groups, cg, *kernel))
    w = emit.permute(w, (0, 2, 1, *range(3, 3 + spatial)))
    return emit.reshape(w, (groups * cg, features // groups, *kernel))


@dataclass(frozen=True)
class _Phase:
    """The taps of one dim that reach the padded-input positions `q * s + r`: `count` taps
    `first + t * step`, read by a stride-1 conv of the output gradient (low padding `low`,
    dilation `dilation`) with the kernel reversed, `length` outputs (a high padding of
    `high`, or a crop of `-high`)."""

    first: int
    count: int
    step: int
    dilation: int
    low: int
    high: int
    length: int


def _phase(n: int, k: int, s: int, d: int, lo: int, hi: int, out: int, r: int) -> _Phase:
    g = math.gcd(d, s)
    step, dilation = s // g, d // g
    first = next((j for j in range(min(step, k)) if (j * d - r) % s == 0), k)
    count = len(range(first, k, step))
    length = -(-(n + lo + hi) // s)  # positions q * s + r of the padded input, every r
    if not count:
        return _Phase(first, 0, step, dilation, 0, 0, length)
    shift = (first * d - r) // s  # the output gradient at q - shift - t * dilation
    low = shift + (count - 1) * dilation
    return _Phase(first, count, step, dilation, low, length - out - shift, length)


def _strided_input_gradient(emit: TessBuilder, op: ConvOp, grad: SSAValue) -> SSAValue:
    """The input gradient of a strided conv without the zeros a dilated output gradient
    would multiply: padded-input positions `q * s + r` take only the taps `k` with
    `k * d = r (mod s)`, a stride-1 conv per phase `r` (s^2 of them in 2-D, each with
    about 1/s^2 of the taps), interleaved (concatenate + reshape) and cropped."""
    x_shape, out_shape = tensor_shape(op.input), tensor_shape(grad)
    kernel = tensor_shape(op.weight)[2:]
    spatial, groups = len(kernel), op.group_count
    w = _swapped_weight(emit, op)
    channels, per_group = tensor_shape(w)[:2]
    dims = [
        (x_shape[2 + i], kernel[i], op.static_strides[i], op.static_dilations[i],
         op.static_low[i], op.static_high[i], out_shape[2 + i])
        for i in range(spatial)
    ]  # fmt: skip
    phases = [[_phase(*dim, r) for r in range(dim[2])] for dim in dims]
    lengths = [p[0].length for p in phases]

    def phase_gradient(chosen: Sequence[_Phase]) -> SSAValue:
        shape = (x_shape[0], channels, *lengths)
        if any(p.count == 0 for p in chosen):
            return emit.fill(0.0, shape, element_type_of(grad))
        taps = emit.slice(
            w,
            [0, 0, *(p.first + (p.count - 1) * p.step for p in chosen)],
            [1, 1, *(-p.step for p in chosen)],
            [channels, per_group, *(p.count for p in chosen)],
        )
        dx = emit.conv(
            grad, taps, [1] * spatial, [p.dilation for p in chosen], [p.low for p in chosen],
            [max(p.high, 0) for p in chosen], groups,
        )  # fmt: skip
        if tensor_shape(dx) != shape:
            dx = emit.slice(dx, [0] * len(shape), [1] * len(shape), shape)
        return dx

    def interleave(prefix: tuple[_Phase, ...]) -> SSAValue:
        """The gradient at every phase of dims `len(prefix)`... given the earlier ones."""
        level = len(prefix)
        if level == spatial:
            return phase_gradient(prefix)
        parts = [interleave((*prefix, p)) for p in phases[level]]
        if len(parts) == 1:
            return parts[0]
        shape = tensor_shape(parts[0])
        axis = 2 + level
        stacked = [emit.reshape(p, (*shape[: axis + 1], 1, *shape[axis + 1 :])) for p in parts]
        both = emit.concatenate(stacked, axis + 1)
        return emit.reshape(both, (*shape[:axis], shape[axis] * len(parts), *shape[axis + 1 :]))

    full = interleave(())
    offsets = [0, 0, *op.static_low]
    return emit.slice(full, offsets, [1] * len(x_shape), x_shape)


def _conv_input_gradient(emit: TessBuilder, op: ConvOp, grad: SSAValue) -> SSAValue:
    if any(s > 1 for s in op.static_strides) and op.group_count == 1:
        # Grouped: the conv's lowering reshapes its weight, and a tap slice of the weight
        # is a strided view, which codegen cannot reshape; those keep the dilated form.
        return _strided_input_gradient(emit, op, grad)
    x_shape, w_shape = tensor_shape(op.input), tensor_shape(op.weight)
    out_shape = tensor_shape(grad)
    groups = op.group_count
    kernel = w_shape[2:]
    spatial = len(kernel)
    offsets, lengths, crops = [0, 0], list(out_shape[:2]), [0] * spatial
    for i in range(spatial):
        n, k, d = x_shape[2 + i], kernel[i], op.static_dilations[i]
        lo, hi = op.static_low[i], op.static_high[i]
        reach = d * (k - 1)
        if lo <= reach and hi <= reach:  # the padding is inside the transposed conv's
            offsets.append(reach - lo)
            lengths.append(n + reach)
        else:  # the gradient of the whole padded input, then cropped
            offsets.append(reach)
            lengths.append(n + lo + hi + reach)
            crops[i] = lo
    strides = [1, 1, *op.static_strides]
    dilated = emit.insert(UnsliceOp(grad, offsets, strides, lengths))
    w = _swapped_weight(emit, op)  # k reversed below
    w_shape_t = tensor_shape(w)
    w = emit.slice(
        w,
        [0, 0, *(k - 1 for k in kernel)],
        [1, 1, *([-1] * spatial)],
        w_shape_t,
    )
    zeros = [0] * spatial
    dx = emit.conv(dilated, w, [1] * spatial, op.static_dilations, zeros, zeros, groups)
    if tensor_shape(dx) != x_shape:  # the high padding is cropped too, also where lo = 0
        dx = emit.slice(dx, [0, 0, *crops], [1] * len(x_shape), x_shape)
    return dx


def _conv_weight_gradient(emit: TessBuilder, op: ConvOp, grad: SSAValue) -> SSAValue:
    x_shape, w_shape = tensor_shape(op.input), tensor_shape(op.weight)
    out_shape = tensor_shape(grad)
    groups = op.group_count
    batch, channels = x_shape[:2]
    cg = channels // groups
    spatial = len(x_shape) - 2
    kernel = w_shape[2:]
    # (N, C, h) -> (N, G, C/G, h) -> (C/G, G, N, h) -> (C/G, G*N, h): batch as channels.
    if groups == 1:
        x = emit.permute(op.input, (1, 0, *range(2, 2 + spatial)))
    else:
        x = emit.reshape(op.input, (batch, groups, cg, *x_shape[2:]))
        x = emit.permute(x, (2, 1, 0, *range(3, 3 + spatial)))
        x = emit.reshape(x, (cg, groups * batch, *x_shape[2:]))
    dy = emit.permute(grad, (1, 0, *range(2, 2 + spatial)))  # (F, N, o)
    high = []
    for i in range(spatial):
        n, k, o = x_shape[2 + i], kernel[i], out_shape[2 + i]
        s, d = op.static_strides[i], op.static_dilations[i]
        lo, hi = op.static_low[i], op.static_high[i]
        unused = n + lo + hi - 1 - s * (o - 1) - d * (k - 1)  # padded tail no window reads
        high.append(max(hi - unused, 0))
    dw = emit.conv(x, dy, op.static_dilations, op.static_strides, op.static_low, high, groups)
    if tensor_shape(dw)[2:] != tuple(kernel):
        full = tensor_shape(dw)
        dw = emit.slice(dw, [0] * len(full), [1] * len(full), (*full[:2], *kernel))
    return emit.permute(dw, (1, 0, *range(2, 2 + spatial)))


def _conv_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, ConvOp)
    return [
        _conv_input_gradient(emit, op, grad) if needs[0] else None,
        _conv_weight_gradient(emit, op, grad) if needs[1] else None,
    ]


def _pad_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, PadOp)
    shape = tensor_shape(op.input)
    return [emit.slice(grad, op.static_low, [1] * len(shape), shape)]


def _window(op: PoolOp | UnpoolOp) -> tuple[tuple[int, ...], ...]:
    return op.static_kernel, op.static_strides, op.static_low, op.static_high


def _pool_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, PoolOp)
    shape = tensor_shape(op.input)
    if op.pool_kind == "argmax":
        return [None]  # an index: no gradient
    if op.pool_kind == "max":
        first = emit.pool(op.input, "argmax", *_window(op))
        return [emit.unpool(grad, first, *_window(op), shape)]
    count = 1
    for k in op.static_kernel:
        count *= k
    spread = emit.unpool(grad, None, *_window(op), shape)
    return [emit.mul(spread, emit.scalar(1.0 / count, spread))]


def routed_relu_grad(emit: TessBuilder, y: SSAValue, grad: SSAValue) -> SSAValue | None:
    """relu's gradient where `grad` is max pooling's, routed to the first maximum of each
    window of `y` (relu's output), or None. The mask matters at those maxima only, where
    `x > 0` iff the window's max is: `unpool(dy * (maxpool(y) > 0), first)` reads no
    full-size activation but the argmax pool's input, so the forward conv + relu + pool
    can fuse with that argmax (lowering/fusion/fuse_pool.py) and write no conv output."""
    unpool = grad.owner
    if not isinstance(unpool, UnpoolOp) or unpool.indices is None:
        return None
    first = unpool.indices.owner
    if not isinstance(first, PoolOp) or first.pool_kind != "argmax" or first.input is not y:
        return None
    window = _window(first)
    if window != _window(unpool) or any(window[2]) or any(window[3]):
        return None
    forward = [
        u.operation.results[0]
        for u in y.uses
        if isinstance(u.operation, PoolOp)
        and u.operation.pool_kind == "max"
        and _window(u.operation) == window
    ]
    pooled = forward[0] if forward else emit.pool(y, "max", *window)
    routed = emit.mul(unpool.grad, emit.gt(pooled, 0.0))
    return emit.unpool(routed, unpool.indices, *window, tensor_shape(y))


def _unpool_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, UnpoolOp)
    if op.indices is not None:
        message = "tess-autodiff: the gradient of max pooling's gradient is not available"
        op.emit_error(message, PassFailedException(message))  # located where tessc-opt runs
        raise PassFailedException(message)
    # Each window sums the gradient at its taps: an avg pool times the window size.
    count = 1
    for k in op.static_kernel:
        count *= k
    window_sums = emit.pool(grad, "avg", *_window(op))
    return [emit.mul(window_sums, emit.scalar(float(count), window_sums))]


CONV_VJP_RULES: dict[type[Operation], Rule] = {
    ConvOp: _conv_rule,
    PadOp: _pad_rule,
    PoolOp: _pool_rule,
    UnpoolOp: _unpool_rule,
}

__all__ = ["CONV_VJP_RULES", "routed_relu_grad"]
