"""
The xDSL fixes that came with zero-size and location work (`tessc.xdsl_patches`'
`fixes_extended_floats` and `fixes_locations`), each against stock xDSL on the same input:
stock shows the bug, the patched function gives the right answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    FileLineColLoc,
    Float80Type,
    Float128Type,
    FloatAttr,
    IntAttr,
    StringAttr,
    UnknownLoc,
)
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.context import make_context
from tessc.xdsl_patches import Patch
from tessc.xdsl_patches.fixes_extended_floats import PATCHES as FLOAT_PATCHES
from tessc.xdsl_patches.fixes_extended_floats import decode_extended, encode_extended
from tessc.xdsl_patches.fixes_locations import PATCHES as LOCATION_PATCHES

make_context()  # applies the patches

VALUES = [0.0, -0.0, 1.5, -2.25e10, 1e-300, 3.0e300, math.inf, -math.inf]


@contextmanager
def stock(patches: Sequence[Patch]) -> Iterator[None]:
    with ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch.stock())
        yield


@pytest.mark.parametrize("float_type", [Float80Type, Float128Type])
def test_extended_float_attributes_print_where_stock_xdsl_raises(float_type: type) -> None:
    attr = FloatAttr(1.5, float_type())
    with stock(FLOAT_PATCHES), pytest.raises(NotImplementedError):
        float_type().pack([1.5])
    packed = float_type().pack([1.5])
    assert len(packed) == float_type().size
    assert float_type().unpack(packed, 1) == (1.5,)
    assert "1.5" in str(attr) or "0x" in str(attr)


@pytest.mark.parametrize(("mantissa", "explicit"), [(64, True), (112, False)])
@pytest.mark.parametrize("value", VALUES)
def test_extended_encoding_round_trips(mantissa: int, explicit: bool, value: float) -> None:
    decoded = decode_extended(encode_extended(value, mantissa, explicit), mantissa, explicit)
    assert decoded == value and math.copysign(1, decoded) == math.copysign(1, value)
    assert math.isnan(
        decode_extended(encode_extended(math.nan, mantissa, explicit), mantissa, explicit)
    )


@pytest.mark.skipif(np.finfo(np.longdouble).nmant != 63, reason="no x87 long double here")
@pytest.mark.parametrize("value", [v for v in VALUES if math.isfinite(v)])
def test_f80_bytes_are_x87_long_double(value: float) -> None:
    assert Float80Type().pack([value]) == np.longdouble(value).tobytes()[:10]


class NegateConstants(RewritePattern):
    """Replace each integer `arith.constant` by a fresh one of the opposite value."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        if isinstance(op.value, FloatAttr) or op.attributes.get("done"):
            return
        value = op.value.value.data  # type: ignore[union-attr]
        new = arith.ConstantOp.from_int_and_width(-value, 32)
        new.attributes["done"] = StringAttr("yes")
        rewriter.replace(op, new)


def rewritten_locations() -> tuple[list[object], str]:
    from tessc.reference import parse_module

    module = parse_module(
        "func.func @f() -> i32 {\n  %0 = arith.constant 3 : i32\n  func.return %0 : i32\n}\n"
    )
    constant = next(op for op in module.walk() if isinstance(op, arith.ConstantOp))
    constant.location = FileLineColLoc(StringAttr("user.mlir"), IntAttr(2), IntAttr(3))
    PatternRewriteWalker(NegateConstants()).rewrite_module(module)
    constants = [op for op in module.walk() if isinstance(op, arith.ConstantOp)]
    return [op.location for op in constants], str(module)


def test_a_replacing_op_takes_the_replaced_ops_location_where_stock_gives_none() -> None:
    with stock(LOCATION_PATCHES):
        stock_locations, stock_text = rewritten_locations()
    locations, text = rewritten_locations()
    assert all(isinstance(loc, UnknownLoc) for loc in stock_locations)
    assert [str(loc) for loc in locations] == ['loc("user.mlir":2:3)']
    assert text == stock_text  # the same IR, only the location differs
