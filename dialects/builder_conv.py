"""
`TessBuilder`'s convolution methods: the ops of `tess_conv` (`pad`, `conv`, `pool`,
`unpool`).

A mixin of `TessBuilder` like `IndexBuilder`: every argument is checked in the user's
terms (`TessError` naming the shapes) before the op is built, through the builder's
primitives (`insert`, `_operands`), so `GradEmitter` sees these ops too. The frontends'
PyTorch-style argument forms (`padding="same"`, an int for every spatial dim) are read in
`tessc/nn_conv.py`; here every property is explicit, one entry per spatial dim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import i1
from xdsl.ir import SSAValue

from tessc.dialects import tess_conv
from tessc.dialects.builder_types import TessError, describe, shape_of
from tessc.dialects.tess_base import element_type_of

if TYPE_CHECKING:
    from tessc.dialects.builder import TessBuilder


class ConvBuilder:
    """The `tess_conv` methods of `TessBuilder` (its base class)."""

    def pad(
        self: TessBuilder,
        x: SSAValue,
        low: Sequence[int],
        high: Sequence[int],
        value: float = 0.0,
    ) -> SSAValue:
        """`x` with `low[d]`/`high[d]` elements of `value` before/after dim `d` (`tess.pad`)."""
        rank = len(shape_of(x))
        if not len(low) == len(high) == rank:
            raise TessError(f"pad needs a (before, after) pair per dim of {describe(x)}")
        if min((*low, *high), default=0) < 0:
            raise TessError(f"pad widths must be non-negative, got {list(low)} and {list(high)}")
        if not any(low) and not any(high):
            return x
        if element_type_of(x) == i1:
            raise TessError(f"pad takes numbers, not booleans: {describe(x)}")
        return self.insert(tess_conv.PadOp(x, low, high, value))

    def conv(
        self: TessBuilder,
        x: SSAValue,
        weight: SSAValue,
        strides: Sequence[int],
        dilations: Sequence[int],
        padding_low: Sequence[int],
        padding_high: Sequence[int],
        groups: int = 1,
    ) -> SSAValue:
        """The grouped cross-correlation `tess.conv` of `(N, C, *in)` and `(F, C/G, *k)`."""
        x, weight = self._operands(x, weight, floating=True)
        try:
            tess_conv.conv_shape(
                shape_of(x), shape_of(weight), strides, dilations, padding_low, padding_high,
                groups,
            )  # fmt: skip
        except ValueError as e:
            raise TessError(str(e)) from None
        return self.insert(
            tess_conv.ConvOp(x, weight, strides, dilations, padding_low, padding_high, groups)
        )

    def pool(
        self: TessBuilder,
        x: SSAValue,
        kind: str,
        kernel: Sequence[int],
        strides: Sequence[int],
        padding_low: Sequence[int],
        padding_high: Sequence[int],
    ) -> SSAValue:
        """Max, average or first-argmax (i64) over windows of the last `len(kernel)` dims."""
        if kind not in tess_conv.POOL_KINDS:
            raise TessError(f"pool kind must be one of {', '.join(tess_conv.POOL_KINDS)}")
        (x,) = self._operands(x, floating=True)
        try:
            tess_conv.pool_shape(shape_of(x), kernel, strides, padding_low, padding_high)
        except ValueError as e:
            raise TessError(str(e)) from None
        return self.insert(tess_conv.PoolOp(x, kind, kernel, strides, padding_low, padding_high))

    def unpool(
        self: TessBuilder,
        grad: SSAValue,
        indices: SSAValue | None,
        kernel: Sequence[int],
        strides: Sequence[int],
        padding_low: Sequence[int],
        padding_high: Sequence[int],
        shape: Sequence[int],
    ) -> SSAValue:
        """The adjoint of pooling windows into `shape` (routed by `indices` if given)."""
        return self.insert(
            tess_conv.UnpoolOp(grad, indices, kernel, strides, padding_low, padding_high, shape)
        )


__all__ = ["ConvBuilder"]
