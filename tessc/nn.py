"""
`tessc.nn`: the functions a training program needs, as composites of `tess` ops.

Each is a few Tensor operations inside a traced function, so it fuses with its neighbours
(and its gradient, built by `tess-autodiff`, fuses too) like hand-written code; nothing
here is a new op. The stable forms subtract the row maximum under `stop_gradient`: the max
is a constant shift of the softmax, so its gradient would be zero anyway, and without it
the gradient of `cross_entropy` is the textbook `(softmax(x) - one_hot(labels)) / N`, one
fused kernel, rather than that plus the tie-splitting terms of `max`.

    loss = ts.nn.cross_entropy(logits, labels)          # labels: integer class indices

The names and defaults follow `torch.nn.functional` (`dim=-1`, `reduction="mean"`), with
`axis=` accepted where NumPy/JAX spell it so. `gelu` is exact (`erf`) unless
`approximate="tanh"`. `layer_norm` and `rms_norm` normalise over the trailing
`normalized_shape` dims, flattened to one row dim so that `tess-fuse-epilogue` puts the row
statistics and the normalisation into one kernel (and their gradients into one more).
Convolution, pooling and `pad` (torch's last-dim-first form) are `tessc/nn_conv.py`'s, on
the `tess_conv` ops; the binary cross-entropies `tessc/nn_losses.py`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.frontend.function_forms import lift, one_hot, where
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located
from tessc.nn_attention import scaled_dot_product_attention
from tessc.nn_conv import (
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    max_pool1d,
    max_pool2d,
)
from tessc.nn_conv import torch_pad as pad
from tessc.nn_losses import binary_cross_entropy, binary_cross_entropy_with_logits
from tessc.random import uniform

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x: Any) -> Tensor:
    return lift(x, ())


def _dim(dim: int, axis: int | None) -> int:
    return dim if axis is None else axis


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise TessError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


@located
def relu(x: Any) -> Tensor:
    return _tensor(x).relu()


@located
def gelu(x: Any, approximate: str | bool = "none") -> Tensor:
    """`x/2 * (1 + erf(x / sqrt(2)))` (PyTorch's default), or with `approximate="tanh"`
    (JAX's `approximate=True`) `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`."""
    x = _tensor(x)
    if approximate in ("none", False):
        return 0.5 * x * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())
    if approximate not in ("tanh", True):
        raise TessError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    inner = (x + 0.044715 * x * x * x) * math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + inner.tanh())


@located
def logsumexp(x: Any, dim: int = -1, keepdim: bool = False, *, axis: int | None = None) -> Tensor:
    """`log(sum(exp(x), dim))`, computed as `m + log(sum(exp(x - m)))` with `m` the max."""
    return _tensor(x).logsumexp(_dim(dim, axis), keepdim)


@located
def softmax(x: Any, dim: int = -1, *, axis: int | None = None) -> Tensor:
    return _tensor(x).softmax(_dim(dim, axis))


@located
def log_softmax(x: Any, dim: int = -1, *, axis: int | None = None) -> Tensor:
    return _tensor(x).log_softmax(_dim(dim, axis))


@located
def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Tensor:
    """The softmax cross-entropy of `logits` `(N, C)` (or `(C,)`) against integer class
    `labels` `(N,)`, or against class probabilities of the logits' shape; averaged over N
    by default (`torch.nn.functional.cross_entropy`)."""
    logits = _tensor(logits)
    if logits.ndim == 0:
        raise TessError("cross_entropy needs logits with a class dim")
    classes = logits.shape[-1]
    lse = logsumexp(logits, -1)
    if isinstance(labels, Tensor) and labels.dtype.kind == "f":
        if labels.shape != logits.shape:
            raise TessError(
                f"probability targets must have the logits' shape {logits.shape}, "
                f"got {labels.shape}"
            )
        loss = lse * labels.sum(-1) - (labels * logits).sum(-1)
    else:
        label_shape = labels.shape if isinstance(labels, Tensor) else np.shape(labels)
        if tuple(label_shape) != logits.shape[:-1]:
            raise TessError(
                f"labels of shape {tuple(label_shape)} do not match logits of shape "
                f"{logits.shape} (one integer label per row)"
            )
        picked = (one_hot(labels, classes, logits.dtype) * logits).sum(-1)
        loss = lse - picked
    return _reduce(loss, reduction)


