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
`axis=` accepted where NumPy/JAX spell it so. `gelu` is the tanh approximation (JAX's
default, torch's `approximate="tanh"`): tess has no `erf`. Convolution, pooling and `pad`
(torch's last-dim-first form) are `tessc/nn_conv.py`'s, on the `tess_conv` ops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.frontend.function_forms import lift, one_hot, stop_gradient
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located
from tessc.nn_conv import (
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    max_pool1d,
    max_pool2d,
)
from tessc.nn_conv import torch_pad as pad

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(x: Any) -> Tensor:
    return lift(x, ())


def _dim(dim: int, axis: int | None) -> int:
    return dim if axis is None else axis


def _shift(x: Tensor, dim: int) -> Any:
    """The max over `dim` that the stable forms subtract; 0 over an empty dim, which has
    no max (and then no element to shift)."""
    if -x.ndim <= dim < x.ndim and x.shape[dim] == 0:
        return 0.0
    return stop_gradient(x.amax(dim, keepdim=True))


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
def gelu(x: Any, approximate: str | bool = "tanh") -> Tensor:
    """`x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`."""
    if approximate not in ("tanh", True):
        raise TessError("gelu: only approximate='tanh' is available (tess has no erf op)")
    x = _tensor(x)
    inner = (x + 0.044715 * x * x * x) * math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + inner.tanh())


@located
def logsumexp(x: Any, dim: int = -1, keepdim: bool = False, *, axis: int | None = None) -> Tensor:
    """`log(sum(exp(x), dim))`, computed as `m + log(sum(exp(x - m)))` with `m` the max."""
    x = _tensor(x)
    d = _dim(dim, axis)
    shift = _shift(x, d)
    result = shift + (x - shift).exp().sum(d, keepdim=True).log()
    return result if keepdim else result.sum(d)  # a sum over one element: drops the dim


@located
def softmax(x: Any, dim: int = -1, *, axis: int | None = None) -> Tensor:
    x = _tensor(x)
    d = _dim(dim, axis)
    e = (x - _shift(x, d)).exp()
    return e / e.sum(d, keepdim=True)


@located
def log_softmax(x: Any, dim: int = -1, *, axis: int | None = None) -> Tensor:
    x = _tensor(x)
    d = _dim(dim, axis)
    return x - logsumexp(x, d, keepdim=True)


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


__all__ = [
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "gelu",
    "log_softmax",
    "logsumexp",
    "max_pool1d",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "pad",
    "relu",
    "softmax",
]
