"""
The attention ops of the `tess` dialect: scaled dot-product attention, fused.

With `q` `(..., L, E)`, `k` `(..., S, E)`, `v` `(..., S, Ev)` (equal batch dims), the
scores are `s[.., i, j] = scale * q[.., i, :] . k[.., j, :]`, plus an additive float
`mask` or `-inf` where a bool `mask` is false (the mask has the operands' rank, each dim 1
or the scores' own: it broadcasts), and `-inf` where `j > i` under `causal` (PyTorch's
top-left alignment). A row whose scores are all `-inf` attends to nothing: its output is 0
and its logsumexp `-inf`.

- `attention` `%o = tess.attention %q, %k, %v scale = 0.125 : ... -> tensor<..xLxEvxf32>`:
  `softmax(s, -1) @ v`;
- `attention_lse` (`%q, %k` and the mask): `logsumexp(s, -1)`, `(..., L)`, what the
  gradient recomputes each probability from;
- `attention_grad` `%dq = tess.attention_grad %q, %k, %v, %lse, %delta, %dout wrt = "q"`:
  one operand's gradient, `delta = sum(dout * out, -1)` (flash-attention's backward).

They exist as ops, not composites, because the composite materialises the `(L, S)` scores:
`tess-to-linalg` makes them calls of kernels that stream the keys with an online softmax
(`lowering/linalg/to_linalg_attention.py`, `lowering/loops/attention_kernels.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import Float64Type, FloatAttr, StringAttr, TensorType, UnitAttr, f64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.tess_base import (
    Elements,
    PatternKind,
    Shape,
    TessOp,
    check_result_shape,
    check_same_elements,
    check_tensor_type,
    element_type_of,
    format_shape,
    is_bool,
    tensor_shape,
)

GRAD_OPERANDS = ("q", "k", "v")
"""What `attention_grad`'s `wrt` names."""


def scores_shape(q: Sequence[int], k: Sequence[int]) -> Shape:
    """`(..., L, S)`, the shape of the scores (never built) and what a mask broadcasts to."""
    return (*q[:-1], k[-2])


def check_attention_operands(
    op: Operation,
    q: SSAValue,
    k: SSAValue,
    v: SSAValue | None,
    mask: SSAValue | None,
) -> None:
    """The shape rules of the module docstring, as located diagnostics naming shapes."""
    values = [q, k] if v is None else [q, k, v]
    for value in values:
        check_tensor_type(op, value.type, Elements.FLOAT)
    check_same_elements(op, values)
    qs, ks = tensor_shape(q), tensor_shape(k)
    shapes = [qs, ks] if v is None else [qs, ks, tensor_shape(v)]
    described = ", ".join(format_shape(s) for s in shapes)
    if any(len(s) < 2 for s in shapes) or len({len(s) for s in shapes}) != 1:
        raise VerifyException(
            f"'{op.name}' expects q, k{', v' if v is not None else ''} of one rank >= 2, "
            f"got {described}"
        )
    if len({s[:-2] for s in shapes}) != 1:
        raise VerifyException(f"'{op.name}' batch dims differ: {described}")
    if qs[-1] != ks[-1]:
        raise VerifyException(f"'{op.name}' q and k must have the same last dim (E): {described}")
    if v is not None and tensor_shape(v)[-2] != ks[-2]:
        raise VerifyException(f"'{op.name}' k and v must have the same length S: {described}")
    if mask is None:
        return
    ms, target = tensor_shape(mask), scores_shape(qs, ks)
    check_tensor_type(op, mask.type, Elements.ANY)
    if not is_bool(element_type_of(mask)) and element_type_of(mask) != element_type_of(q):
        raise VerifyException(
            f"'{op.name}' mask must be i1 or {element_type_of(q)}, got {mask.type}"
        )
    if len(ms) != len(target) or any(m not in (1, t) for m, t in zip(ms, target, strict=True)):
        raise VerifyException(
            f"'{op.name}' mask of shape {format_shape(ms)} does not broadcast to the scores "
            f"{format_shape(target)}"
        )


class _AttentionBase(TessOp):
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE

    scale = prop_def(FloatAttr[Float64Type])
    causal = opt_prop_def(UnitAttr)

    @staticmethod
    def attention_properties(scale: float, causal: bool) -> dict[str, Attribute]:
        properties: dict[str, Attribute] = {"scale": FloatAttr(float(scale), f64)}
        if causal:
            properties["causal"] = UnitAttr()
        return properties

    @property
    def scale_value(self) -> float:
        return float(self.scale.value.data)

    @property
    def is_causal(self) -> bool:
        return self.causal is not None


