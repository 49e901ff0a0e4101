"""
Convolution, pooling and padding with PyTorch's and NumPy's signatures, on traced Tensors.

    y = ts.nn.conv2d(x, w, b, stride=1, padding="same")    # NCHW input, OIHW weight
    y = ts.nn.max_pool2d(y.relu(), 2)
    z = ts.pad(x, ((0, 0), (1, 2)), constant_values=-1.0)  # NumPy's pad; ts.nn.pad: torch's

Each reads the argument forms (an int for every spatial dim, `"same"`/`"valid"`, torch's
last-dim-first pad tuple) into the explicit properties of the `tess_conv` ops the builder
makes (`tess.conv`, `tess.pool`, `tess.pad`); the bias is a broadcast add, which fuses
into the conv's epilogue. Unbatched inputs (`(C, *spatial)`) are accepted as PyTorch does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.frontend.function_forms import lift
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located


def _per_dim(value: Any, spatial: int, name: str) -> tuple[int, ...]:
    """An int for every spatial dim, or one int per dim."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return (int(value),) * spatial
    values = tuple(value) if isinstance(value, Sequence) else ()
    if len(values) != spatial or not all(
        isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values
    ):
        raise TessError(f"{name} must be an int or {spatial} ints, got {value!r}")
    return tuple(int(v) for v in values)


def _batched(x: Tensor, spatial: int, name: str) -> tuple[Tensor, bool]:
    if x.ndim == spatial + 1:
        return x.unsqueeze(0), True
    if x.ndim != spatial + 2:
        raise TessError(
            f"{name} expects a ({'N, ' if spatial else ''}C, {spatial} spatial dims) input "
            f"of rank {spatial + 1} or {spatial + 2}, got shape {x.shape}"
        )
    return x, False


def _conv(
    spatial: int,
    name: str,
    x: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> Tensor:
    x, weight = lift(x, (weight,)), lift(weight, (x,))
    x, unbatched = _batched(x, spatial, name)
    strides = _per_dim(stride, spatial, "stride")
    dilations = _per_dim(dilation, spatial, "dilation")
    if weight.ndim != spatial + 2:
        raise TessError(f"{name} expects a weight of rank {spatial + 2}, got shape {weight.shape}")
    kernel = weight.shape[2:]
    if padding == "valid":
        low = high = (0,) * spatial
    elif padding == "same":
        if any(s != 1 for s in strides):
            raise TessError(f"{name}: padding='same' needs stride 1, got {stride!r}")
        total = [d * (k - 1) for d, k in zip(dilations, kernel, strict=True)]
        low = tuple(t // 2 for t in total)  # PyTorch puts the odd element at the end
        high = tuple(t - lo for t, lo in zip(total, low, strict=True))
    elif isinstance(padding, str):
        raise TessError(f"{name}: padding must be an int, ints, 'same' or 'valid', got {padding!r}")
    else:
        low = high = _per_dim(padding, spatial, "padding")
    if not isinstance(groups, int | np.integer) or isinstance(groups, bool):
        raise TessError(f"{name}: groups must be an int, got {groups!r}")
    builder = x.trace.builder
    y = Tensor(
        builder.conv(x.value, weight.value, strides, dilations, low, high, int(groups)), x.trace
    )
    if bias is not None:
        b = lift(bias, (y,))
        if b.shape != (y.shape[1],):
            raise TessError(
                f"{name}: bias of shape {b.shape} does not match the {y.shape[1]} output channels"
            )
        y = y + b.reshape((y.shape[1],) + (1,) * spatial)
    return y.squeeze(0) if unbatched else y


@located
def conv1d(
    x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
    dilation: Any = 1, groups: int = 1,
) -> Tensor:  # fmt: skip
    """`torch.nn.functional.conv1d`: `(N, C, W)` input, `(F, C/groups, K)` weight."""
    return _conv(1, "conv1d", x, weight, bias, stride, padding, dilation, groups)


@located
def conv2d(
    x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
    dilation: Any = 1, groups: int = 1,
) -> Tensor:  # fmt: skip
    """`torch.nn.functional.conv2d`: `(N, C, H, W)` input, `(F, C/groups, KH, KW)` weight."""
    return _conv(2, "conv2d", x, weight, bias, stride, padding, dilation, groups)


def _pool(
    spatial: int, kind: str, name: str, x: Any, kernel_size: Any, stride: Any, padding: Any
) -> Tensor:
    x = lift(x, ())
    x, unbatched = _batched(x, spatial, name)
    kernel = _per_dim(kernel_size, spatial, "kernel_size")
    strides = kernel if stride is None else _per_dim(stride, spatial, "stride")
    pads = _per_dim(padding, spatial, "padding")
    y = Tensor(x.trace.builder.pool(x.value, kind, kernel, strides, pads, pads), x.trace)
    return y.squeeze(0) if unbatched else y


@located
def max_pool1d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """`torch.nn.functional.max_pool1d` (padding is -inf; the gradient goes to the first
    maximum of each window)."""
    return _pool(1, "max", "max_pool1d", x, kernel_size, stride, padding)


@located
def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """`torch.nn.functional.max_pool2d`."""
    return _pool(2, "max", "max_pool2d", x, kernel_size, stride, padding)


@located
def avg_pool1d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """`torch.nn.functional.avg_pool1d` (`count_include_pad=True`: padding counts as 0)."""
    return _pool(1, "avg", "avg_pool1d", x, kernel_size, stride, padding)


@located
def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """`torch.nn.functional.avg_pool2d` (`count_include_pad=True`)."""
    return _pool(2, "avg", "avg_pool2d", x, kernel_size, stride, padding)


@located
def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Tensor:
    """NumPy's `pad` in mode "constant": `pad_width` an int, a `(before, after)` pair, or
    one pair per dim."""
    x = lift(x, ())
    if mode != "constant":
        raise TessError(f"pad: only mode='constant' is available, got {mode!r}")
    try:
        widths = np.broadcast_to(np.asarray(pad_width), (x.ndim, 2))
    except ValueError:
        raise TessError(
            f"pad_width {pad_width!r} does not give a pair per dim of {x.shape}"
        ) from None
    if widths.dtype.kind not in "iu":
        raise TessError(f"pad_width must be integers, got {pad_width!r}")
    if not isinstance(constant_values, int | float | np.number):
        raise TessError(f"pad: constant_values must be a number, got {constant_values!r}")
    low, high = [int(w) for w in widths[:, 0]], [int(w) for w in widths[:, 1]]
    return Tensor(x.trace.builder.pad(x.value, low, high, float(constant_values)), x.trace)


@located
def torch_pad(x: Any, pad: Sequence[int], value: float = 0) -> Tensor:
    """`torch.nn.functional.pad` in mode "constant": `pad` is `(left, right)` of the last
    dim, then of the one before, and so on."""
    x = lift(x, ())
    pairs = list(pad)
    if len(pairs) % 2 or len(pairs) // 2 > x.ndim:
        raise TessError(f"pad {tuple(pad)!r} must have an even length of at most 2 * {x.ndim}")
    low, high = [0] * x.ndim, [0] * x.ndim
    for i in range(len(pairs) // 2):
        low[x.ndim - 1 - i], high[x.ndim - 1 - i] = int(pairs[2 * i]), int(pairs[2 * i + 1])
    return Tensor(x.trace.builder.pad(x.value, low, high, float(value)), x.trace)


__all__ = [
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "max_pool1d",
    "max_pool2d",
    "pad",
    "torch_pad",
]
