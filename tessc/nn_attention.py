"""
`ts.nn.scaled_dot_product_attention`, PyTorch's signature and semantics, on the fused
`tess.attention` op.

    out = ts.nn.scaled_dot_product_attention(q, k, v, is_causal=True)   # (..., L, E) each

The batch dims of `q`, `k`, `v` broadcast; the mask (bool: True attends; or float: added to
the scores) broadcasts to `(..., L, S)` and is given the op at the operands' rank, each dim
1 or full, so a `(L, S)` mask is never copied per head. The op lowers to kernels that stream
the keys with an online softmax (no `(L, S)` buffer, forward or backward: see
`tessc.dialects.tess_attention`). A row that attends to nothing gives 0 (PyTorch's
`_safe_softmax`). `dropout_p > 0` needs `dropout_key` (`ts.random`), and is the composite
`dropout(softmax(scores)) @ v`, which builds the scores.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.dialects.tess_base import broadcast_shapes
from tessc.frontend.function_forms import lift, stop_gradient, where
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located
from tessc.frontend.vocabulary import tril
from tessc.random import uniform


def _batched(tensors: list[Tensor]) -> list[Tensor]:
    names = ("query", "key", "value")
    for name, t in zip(names, tensors, strict=True):
        if t.ndim < 2:
            raise TessError(
                f"scaled_dot_product_attention: {name} must be (..., L, E), got shape {t.shape}"
            )
    try:
        batch = broadcast_shapes(*(t.shape[:-2] for t in tensors))
    except ValueError:
        shapes = ", ".join(str(t.shape) for t in tensors)
        raise TessError(
            f"scaled_dot_product_attention: batch dims of query, key, value do not "
            f"broadcast: {shapes}"
        ) from None
    return [t if t.shape[:-2] == batch else t.broadcast_to(batch + t.shape[-2:]) for t in tensors]


def _mask(mask: Any, q: Tensor, k: Tensor) -> Tensor:
    given = np.dtype(getattr(mask, "dtype", np.float64))
    if given != np.bool_ and given.kind != "f":
        raise TessError(
            f"scaled_dot_product_attention: attn_mask must be bool or float, got {given}"
        )
    m = lift(mask, (q,))
    target = (*q.shape[:-1], k.shape[-2])
    if m.dtype.kind == "f":
        m = m.astype(q.dtype) if m.dtype != q.dtype else m
    elif m.dtype != np.bool_:
        raise TessError(
            f"scaled_dot_product_attention: attn_mask must be bool or float, got {m.dtype}"
        )
    padded = (1,) * (len(target) - m.ndim) + m.shape
    if m.ndim > len(target) or any(d not in (1, t) for d, t in zip(padded, target, strict=True)):
        raise TessError(
            f"scaled_dot_product_attention: attn_mask of shape {m.shape} does not broadcast "
            f"to the scores' shape {target}"
        )
    return m if padded == m.shape else m.reshape(padded)


def _composite(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, causal: bool,
    rate: float, key: Any,
) -> Tensor:  # fmt: skip
    """`dropout(softmax(scores)) @ v`, the scores built: attention with dropout."""
    s = (q @ k.mT) * scale
    if mask is not None:
        s = where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        s = where(tril(np.ones(s.shape[-2:], np.bool_)), s, -np.inf)
    top = s.amax(-1, keepdim=True)
    e = (s - stop_gradient(where(top > -np.inf, top, 0.0))).exp()
    p = e / where(e.sum(-1, keepdim=True) > 0.0, e.sum(-1, keepdim=True), 1.0)
    keep = uniform(key, p.shape, p.dtype) >= rate
    return where(keep, p * (1.0 / (1.0 - rate)), 0.0) @ v


@located
def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    dropout_key: Any = None,
) -> Tensor:
    """`softmax(query @ key^T * scale + mask) @ value` over `(..., L, E)`, `(..., S, E)`,
    `(..., S, Ev)` operands (`torch.nn.functional.scaled_dot_product_attention`); `scale`
    defaults to `1 / sqrt(E)`, `is_causal` masks `j > i`."""
    q = lift(query, (key, value))
    k, v = lift(key, (q,)), lift(value, (q,))
    if q.dtype.kind != "f":
        raise TessError(f"scaled_dot_product_attention: query must be float, got {q.dtype}")
    k = k.astype(q.dtype) if k.dtype != q.dtype else k
    v = v.astype(q.dtype) if v.dtype != q.dtype else v
    q, k, v = _batched([q, k, v])
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise TessError(
            f"scaled_dot_product_attention: query {q.shape}, key {k.shape} and value "
            f"{v.shape} do not fit (..., L, E), (..., S, E), (..., S, Ev)"
        )
    if attn_mask is not None and is_causal:
        raise TessError(
            "scaled_dot_product_attention: attn_mask and is_causal=True are exclusive "
            "(as in PyTorch)"
        )
    mask = None if attn_mask is None else _mask(attn_mask, q, k)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if not 0.0 <= float(dropout_p) < 1.0:
        raise TessError(f"dropout_p: expected 0 <= dropout_p < 1, got {dropout_p}")
    if float(dropout_p) > 0.0:
        if dropout_key is None:
            raise TessError("scaled_dot_product_attention: dropout_p > 0 needs dropout_key")
        return _composite(q, k, v, mask, scale, bool(is_causal), float(dropout_p), dropout_key)
    builder = q.trace.builder
    m = None if mask is None else mask.value
    return Tensor(builder.attention(q.value, k.value, v.value, m, scale, bool(is_causal)), q.trace)


__all__ = ["scaled_dot_product_attention"]
