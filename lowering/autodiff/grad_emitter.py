"""
`GradEmitter`, the `TessBuilder` the VJP rules (`vjp_rules.py`) build through: the same
ops, with trivially constant terms folded as they are built (fills, multiplying by 1,
adding 0, a reshape or broadcast of a splat), never a fold that could change a NaN or an
infinity. See lowering/autodiff/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import DimsLike, Operand, normalize_dims, numel
from tessc.dialects.tess import (
    AddOp,
    BinaryOp,
    BroadcastToOp,
    CompareOp,
    DivOp,
    FillOp,
    MulOp,
    PowOp,
    ReduceOp,
    SubOp,
    SumOp,
    broadcast_shapes,
    reduced_shape,
    tensor_shape,
)

Shape = tuple[int, ...]


class GradEmitter(TessBuilder):
    """The `TessBuilder` of VJP rules: the same ops, with the trivially constant folded.

    It overrides only the builder's primitives, so composites (`unsqueeze`, `le`,
    `reduce_min`, `sum_to_shape`, ...) fold too. Its `scalar` keeps `like`'s rank (all
    dims 1) where the front's is rank 0, so a gradient term has its operand's rank from
    the first op on.
    """

    @staticmethod
    def constant(value: SSAValue) -> float | None:
        """The splat value of `value` if a `tess.fill` defines it."""
        owner = value.owner
        return owner.fill_value if isinstance(owner, FillOp) else None

    # -- constants ----------------------------------------------------------------------

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A splat of `value` with `like`'s rank and all dims 1, which broadcasts to it."""
        return self.full_like(like, value, (1,) * len(tensor_shape(like)))

    # -- elementwise --------------------------------------------------------------------

    def _fold_binary(
        self, op_type: type[BinaryOp], lhs: SSAValue, rhs: SSAValue, shape: Shape
    ) -> SSAValue | None:
        a, b = self.constant(lhs), self.constant(rhs)
        if a is not None and b is not None:
            folded = {
                AddOp: lambda: a + b,
                SubOp: lambda: a - b,
                MulOp: lambda: a * b,
                DivOp: lambda: a / b if b != 0.0 else None,
            }.get(op_type, lambda: None)()
            if folded is not None:
                return self.full_like(lhs, folded, shape)
        # x + 0, x - 0, x * 1, x / 1, x ^ 1 and 0 + x, 1 * x are x when x has the shape.
        right_identity = {AddOp: 0.0, SubOp: 0.0, MulOp: 1.0, DivOp: 1.0, PowOp: 1.0}.get(op_type)
        if b is not None and b == right_identity and tensor_shape(lhs) == shape:
            return lhs
        left_identity = {AddOp: 0.0, MulOp: 1.0}.get(op_type)
        if a is not None and a == left_identity and tensor_shape(rhs) == shape:
            return rhs
        return None

    @staticmethod
    def _implicit_broadcasts(*operands: SSAValue) -> list[SSAValue]:
        """Operands of a broadcasting op with `tess.broadcast_to`s looked through where the
        op's own broadcasting gives the same result shape (saving a copy kernel)."""
        shape = broadcast_shapes(*(tensor_shape(v) for v in operands))
        result = list(operands)
        for i, value in enumerate(operands):
            if isinstance(value.owner, BroadcastToOp):
                source = value.owner.input
                others = [tensor_shape(v) for j, v in enumerate(result) if j != i]
                if broadcast_shapes(tensor_shape(source), *others) == shape:
                    result[i] = source
        return result

    def _compare(self, op: type[CompareOp], lhs: Operand, rhs: Operand) -> SSAValue:
        """In gradients a comparison is a 0/1 mask in the operands' dtype (it multiplies)."""
        return self.binary(op, lhs, rhs)

    def binary(self, op_type: type[BinaryOp], lhs: Operand, rhs: Operand) -> SSAValue:
        lhs_value, rhs_value = self._operands(lhs, rhs)
        shape = self.check_broadcast(lhs_value, rhs_value)
        folded = self._fold_binary(op_type, lhs_value, rhs_value, shape)
        if folded is not None:
            return folded
        return super().binary(op_type, *self._implicit_broadcasts(lhs_value, rhs_value))

    def neg(self, x: SSAValue) -> SSAValue:
        c = self.constant(x)
        if c is not None:
            return self.full_like(x, -c)
        return super().neg(x)

    def select(self, cond: Operand, lhs: Operand, rhs: Operand) -> SSAValue:
        operands = [cond, lhs, rhs]
        if all(isinstance(v, SSAValue) for v in operands):
            operands = self._implicit_broadcasts(*operands)  # type: ignore[arg-type]
        return super().select(*operands)

    # -- shapes -------------------------------------------------------------------------

    def reshape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        folded = self._fold_to_shape(x, tuple(shape))
        return folded if folded is not None else super().reshape(x, shape)

    def broadcast_to(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        folded = self._fold_to_shape(x, tuple(shape))
        return folded if folded is not None else super().broadcast_to(x, shape)

    def _fold_to_shape(self, x: SSAValue, shape: tuple[int, ...]) -> SSAValue | None:
        """`x` itself when it already has `shape`, a fill when it is a splat, else None:
        a reshape or broadcast of either is no new value."""
        if tensor_shape(x) == shape:
            return x
        c = self.constant(x)
        return None if c is None else self.full_like(x, c, shape)

    def permute(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        if list(dims) == list(range(len(dims))):
            return x
        return super().permute(x, dims)

    def reduce(self, op: type[ReduceOp], x: SSAValue, dims: DimsLike, keepdim: bool) -> SSAValue:
        c = self.constant(x)
        if c is not None and op is SumOp:
            shape = tensor_shape(x)
            normalized = normalize_dims(dims, len(shape))
            count = numel([shape[d] for d in normalized])
            return self.full_like(x, c * count, reduced_shape(shape, normalized, keepdim))
        return super().reduce(op, x, dims, keepdim)


__all__ = ["GradEmitter"]
