"""
`TessBuilder`'s attention methods: the ops of `tess_attention` (`attention`,
`attention_lse`, `attention_grad`).

A mixin of `TessBuilder` like `ConvBuilder`: the op's shape rules are checked before it is
inserted and reported as `TessError` naming the shapes, through the builder's `insert`, so
`GradEmitter` builds these ops too. PyTorch's argument forms (a mask of lower rank, the
default scale, broadcast batch dims) are read in `tessc/nn_attention.py`; here the mask has
the operands' rank and the scale is explicit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from tessc.dialects import tess_attention
from tessc.dialects.builder_types import TessError

if TYPE_CHECKING:
    from tessc.dialects.builder import TessBuilder


def _checked(op: Operation) -> Operation:
    try:
        op.verify_()
    except VerifyException as error:
        message = str(error).replace(f"'{op.name}' ", "", 1)
        raise TessError(f"{op.name.removeprefix('tess.')}: {message}") from None
    return op


class AttentionBuilder:
    """The `tess_attention` methods of `TessBuilder` (its base class)."""

    def attention(
        self: TessBuilder,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        mask: SSAValue | None,
        scale: float,
        causal: bool,
    ) -> SSAValue:
        """`softmax(scale * q @ k^T + mask) @ v`, fused (`tess.attention`)."""
        return self.insert(_checked(tess_attention.AttentionOp(q, k, v, mask, scale, causal)))

    def attention_lse(
        self: TessBuilder,
        q: SSAValue,
        k: SSAValue,
        mask: SSAValue | None,
        scale: float,
        causal: bool,
    ) -> SSAValue:
        """The scores' row logsumexp `(..., L)` (`tess.attention_lse`)."""
        return self.insert(_checked(tess_attention.AttentionLseOp(q, k, mask, scale, causal)))

    def attention_grad(
        self: TessBuilder,
        operands: tuple[SSAValue, SSAValue, SSAValue, SSAValue, SSAValue, SSAValue],
        mask: SSAValue | None,
        wrt: str,
        scale: float,
        causal: bool,
    ) -> SSAValue:
        """The gradient of `attention` for `wrt` in `q`, `k`, `v` from `(q, k, v, lse,
        delta, dout)` (`tess.attention_grad`)."""
        op = tess_attention.AttentionGradOp(operands, mask, wrt, scale, causal)
        return self.insert(_checked(op))


__all__ = ["AttentionBuilder"]
