"""
The reference interpreter's attention ops (`tessc.reference` registers them): the
obviously correct NumPy form, which builds the `(L, S)` scores the compiled kernels never
build. A row whose scores are all `-inf` gives 0 and a logsumexp of `-inf`
(`tessc.dialects.tess_attention`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.ir import Operation

from tessc.dialects.tess_attention import AttentionGradOp, AttentionLseOp, AttentionOp


def scores(op: AttentionOp | AttentionLseOp | AttentionGradOp, q, k, mask) -> np.ndarray:
    """`scale * q @ k^T`, masked: `(..., L, S)`."""
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * q.dtype.type(op.scale_value)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if op.is_causal:
        rows, cols = s.shape[-2:]
        s = np.where(np.tril(np.ones((rows, cols), np.bool_)), s, -np.inf)
    return s.astype(q.dtype, copy=False)


def logsumexp(s: np.ndarray) -> np.ndarray:
    """Over the last dim; `-inf` for an empty or all `-inf` row."""
    if s.shape[-1] == 0:
        return np.full(s.shape[:-1], -np.inf, s.dtype)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(s - top).sum(-1, keepdims=True)) + top)[..., 0]


def probabilities(s: np.ndarray, lse: np.ndarray) -> np.ndarray:
    """`exp(s - lse)`, 0 in a row that attends to nothing."""
    finite = np.isfinite(lse)[..., None]
    return np.where(finite, np.exp(s - np.where(finite, lse[..., None], 0)), 0).astype(s.dtype)


def _attention(op: AttentionOp, operands: list[np.ndarray]) -> np.ndarray:
    q, k, v, *mask = operands
    s = scores(op, q, k, mask[0] if mask else None)
    return np.matmul(probabilities(s, logsumexp(s)), v)


def _attention_lse(op: AttentionLseOp, operands: list[np.ndarray]) -> np.ndarray:
    q, k, *mask = operands
    return logsumexp(scores(op, q, k, mask[0] if mask else None))


def _attention_grad(op: AttentionGradOp, operands: list[np.ndarray]) -> np.ndarray:
    q, k, v, lse, delta, dout, *mask = operands
    p = probabilities(scores(op, q, k, mask[0] if mask else None), lse)
    if op.wrt_name == "v":
        return np.matmul(np.swapaxes(p, -1, -2), dout)
    ds = p * (np.matmul(dout, np.swapaxes(v, -1, -2)) - delta[..., None])
    ds = ds * q.dtype.type(op.scale_value)
    return np.matmul(ds, k) if op.wrt_name == "q" else np.matmul(np.swapaxes(ds, -1, -2), q)


ATTENTION_IMPLEMENTATIONS: dict[type[Operation], Callable[..., np.ndarray]] = {
    AttentionOp: _attention,
    AttentionLseOp: _attention_lse,
    AttentionGradOp: _attention_grad,
}

__all__ = ["ATTENTION_IMPLEMENTATIONS", "logsumexp", "probabilities", "scores"]