@located
def nll_loss(log_probs: Any, labels: Any, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of integer `labels` under `log_probs` `(N, C)`."""
    log_probs = _tensor(log_probs)
    picked = (one_hot(labels, log_probs.shape[-1], log_probs.dtype) * log_probs).sum(-1)
    return _reduce(-picked, reduction)


@located
def mse_loss(prediction: Any, target: Any, reduction: str = "mean") -> Tensor:
    """The mean (or sum) of squared differences, broadcasting as the operands do."""
    difference = _tensor(prediction) - target
    return _reduce(difference * difference, reduction)


@located
def silu(x: Any) -> Tensor:
    """`x * sigmoid(x)` (swish)."""
    x = _tensor(x)
    return x * x.sigmoid()


@located
def leaky_relu(x: Any, negative_slope: float = 0.01) -> Tensor:
    """`x` where positive, else `negative_slope * x`."""
    x = _tensor(x)
    return where(x > 0.0, x, x * negative_slope)


def _normalized_rows(x: Tensor, normalized_shape: Any, name: str) -> tuple[Tensor, tuple[int, ...]]:
    """`x` as `(rows, N)`, N the product of the trailing `normalized_shape` dims it must end
    with, and the shape to give the result back."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    if not isinstance(shape, tuple | list) or not all(
        isinstance(n, int | np.integer) for n in shape
    ):
        raise TessError(
            f"{name}: normalized_shape must be an int or a sequence of ints, "
            f"got {normalized_shape!r}"
        )
    shape = tuple(int(n) for n in shape)
    if not shape or x.shape[len(x.shape) - len(shape) :] != shape or len(shape) > x.ndim:
        raise TessError(
            f"{name}: normalized_shape {shape} is not the trailing dims of the input of "
            f"shape {x.shape}"
        )
    rows = (math.prod(x.shape[: x.ndim - len(shape)]), math.prod(shape))
    return (x if x.shape == rows else x.reshape(rows)), shape


def _affine(y: Tensor, parameter: Any, shape: tuple[int, ...], name: str, kind: str) -> Tensor:
    """`y` (rows, N) times / plus `parameter` of `normalized_shape`."""
    if parameter is None:
        return y
    p = lift(parameter, (y,))
    if p.shape != shape:
        raise TessError(
            f"{name}: {kind} of shape {p.shape} does not match normalized_shape {shape}"
        )
    if len(shape) > 1:
        p = p.reshape((math.prod(shape),))
    return y * p if kind == "weight" else y + p


@located
def layer_norm(
    x: Any,
    normalized_shape: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Tensor:
    """`(x - mean) / sqrt(var + eps) * weight + bias`, the mean and the (biased) variance
    over the trailing `normalized_shape` dims (`torch.nn.functional.layer_norm`)."""
    x = _tensor(x)
    rows, shape = _normalized_rows(x, normalized_shape, "layer_norm")
    centred = rows - rows.mean(-1, keepdim=True)
    variance = (centred * centred).mean(-1, keepdim=True)
    y = centred * (variance + eps).sqrt().reciprocal()
    y = _affine(y, weight, shape, "layer_norm", "weight")
    y = _affine(y, bias, shape, "layer_norm", "bias")
    return y if y.shape == x.shape else y.reshape(x.shape)


@located
def rms_norm(x: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Tensor:
    """`x / sqrt(mean(x^2) + eps) * weight` over the trailing `normalized_shape` dims;
    `eps=None` is the dtype's machine epsilon (`torch.nn.functional.rms_norm`)."""
    x = _tensor(x)
    rows, shape = _normalized_rows(x, normalized_shape, "rms_norm")
    if eps is None:
        eps = float(np.finfo(x.dtype).eps) if x.dtype.kind == "f" else 1e-7
    # Dividing (not multiplying by the reciprocal) makes the gradient's row sum read the
    # norm, so `tess-fuse-epilogue` chains it into the forward's group: one kernel.
    y = rows / ((rows * rows).mean(-1, keepdim=True) + eps).sqrt()
    y = _affine(y, weight, shape, "rms_norm", "weight")
    return y if y.shape == x.shape else y.reshape(x.shape)


@located
def embedding(indices: Any, weight: Any) -> Tensor:
    """The rows of `weight` `(num_embeddings, dim)` at integer `indices` (any shape):
    `(*indices.shape, dim)` (`torch.nn.functional.embedding`). A `take`, so its gradient
    is a `scatter_add` of the output gradient into the table."""
    weight = _tensor(weight)
    if weight.ndim != 2:
        raise TessError(
            f"embedding needs a weight of shape (num_embeddings, dim), got {weight.shape}"
        )
    return weight.take(indices, 0)


__all__ = [
    "avg_pool1d",
    "avg_pool2d",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "embedding",
    "gelu",
    "layer_norm",
    "leaky_relu",
    "log_softmax",
    "logsumexp",
    "max_pool1d",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "pad",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]


@located
def dropout(x: Any, rate: float, key: Any) -> Tensor:
    """Inverted dropout: each element kept with probability `1 - rate` and scaled by
    `1 / (1 - rate)`, else 0; `rate` 0 is the identity. The mask is drawn from `key`
    (`tessc.random`) inside the kernel that applies it, so no mask buffer exists, and the
    gradient recomputes the same mask."""
    if not 0.0 <= float(rate) < 1.0:
        raise TessError(f"rate: expected 0 <= rate < 1, got {rate}")
    x = _tensor(x)
    if float(rate) == 0.0:
        return x
    keep = uniform(key, x.shape, x.dtype) >= float(rate)
    return where(keep, x * (1.0 / (1.0 - float(rate))), 0.0)