@irdl_op_definition
class AttentionOp(_AttentionBase):
    """`softmax(scores) @ v` (module docstring)."""

    name = "tess.attention"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$q `,` $k `,` $v (`mask` $mask^)? `scale` `=` $scale (`causal` $causal^)? attr-dict "
        "`:` type($q) `,` type($k) `,` type($v) (`,` type($mask)^)? `->` type($result)"
    )

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        mask: SSAValue | None,
        scale: float,
        causal: bool,
    ):
        shape = (*tensor_shape(q)[:-1], tensor_shape(v)[-1])
        super().__init__(
            operands=[q, k, v, [] if mask is None else [mask]],
            properties=self.attention_properties(scale, causal),
            result_types=[TensorType(element_type_of(q), shape)],
        )

    def verify_(self) -> None:
        check_attention_operands(self, self.q, self.k, self.v, self.mask)
        check_same_elements(self, [self.q, self.result])
        check_result_shape(self, (*tensor_shape(self.q)[:-1], tensor_shape(self.v)[-1]))


@irdl_op_definition
class AttentionLseOp(_AttentionBase):
    """`logsumexp(scores, -1)`, `(..., L)` (module docstring)."""

    name = "tess.attention_lse"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$q `,` $k (`mask` $mask^)? `scale` `=` $scale (`causal` $causal^)? attr-dict "
        "`:` type($q) `,` type($k) (`,` type($mask)^)? `->` type($result)"
    )

    def __init__(self, q: SSAValue, k: SSAValue, mask: SSAValue | None, scale: float, causal: bool):
        super().__init__(
            operands=[q, k, [] if mask is None else [mask]],
            properties=self.attention_properties(scale, causal),
            result_types=[TensorType(element_type_of(q), tensor_shape(q)[:-1])],
        )

    def verify_(self) -> None:
        check_attention_operands(self, self.q, self.k, None, self.mask)
        check_same_elements(self, [self.q, self.result])
        check_result_shape(self, tensor_shape(self.q)[:-1])


@irdl_op_definition
class AttentionGradOp(_AttentionBase):
    """The gradient of `attention` with respect to `wrt` (module docstring)."""

    name = "tess.attention_grad"

    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    lse = operand_def(TensorType)
    delta = operand_def(TensorType)
    dout = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    wrt = prop_def(StringAttr)
    result = result_def(TensorType)

    assembly_format = (
        "$q `,` $k `,` $v `,` $lse `,` $delta `,` $dout (`mask` $mask^)? `wrt` `=` $wrt "
        "`scale` `=` $scale (`causal` $causal^)? attr-dict `:` type($q) `,` type($k) `,` "
        "type($v) `,` type($lse) `,` type($delta) `,` type($dout) (`,` type($mask)^)? "
        "`->` type($result)"
    )

    def __init__(
        self,
        operands: Sequence[SSAValue],
        mask: SSAValue | None,
        wrt: str,
        scale: float,
        causal: bool,
    ):
        q, k, v, lse, delta, dout = operands
        like = {"q": q, "k": k, "v": v}[wrt]
        super().__init__(
            operands=[q, k, v, lse, delta, dout, [] if mask is None else [mask]],
            properties={"wrt": StringAttr(wrt), **self.attention_properties(scale, causal)},
            result_types=[like.type],
        )

    @property
    def wrt_name(self) -> str:
        return self.wrt.data

    def verify_(self) -> None:
        if self.wrt_name not in GRAD_OPERANDS:
            raise VerifyException(
                f"'{self.name}' wrt must be one of q, k, v, got {self.wrt_name!r}"
            )
        check_attention_operands(self, self.q, self.k, self.v, self.mask)
        rows = tensor_shape(self.q)[:-1]
        out = (*rows, tensor_shape(self.v)[-1])
        for label, value, shape in (
            ("lse", self.lse, rows),
            ("delta", self.delta, rows),
            ("dout", self.dout, out),
        ):
            check_same_elements(self, [self.q, value])
            if tensor_shape(value) != shape:
                raise VerifyException(
                    f"'{self.name}' {label} of shape {format_shape(tensor_shape(value))}, "
                    f"expected {format_shape(shape)}"
                )
        like = {"q": self.q, "k": self.k, "v": self.v}[self.wrt_name]
        check_result_shape(self, tensor_shape(like))
        check_same_elements(self, [self.q, self.result])


ATTENTION_OPS: tuple[type[TessOp], ...] = (AttentionOp, AttentionLseOp, AttentionGradOp)

__all__ = [
    "ATTENTION_OPS",
    "GRAD_OPERANDS",
    "AttentionGradOp",
    "AttentionLseOp",
    "AttentionOp",
    "check_attention_operands",
    "scores_shape",
]
