"""
Codegen to LLVM IR, per op: the instruction of each scalar `arith` and `math` op, as tables
(level 5 -> 6; the emitter is `to_llvm.py`, the conventions lowering/codegen/README.md).

Each scalar op maps to one LLVM instruction or intrinsic with the semantics the `arith` and
`math` dialects give it (MLIR's own `convert-arith-to-llvm` and `convert-math-to-llvm` make
the same choices): `BINARY` instructions, `CASTS`, `INTRINSICS` (`llvm.<name>.<type>`) and
`LIBM` calls for what LLVM has no intrinsic of. Integer division and remainder by zero give
0, as Numba's do (`error_model="numpy"`), where LLVM's would be undefined. A type or
constant with no LLVM spelling here raises `NoLlvmForm`: the kernel is then left to Numba.
"""

from __future__ import annotations

import math
import struct

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Operation


class NoLlvmForm(Exception):
    """An op, type or constant this emitter does not translate: the kernel stays Numba's."""

    def __init__(self, what: Operation | Attribute | str):
        name = what.name if isinstance(what, Operation) else str(what)
        super().__init__(f"no LLVM form for {name}")


def llvm_type(typ: Attribute) -> str:
    """The LLVM type of a scalar: `i64` for index, `iN`, `float`, `double`."""
    if isinstance(typ, IndexType):
        return "i64"
    if isinstance(typ, IntegerType):
        return f"i{typ.width.data}"
    if isinstance(typ, Float32Type):
        return "float"
    if isinstance(typ, Float64Type):
        return "double"
    raise NoLlvmForm(typ)


def storage_type(typ: Attribute) -> str:
    """The LLVM type of an element in memory: a NumPy bool is a byte."""
    scalar = llvm_type(typ)
    return "i8" if scalar == "i1" else scalar


SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "float": 4, "double": 8}
"""Bytes of a stored element (`storage_type`)."""

TYPE_SUFFIX = {"float": "f32", "double": "f64"}
"""The overload suffix of a float intrinsic (`llvm.exp.f32`)."""


def float_constant(value: float, typ: str) -> str:
    """An exact LLVM literal: the 64-bit pattern of the value as a double (for `float`,
    rounded to single precision first, as LLVM requires)."""
    if typ == "float":
        value = struct.unpack("<f", struct.pack("<f", value))[0] if math.isfinite(value) else value
    return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"


def constant(op: arith.ConstantOp) -> str:
    """The literal of a scalar `arith.constant`."""
    value = op.value
    if isinstance(value, FloatAttr):
        return float_constant(float(value.value.data), llvm_type(value.type))
    if isinstance(value, IntegerAttr):
        number = int(value.value.data)
        if llvm_type(value.type) == "i1":
            return "true" if number else "false"
        return str(number)
    raise NoLlvmForm(op)


# `arith` ops that are one LLVM instruction; float ones carry the module's fast-math flags.
BINARY: dict[str, str] = {
    "arith.addf": "fadd", "arith.subf": "fsub", "arith.mulf": "fmul", "arith.divf": "fdiv",
    "arith.remf": "frem", "arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
    "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor", "arith.shli": "shl",
    "arith.shrsi": "ashr", "arith.shrui": "lshr",
}  # fmt: skip
FLOAT_BINARY = frozenset(["fadd", "fsub", "fmul", "fdiv", "frem"])

# Division and remainder, guarded against a zero divisor.
DIVISION: dict[str, str] = {
    "arith.divsi": "sdiv", "arith.divui": "udiv", "arith.remsi": "srem", "arith.remui": "urem",
    "arith.floordivsi": "sdiv", "arith.ceildivsi": "sdiv", "arith.ceildivui": "udiv",
}  # fmt: skip

# Two-operand intrinsics of the operands' type (`llvm.smax.i64`, `llvm.maximum.f32`).
BINARY_INTRINSICS: dict[str, str] = {
    "arith.maxsi": "smax", "arith.minsi": "smin", "arith.maxui": "umax", "arith.minui": "umin",
    "arith.maximumf": "maximum", "arith.minimumf": "minimum",
    "arith.maxnumf": "maxnum", "arith.minnumf": "minnum",
    "math.copysign": "copysign", "math.powf": "pow",
}  # fmt: skip

# One-operand float intrinsics (`llvm.exp.f32`).
INTRINSICS: dict[str, str] = {
    "math.absf": "fabs", "math.ceil": "ceil", "math.floor": "floor", "math.trunc": "trunc",
    "math.roundeven": "roundeven", "math.sqrt": "sqrt", "math.exp": "exp", "math.exp2": "exp2",
    "math.log": "log", "math.log10": "log10", "math.log2": "log2", "math.sin": "sin",
    "math.cos": "cos", "math.tan": "tan",
}  # fmt: skip

# Float functions LLVM has no intrinsic of: the C library's (`tanhf` for f32).
LIBM: dict[str, str] = {
    "math.atan": "atan", "math.cbrt": "cbrt", "math.cosh": "cosh", "math.sinh": "sinh",
    "math.tanh": "tanh", "math.expm1": "expm1", "math.log1p": "log1p", "math.erf": "erf",
    "math.atan2": "atan2",
}  # fmt: skip


def libm_name(function: str, typ: str) -> str:
    return function + ("f" if typ == "float" else "")


# Casts between integer widths (index is i64): whether each widens by its sign.
WIDTH_CASTS: dict[str, bool] = {
    "arith.index_cast": True, "arith.extsi": True,
    "arith.index_castui": False, "arith.extui": False,
}  # fmt: skip
# Casts that are one LLVM instruction whatever the widths.
CONVERSIONS: dict[str, str] = {
    "arith.sitofp": "sitofp", "arith.uitofp": "uitofp", "arith.fptosi": "fptosi",
    "arith.fptoui": "fptoui", "arith.extf": "fpext", "arith.truncf": "fptrunc",
    "arith.trunci": "trunc", "arith.bitcast": "bitcast",
}  # fmt: skip
CASTS = frozenset(WIDTH_CASTS) | frozenset(CONVERSIONS)


def cast_instruction(op: Operation, source: str, target: str) -> str | None:
    """The LLVM cast of an `arith` cast op from scalar type `source` to `target`; None when
    the value is unchanged (an index cast between i64s). A bool is 0 or 1 in NumPy and in
    Numba's kernels, whichever way it is widened: it widens unsigned."""
    name = op.name
    if name == "arith.sitofp" and source == "i1":
        return "uitofp"
    if name not in WIDTH_CASTS:
        return CONVERSIONS[name]
    if source == target:
        return None
    if int(source[1:]) > int(target[1:]):
        return "trunc"
    return "sext" if WIDTH_CASTS[name] and source != "i1" else "zext"


__all__ = [
    "BINARY",
    "BINARY_INTRINSICS",
    "CASTS",
    "CONVERSIONS",
    "DIVISION",
    "FLOAT_BINARY",
    "INTRINSICS",
    "LIBM",
    "SIZES",
    "TYPE_SUFFIX",
    "WIDTH_CASTS",
    "NoLlvmForm",
    "cast_instruction",
    "constant",
    "float_constant",
    "libm_name",
    "llvm_type",
    "storage_type",
]
