"""
Vector-Jacobian product (VJP) rules for every `tess` op, kept in one table (`VJP_RULES`).

JAX's per-primitive style: `rule(emit, op, grad, needs)` receives the adjoint of the op's
result and a flag per operand, and returns one contribution per operand (None where none is
needed), each of exactly its operand's type (broadcasts are summed back: `sum_to_shape`).
Rules emit `tess` ops only, through `GradEmitter`, a `TessBuilder` that folds trivial terms
(fills, multiplying by 1, adding 0) as it builds, never one that could change a NaN or an
infinity. Conventions where the derivative is undefined follow PyTorch (relu'(0) = 0, ties
split evenly, comparisons and indices have zero gradient): the list is in
lowering/autodiff/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from tessc.dialects.builder_types import numel
from tessc.dialects.tess import (
    BITWISE_OPS,
    AbsOp,
    AddOp,
    BinaryOp,
    BitcastOp,
    BroadcastToOp,
    CastOp,
    CeilOp,
    CosOp,
    DivOp,
    EqOp,
    ErfOp,
    ExpOp,
    FillOp,
    FloorOp,
    GtOp,
    IotaOp,
    LogOp,
    LtOp,
    MatmulOp,
    MaxOp,
    MeanOp,
    MinOp,
    MulOp,
    NegOp,
    PermuteOp,
    PowOp,
    ProdOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceOp,
    ReluOp,
    ReshapeOp,
    RoundOp,
    SelectOp,
    SigmoidOp,
    SinOp,
    SqrtOp,
    StopGradientOp,
    SubOp,
    SumOp,
    TanhOp,
    UnaryOp,
    is_float,
    reduced_shape,
    tensor_shape,
)
from tessc.dialects.tess_index import (
    ArgMaxOp,
    ArgMinOp,
    ConcatOp,
    OneHotOp,
    ScatterAddOp,
    SliceOp,
    TakeOp,
    UnsliceOp,
)
from tessc.lowering.autodiff.grad_emitter import GradEmitter
from tessc.lowering.autodiff.vjp_attention import ATTENTION_VJP_RULES
from tessc.lowering.autodiff.vjp_conv import CONV_VJP_RULES, routed_relu_grad

Shape = tuple[int, ...]
Contributions = list[SSAValue | None]
VjpRule = Callable[[GradEmitter, Operation, SSAValue, tuple[bool, ...]], Contributions]


# ---------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------

VJP_RULES: dict[type[Operation], VjpRule] = {}

ZERO_GRADIENT_OPS: tuple[type[Operation], ...] = (
    LtOp, GtOp, EqOp, FillOp, arith.ConstantOp, OneHotOp, ArgMaxOp, ArgMinOp, StopGradientOp,
    FloorOp, CeilOp, RoundOp,  # piecewise constant: zero almost everywhere
    IotaOp, *BITWISE_OPS, BitcastOp,
)  # fmt: skip
"""Ops whose result does not depend differentiably on any operand (integer or bool results,
masks, constants). Any op with a non-float result is treated the same way by the pass."""


def vjp_rule(*op_types: type[Operation]) -> Callable[[VjpRule], VjpRule]:
    def register(rule: VjpRule) -> VjpRule:
        for op_type in op_types:
            VJP_RULES[op_type] = rule
        return rule

    return register


# -- map: grad_in = grad_out * f'(x) ----------------------------------------------------


def _unary_rule(
    derivative: Callable[[GradEmitter, SSAValue, SSAValue, SSAValue], SSAValue],
) -> VjpRule:
    """A map's rule from `derivative(emit, x, y, g) -> g * f'(x)`."""

    def rule(
        emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
    ) -> Contributions:
        assert isinstance(op, UnaryOp)
        return [derivative(emit, op.input, op.result, grad) if needs[0] else None]

    return rule


def _sign(emit: GradEmitter, x: SSAValue) -> SSAValue:
    zero = emit.scalar(0.0, x)
    return emit.sub(emit.gt(x, zero), emit.lt(x, zero))


UNARY_DERIVATIVES: dict[
    type[UnaryOp], Callable[[GradEmitter, SSAValue, SSAValue, SSAValue], SSAValue]
] = {
    NegOp: lambda e, x, y, g: e.neg(g),
    ExpOp: lambda e, x, y, g: e.mul(g, y),
    LogOp: lambda e, x, y, g: e.div(g, x),
    ReluOp: lambda e, x, y, g: routed_relu_grad(e, y, g) or e.mul(g, e.gt(x, 0.0)),
    SigmoidOp: lambda e, x, y, g: e.mul(g, e.mul(y, e.sub(e.scalar(1.0, y), y))),
    TanhOp: lambda e, x, y, g: e.mul(g, e.sub(e.scalar(1.0, y), e.mul(y, y))),
    SqrtOp: lambda e, x, y, g: e.div(e.mul(g, e.scalar(0.5, y)), y),
    ReciprocalOp: lambda e, x, y, g: e.neg(e.mul(g, e.mul(y, y))),
    AbsOp: lambda e, x, y, g: e.mul(g, _sign(e, x)),
    SinOp: lambda e, x, y, g: e.mul(g, e.unary(CosOp, x)),
    CosOp: lambda e, x, y, g: e.neg(e.mul(g, e.unary(SinOp, x))),
    # d erf(x)/dx = 2/sqrt(pi) exp(-x^2)
    ErfOp: lambda e, x, y, g: e.mul(
        g, e.mul(e.scalar(2.0 / math.sqrt(math.pi), x), e.unary(ExpOp, e.neg(e.mul(x, x))))
    ),
}

for _op_type, _derivative in UNARY_DERIVATIVES.items():
    VJP_RULES[_op_type] = _unary_rule(_derivative)


# -- zip: each side gets its partial, summed back to its own shape ------------------------


def _binary_rule(
    partials: Callable[
        [GradEmitter, SSAValue, SSAValue, SSAValue, SSAValue, tuple[bool, ...]],
        tuple[SSAValue | None, SSAValue | None],
    ],
) -> VjpRule:
    """A zip's rule from `partials(emit, a, b, y, g, needs) -> (g * dy/da, g * dy/db)` at
    the broadcast shape; this wrapper sums each back to its operand's shape."""

    def rule(
        emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
    ) -> Contributions:
        assert isinstance(op, BinaryOp)
        a, b = op.lhs, op.rhs
        grad_a, grad_b = partials(emit, a, b, op.result, grad, needs)
        return [
            emit.sum_to_shape(grad_a, tensor_shape(a)) if needs[0] and grad_a is not None else None,
            emit.sum_to_shape(grad_b, tensor_shape(b)) if needs[1] and grad_b is not None else None,
        ]

    return rule


def _tie_split_weight(emit: GradEmitter, wins: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
    """1 where `a` wins, 1/2 where a == b, else 0."""
    half = emit.scalar(0.5, wins)
    return emit.add(wins, emit.mul(emit.eq(a, b), half))


def _max_min_partials(winner: type[BinaryOp], loser: type[BinaryOp]):
    def partials(
        e: GradEmitter, a: SSAValue, b: SSAValue, y: SSAValue, g: SSAValue, needs
    ) -> tuple[SSAValue | None, SSAValue | None]:
        grad_a = grad_b = None
        if needs[0]:
            grad_a = e.mul(g, _tie_split_weight(e, e.binary(winner, a, b), a, b))
        if needs[1]:
            grad_b = e.mul(g, _tie_split_weight(e, e.binary(loser, a, b), a, b))
        return grad_a, grad_b

    return partials


def _pow_partials(
    e: GradEmitter, a: SSAValue, b: SSAValue, y: SSAValue, g: SSAValue, needs
) -> tuple[SSAValue | None, SSAValue | None]:
    grad_a = grad_b = None
    if needs[0]:
        one = e.scalar(1.0, b)
        grad_a = e.mul(g, e.mul(b, e.pow(a, e.sub(b, one))))
        exponent = e.constant(b)
        if exponent is None or exponent == 0.0:
            # x^0 is constant: 0 * x^-1 would be NaN at x = 0.
            zero_exponent = e.eq(b, 0.0)
            grad_a = e.select(zero_exponent, e.scalar(0.0, grad_a), grad_a)
    if needs[1]:
        grad_b = e.mul(g, e.mul(y, e.log(a)))
        # 0^y for y >= 0 is the constant 0 or 1 near y, but y * log(0) is NaN.
        zero_base = e.eq(a, 0.0)
        nonnegative = e.sub(e.scalar(1.0, b), e.lt(b, 0.0))
        grad_b = e.select(e.mul(zero_base, nonnegative), e.scalar(0.0, grad_b), grad_b)
    return grad_a, grad_b


BINARY_PARTIALS = {
    AddOp: lambda e, a, b, y, g, needs: (g, g),
    SubOp: lambda e, a, b, y, g, needs: (g, e.neg(g) if needs[1] else None),
    MulOp: lambda e, a, b, y, g, needs: (
        e.mul(g, b) if needs[0] else None,
        e.mul(g, a) if needs[1] else None,
    ),
    DivOp: lambda e, a, b, y, g, needs: (
        e.div(g, b) if needs[0] else None,
        e.neg(e.div(e.mul(g, y), b)) if needs[1] else None,
    ),
    MaxOp: _max_min_partials(GtOp, LtOp),
    MinOp: _max_min_partials(LtOp, GtOp),
    PowOp: _pow_partials,
}

for _op_type, _partials in BINARY_PARTIALS.items():
    VJP_RULES[_op_type] = _binary_rule(_partials)


@vjp_rule(
    LtOp,
    GtOp,
    EqOp,
    OneHotOp,
    ArgMaxOp,
    ArgMinOp,
    StopGradientOp,
    FloorOp,
    CeilOp,
    RoundOp,
    *BITWISE_OPS,
    BitcastOp,  # reinterpreted bits: no derivative
)
def _zero_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    return [None] * len(op.operands)


@vjp_rule(FillOp, arith.ConstantOp, IotaOp)
def _constant_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    return []


@vjp_rule(SelectOp)
def _select_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, SelectOp)
    zero = emit.scalar(0.0, grad)
    contributions: Contributions = [None, None, None]
    if needs[1]:
        taken = emit.select(op.cond, grad, zero)
        contributions[1] = emit.sum_to_shape(taken, tensor_shape(op.lhs))
    if needs[2]:
        taken = emit.select(op.cond, zero, grad)
        contributions[2] = emit.sum_to_shape(taken, tensor_shape(op.rhs))
    return contributions


# -- reduce: broadcast the gradient back over the reduced dims ---------------------------


def _grad_with_kept_dims(emit: GradEmitter, op: ReduceOp, grad: SSAValue) -> SSAValue:
    """`grad` reshaped so that the reduced dims are there with size 1."""
    kept = reduced_shape(tensor_shape(op.input), op.reduced_dims, keepdim=True)
    return emit.reshape(grad, kept)


@vjp_rule(SumOp)
def _sum_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, SumOp)
    kept = _grad_with_kept_dims(emit, op, grad)
    return [emit.broadcast_to(kept, tensor_shape(op.input))]


@vjp_rule(MeanOp)
def _mean_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, MeanOp)
    shape = tensor_shape(op.input)
    count = numel([shape[d] for d in op.reduced_dims])
    kept = _grad_with_kept_dims(emit, op, grad)
    # An empty mean (0/0, NaN) broadcasts its gradient to no element: any scale will do.
    scaled = emit.mul(kept, emit.scalar(1.0 / count if count else math.nan, kept))
    return [emit.broadcast_to(scaled, shape)]


@vjp_rule(ProdOp)
def _prod_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    """The product of the other elements of the slice, as torch computes it: with `p` the
    product of the slice's nonzero elements, `g * p / x` where the slice has no zero, `g *
    p` at its zero where it has exactly one, and 0 everywhere else (the product of the
    others then includes a zero). Dividing by the nonzero elements only (1 at zeros), no
    lane divides by 0: no NaN where `prod / x` would give one."""
    assert isinstance(op, ProdOp)
    dims = op.reduced_dims
    kept_grad = _grad_with_kept_dims(emit, op, grad)
    is_zero = emit.eq(op.input, 0.0)
    nonzero = emit.select(is_zero, 1.0, op.input)
    zeros = emit.sum(is_zero, dims, keepdim=True)
    others = emit.div(emit.prod(nonzero, dims, keepdim=True), nonzero)
    defined = emit.logical_or(emit.eq(zeros, 0), emit.logical_and(is_zero, emit.eq(zeros, 1)))
    return [emit.select(defined, emit.mul(kept_grad, others), 0.0)]


@vjp_rule(ReduceMaxOp)
def _reduce_max_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, ReduceMaxOp)
    kept_grad = _grad_with_kept_dims(emit, op, grad)
    kept_max = emit.reshape(op.result, tensor_shape(kept_grad))
    is_max = emit.eq(op.input, kept_max)
    ties = emit.sum(is_max, op.reduced_dims, keepdim=True)
    return [emit.mul(is_max, emit.div(kept_grad, ties))]


# -- shape ops: the inverse shape op ----------------------------------------------------


@vjp_rule(ReshapeOp)
def _reshape_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, ReshapeOp)
    return [emit.reshape(grad, tensor_shape(op.input))]


@vjp_rule(PermuteOp)
def _permute_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, PermuteOp)
    inverse = [0] * len(op.permutation)
    for position, dim in enumerate(op.permutation):
        inverse[dim] = position
    return [emit.permute(grad, inverse)]


@vjp_rule(BroadcastToOp)
def _broadcast_to_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, BroadcastToOp)
    return [emit.sum_to_shape(grad, tensor_shape(op.input))]


# -- matmul: dM = dOut · Nᵀ, dN = Mᵀ · dOut ----------------------------------------------


@vjp_rule(MatmulOp)
def _matmul_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, MatmulOp)
    m, n = op.lhs, op.rhs
    contributions: Contributions = [None, None]
    # Each product has the result's (broadcast) batch dims; sum_to_shape folds the batch
    # dims an operand was broadcast over.
    if needs[0]:
        contributions[0] = emit.sum_to_shape(emit.matmul(grad, emit.transpose(n)), tensor_shape(m))
    if needs[1]:
        m_shape, n_shape = tensor_shape(m), tensor_shape(n)
        if len(n_shape) == 2 and len(m_shape) > 2 and tensor_shape(grad)[:-2] == m_shape[:-2]:
            # A weight shared by every batch: one product over the batch's rows stacked,
            # not a product per batch summed (a (B, K, N) intermediate and a reduction).
            count = numel(m_shape[:-1])
            rows = emit.reshape(m, (count, m_shape[-1]))
            stacked = emit.reshape(grad, (count, n_shape[-1]))
            contributions[1] = emit.matmul(emit.transpose(rows), stacked)
        else:
            product = emit.matmul(emit.transpose(m), grad)
            contributions[1] = emit.sum_to_shape(product, n_shape)
    return contributions


# -- cast and the indexing ops: the adjoint op --------------------------------------------


@vjp_rule(CastOp)
def _cast_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, CastOp)
    source = op.input.type.element_type
    if not is_float(source) or not is_float(op.result.type.element_type):
        return [None]  # through an integer or bool there is no derivative
    return [emit.insert(CastOp(grad, source))]


@vjp_rule(TakeOp)
def _take_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, TakeOp)
    shape = tensor_shape(op.input)
    return [emit.insert(ScatterAddOp(grad, op.indices, op.axis, shape)), None]


@vjp_rule(ScatterAddOp)
def _scatter_add_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, ScatterAddOp)
    return [emit.insert(TakeOp(grad, op.indices, op.axis)), None]


@vjp_rule(SliceOp)
def _slice_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, SliceOp)
    full = tensor_shape(op.input)
    return [emit.insert(UnsliceOp(grad, op.static_offsets, op.static_strides, full))]


@vjp_rule(UnsliceOp)
def _unslice_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, UnsliceOp)
    part = tensor_shape(op.input)
    return [emit.insert(SliceOp(grad, op.static_offsets, op.static_strides, part))]


@vjp_rule(ConcatOp)
def _concat_rule(
    emit: GradEmitter, op: Operation, grad: SSAValue, needs: tuple[bool, ...]
) -> Contributions:
    assert isinstance(op, ConcatOp)
    dim, start = op.axis, 0
    contributions: Contributions = []
    full = tensor_shape(grad)
    for value, needed in zip(op.inputs, needs, strict=True):
        part = tensor_shape(value)
        if needed:
            offsets = [start if d == dim else 0 for d in range(len(full))]
            piece = SliceOp(grad, offsets, [1] * len(full), part)
            contributions.append(emit.insert(piece))
        else:
            contributions.append(None)
        start += part[dim]
    return contributions


VJP_RULES.update(CONV_VJP_RULES)  # pad, conv, pool, unpool: vjp_conv.py
VJP_RULES.update(ATTENTION_VJP_RULES)  # attention, its lse and gradient: vjp_attention.py

__all__ = ["VJP_RULES", "ZERO_GRADIENT_OPS", "VjpRule"]
