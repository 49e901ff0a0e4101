"""
The VJP rules of the attention ops (`tessc.dialects.tess_attention`), merged into
`vjp_rules.VJP_RULES`. Flash attention's backward: the forward saves nothing but its
output; the rule recomputes the scores' row logsumexp (`tess.attention_lse`, `(..., L)`)
and `delta = sum(dout * out, -1)`, and each of `dq`, `dk`, `dv` is a `tess.attention_grad`
that recomputes every probability `exp(s - lse)` from them, so no `(L, S)` tensor exists.
A float mask's gradient is `dS = P * (dP - delta)` summed to the mask's shape: that one
builds the scores, as the mask itself has their size. `attention_lse`'s rule (a second
derivative's) is `attention` with `k` as the values; `attention_grad` has none.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects.builder import TessBuilder
from tessc.dialects.tess_attention import AttentionGradOp, AttentionLseOp, AttentionOp
from tessc.dialects.tess_base import is_float, tensor_shape

Contributions = list[SSAValue | None]
Rule = Callable[[TessBuilder, Operation, SSAValue, tuple[bool, ...]], Contributions]

_LOG_FLOOR = -1e30
"""Below every finite logsumexp: where a row's is -inf (it attends to nothing), its scores
are all -inf and `exp(s - floor)` is the 0 the row's probabilities are."""


def _probabilities(
    emit: TessBuilder, op: AttentionOp | AttentionLseOp, mask: SSAValue, lse: SSAValue
) -> SSAValue:
    """`exp(s - lse)` as a tensor `(..., L, S)`: only for a float mask's gradient."""
    if op.is_causal:
        raise PassFailedException(
            f"'{op.name}': the gradient of a float mask with causal=true is not supported"
        )
    s = emit.mul(emit.matmul(op.q, emit.transpose(op.k)), emit.scalar(op.scale_value, op.q))
    s = emit.add(s, mask)
    floor = emit.maximum(lse, emit.scalar(_LOG_FLOOR, lse))
    return emit.exp(emit.sub(s, emit.unsqueeze(floor, -1)))


def _float_mask(op: AttentionOp | AttentionLseOp, needs: tuple[bool, ...], index: int) -> bool:
    return op.mask is not None and needs[index] and is_float(op.mask.type.element_type)


def _attention_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, AttentionOp)
    scale, causal = op.scale_value, op.is_causal
    lse = emit.attention_lse(op.q, op.k, op.mask, scale, causal)
    delta = emit.sum(emit.mul(grad, op.result), [-1])
    operands = (op.q, op.k, op.v, lse, delta, grad)
    contributions: Contributions = [
        emit.attention_grad(operands, op.mask, wrt, scale, causal) if need else None
        for wrt, need in zip("qkv", needs[:3], strict=True)
    ]
    if op.mask is not None:
        contributions.append(None)
        if _float_mask(op, needs, 3):
            p = _probabilities(emit, op, op.mask, lse)
            dp = emit.matmul(grad, emit.transpose(op.v))
            ds = emit.mul(p, emit.sub(dp, emit.unsqueeze(delta, -1)))
            contributions[3] = emit.sum_to_shape(ds, tensor_shape(op.mask))
    return contributions


def _attention_lse_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    """d lse_i / d s_ij = p_ij: `dq = scale * g * (P @ k)`, `dk = scale * P^T @ (g * q)`."""
    assert isinstance(op, AttentionLseOp)
    scale, causal = op.scale_value, op.is_causal
    g = emit.unsqueeze(grad, -1)
    contributions: Contributions = [None, None]
    if needs[0]:
        pk = emit.attention(op.q, op.k, op.k, op.mask, scale, causal)
        contributions[0] = emit.mul(emit.mul(pk, g), emit.scalar(scale, pk))
    if needs[1]:
        operands = (op.q, op.k, op.k, op.result, op.result, emit.mul(g, op.q))
        pq = emit.attention_grad(operands, op.mask, "v", scale, causal)
        contributions[1] = emit.mul(pq, emit.scalar(scale, pq))
    if op.mask is not None:
        contributions.append(None)
        if _float_mask(op, needs, 2):
            p = _probabilities(emit, op, op.mask, op.result)
            contributions[2] = emit.sum_to_shape(emit.mul(p, g), tensor_shape(op.mask))
    return contributions


def _attention_grad_rule(
    emit: TessBuilder, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    raise PassFailedException(
        f"'{op.name}': attention is differentiable once; its gradient has no gradient"
    )


ATTENTION_VJP_RULES: dict[type[Operation], Rule] = {
    AttentionOp: _attention_rule,
    AttentionLseOp: _attention_lse_rule,
    AttentionGradOp: _attention_grad_rule,
}

__all__ = ["ATTENTION_VJP_RULES"]
