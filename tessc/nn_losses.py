"""
The binary cross-entropy losses of `tessc.nn`, as `torch.nn.functional` defines them.

`binary_cross_entropy(p, y)` is `-(y log p + (1 - y) log(1 - p))` with each log clamped
at -100, as PyTorch clamps it, so that p = 0 or 1 gives a finite loss (and a finite
gradient: there the clamped log's is 0, where PyTorch's backward divides by 1e-12).
`binary_cross_entropy_with_logits(x, y)` is the same loss of `sigmoid(x)` in the stable
form `max(x, 0) - x y + log(1 + exp(-|x|))` (with `pos_weight` p:
`(1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))`), which neither
overflows nor loses the small probabilities that `log(sigmoid(x))` rounds to 0.
"""

from __future__ import annotations

from typing import Any

from tessc.dialects.builder_types import TessError
from tessc.frontend.function_forms import lift, where
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located

_REDUCTIONS = ("mean", "sum", "none")


def _reduced(loss: Tensor, weight: Any, reduction: str) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise TessError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _float(x: Any, name: str) -> Tensor:
    tensor = lift(x, ())
    if tensor.dtype.kind != "f":
        raise TessError(f"{name} must be a float tensor, got {tensor.dtype}")
    return tensor


def _same_shape(input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        raise TessError(
            f"target of shape {target.shape} differs from input of shape {input.shape} "
            "(PyTorch requires them equal)"
        )


def _clamped_log(p: Tensor) -> Tensor:
    """`max(log p, -100)`, whose gradient is 0 rather than NaN (0 * inf) where p is 0."""
    positive = p > 0.0
    return where(positive, where(positive, p, 1.0).log(), -100.0).maximum(-100.0)


@located
def binary_cross_entropy(
    input: Any, target: Any, weight: Any = None, reduction: str = "mean"
) -> Tensor:
    """PyTorch's `binary_cross_entropy` of probabilities `input` (module docstring)."""
    p = _float(input, "binary_cross_entropy's input")
    y = lift(target, (p,)).astype(p.dtype)
    _same_shape(p, y)
    log_p, log_not_p = _clamped_log(p), _clamped_log(1.0 - p)
    return _reduced(-(y * log_p + (1.0 - y) * log_not_p), weight, reduction)


@located
def binary_cross_entropy_with_logits(
    input: Any, target: Any, weight: Any = None, reduction: str = "mean", pos_weight: Any = None
) -> Tensor:
    """PyTorch's `binary_cross_entropy_with_logits` (module docstring)."""
    x = _float(input, "binary_cross_entropy_with_logits's input")
    y = lift(target, (x,)).astype(x.dtype)
    _same_shape(x, y)
    softplus_of_minus_abs = (1.0 + (-abs(x)).exp()).log()
    if pos_weight is None:
        loss = x.maximum(0.0) - x * y + softplus_of_minus_abs
    else:
        scale = 1.0 + (pos_weight - 1.0) * y
        loss = (1.0 - y) * x + scale * (softplus_of_minus_abs + (-x).maximum(0.0))
    return _reduced(loss, weight, reduction)


__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits"]
