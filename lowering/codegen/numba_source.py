"""
The Python source of what codegen's ops refer to: dtypes, constants, memref shapes,
globals, the LLVM intrinsics a module may need, and the names of values.

A constant is not a statement but a literal inlined where it is used (`np.float32(...)`
for an f32 constant: a bare Python float is f64 in Numba and would promote f32 code), a
`memref.global` a module-level NumPy array, and every value a readable local name made
unique per function that shadows no name of the generated module, no builtin and no
keyword (`RESERVED_NAMES`). Shared by the CPU and CUDA emitters and the kernels compiled
on their own (`numba_external`); the per-op statements are `numba_ops.py`'s. Shared code,
not a pass.
"""

from __future__ import annotations

import keyword
import math
import re
import struct
from collections.abc import Iterable, Sequence

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    Signedness,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from tessc.runtime import abi


class UnsupportedOpError(DiagnosticException):
    """The IR holds an op (or an op form) that has no Numba translation.

    Raised through `op.emit_error`, like a verifier error, so drivers report it at the op.
    """

    def __init__(self, op: Operation, reason: str = "no Numba translation"):
        self.op = op
        self.op_name = op.name
        super().__init__(f"cannot emit Numba code for '{op.name}': {reason}")


# ---------------------------------------------------------------------------------------
# types and constants
# ---------------------------------------------------------------------------------------

_FLOAT_DTYPES = {16: "float16", 32: "float32", 64: "float64"}
MANTISSA_BITS = {16: 10, 32: 23, 64: 52}
ITEMSIZES = {
    "float16": 2, "float32": 4, "float64": 8, "bool_": 1,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
}  # fmt: skip


class NoDtypeError(ValueError):
    """A type the Numba emitters have no NumPy dtype for (a vector, a complex, i128)."""


_DTYPE_NAMES: dict[Attribute, str] = {}


def dtype_name(typ: Attribute) -> str:
    """The NumPy dtype name of a scalar type (`index` is int64, `i1` is bool)."""
    name = _DTYPE_NAMES.get(typ)
    if name is None:
        name = _DTYPE_NAMES[typ] = _dtype_name(typ)  # asked for every op emitted
    return name


def signature_dtype_name(typ: Attribute) -> str:
    """The NumPy dtype name of an array of `typ` as the caller holds it: a 16-bit float is
    "bfloat16" (`ml_dtypes`) or "float16", which kernels hold as their bits (`dtype_name`)."""
    return NARROW_FLOAT_NAMES.get(type(typ)) or dtype_name(typ)


NARROW_FLOAT_NAMES: dict[type[Attribute], str] = {BFloat16Type: "bfloat16", Float16Type: "float16"}
"""The 16-bit floats: Numba has neither type, so a kernel holds one as its bits (uint16)
and computes in f32 (`NARROW_FLOAT_HELPERS` convert)."""


def is_narrow_float(typ: Attribute) -> bool:
    return type(typ) in NARROW_FLOAT_NAMES


def _dtype_name(typ: Attribute) -> str:
    if is_narrow_float(typ):
        return "uint16"
    if isinstance(typ, AnyFloat):
        return _FLOAT_DTYPES[typ.bitwidth]
    if isinstance(typ, IndexType):
        return "int64"
    if isinstance(typ, IntegerType):
        width = typ.width.data
        if width == 1:
            return "bool_"
        if width in (8, 16, 32, 64):
            unsigned = typ.signedness.data == Signedness.UNSIGNED
            return f"{'u' if unsigned else ''}int{width}"
    raise NoDtypeError(f"no NumPy dtype for type {typ}")


def scalar_ctor(typ: Attribute) -> str:
    return f"np.{dtype_name(typ)}"


def narrow_bits(value: float, typ: Attribute) -> int:
    """The bits of the bf16/f16 nearest `value` (through f32, ties to even), as a kernel
    holds them."""
    value = float(value)
    if math.isnan(value):
        return 0x7FC0 if isinstance(typ, BFloat16Type) else 0x7E00
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    try:
        if isinstance(typ, Float16Type):
            return struct.unpack("<H", struct.pack("<e", value))[0]
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:  # beyond the type's largest finite value: infinity
        return sign | (0x7F80 if isinstance(typ, BFloat16Type) else 0x7C00)
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def float_literal(value: float, typ: Attribute) -> str:
    if is_narrow_float(typ):  # the bits a kernel holds
        return f"np.uint16({narrow_bits(value, typ)})"
    if math.isnan(value):
        text = "np.nan"
    elif math.isinf(value):
        text = "np.inf" if value > 0 else "-np.inf"
    else:
        text = repr(float(value))
    if isinstance(typ, AnyFloat) and typ.bitwidth == 64:
        return f"({text})" if text.startswith("-") else text
    return f"{scalar_ctor(typ)}({text})"


def constant_expr(op: arith.ConstantOp) -> str:
    """The inline Python expression of a scalar `arith.constant`."""
    value = op.value
    if isinstance(value, FloatAttr):
        return float_literal(float(value.value.data), value.type)
    if isinstance(value, IntegerAttr):
        number = int(value.value.data)
        if isinstance(value.type, IntegerType) and value.type.width.data == 1:
            return "True" if number else "False"
        return f"({number})" if number < 0 else str(number)
    raise UnsupportedOpError(op, f"non-scalar constant {value}")


def memref_shape(typ: Attribute) -> tuple[int, ...]:
    """The shape of a memref type, -1 for a dynamic dimension."""
    assert isinstance(typ, MemRefType)
    return tuple(typ.get_shape())


def global_name(symbol: str) -> str:
    """The module-level name of the array `memref.global @symbol` becomes (Numba freezes a
    global array read by a compiled function as a constant)."""
    return f"G_{python_identifier(symbol)}"


def global_definition(op: memref.GlobalOp) -> str:
    """`memref.global @symbol = dense<...>` as a module-level NumPy array."""
    value = op.initial_value
    if not isinstance(value, DenseIntOrFPElementsAttr):
        raise UnsupportedOpError(op, "a memref.global without an initial value")
    element = value.get_element_type()
    numbers = value.get_values()
    if is_narrow_float(element):  # the bits a kernel holds
        numbers = [narrow_bits(v, element) for v in numbers]
    values = ", ".join(str(v) for v in numbers)
    shape = tuple_literal(memref_shape(op.type))
    dtype = dtype_name(element)
    return f"{global_name(op.sym_name.data)} = np.array([{values}], np.{dtype}).reshape({shape})"


def tuple_literal(items: Sequence[object]) -> str:
    """A Python tuple literal of `items` (`(8,)` for one item)."""
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(str(x) for x in items) + ")"


# Numba has no scalar bitcast (`x.view(np.int32)` is for arrays): an LLVM one, emitted into
# modules that use `arith.bitcast` (e.g. from `tess-expand-math`'s exponent arithmetic).
BITCAST_INTRINSIC = '''
@intrinsic
def bitcast(typingctx, value, target):
    """The bits of scalar `value` as the scalar type `target` (an LLVM bitcast)."""
    result = target.instance_type if isinstance(target, types.NumberClass) else target

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(result))

    return result(value, target), codegen
'''.strip()


# 16-bit floats in kernels: held as their bits (uint16), converted to f32 where loaded
# (`arith.extf`) and rounded to nearest even where stored (`arith.truncf`), with integer
# operations on the f32 bits (`bitcast`), so the same source runs on the CPU, on CUDA and
# in the CUDA simulator. `{decorator}` is the target's device-function decorator.
NARROW_FLOAT_HELPERS = '''
{decorator}
def bf16_to_f32(bits):
    """A bfloat16's bits as the f32 it is (exact: its top 16 bits)."""
    return bitcast(np.uint32(np.uint32(bits) << np.uint32(16)), np.float32)


{decorator}
def f32_to_bf16(value):
    """The bits of the bfloat16 nearest f32 `value`, ties to even; NaN stays (quiet) NaN."""
    bits = np.int64(bitcast(np.float32(value), np.uint32))
    if value != value:
        return np.uint16((bits >> 16) | 64)
    return np.uint16((bits + 32767 + ((bits >> 16) & 1)) >> 16)


{decorator}
def f16_to_f32(bits):
    """A float16's bits as the f32 it is (exact)."""
    half = np.int64(bits)
    sign = (half & 32768) << 16
    magnitude = half & 32767
    if magnitude >= 31744:  # inf or NaN
        return bitcast(np.uint32(sign | 2139095040 | ((magnitude & 1023) << 13)), np.float32)
    if magnitude < 1024:  # zero or subnormal: magnitude * 2^-24
        scaled = np.float32(magnitude) * np.float32(5.9604644775390625e-08)
        return -scaled if sign else scaled
    return bitcast(np.uint32(sign | ((magnitude << 13) + 939524096)), np.float32)


{decorator}
def f32_to_f16(value):
    """The bits of the float16 nearest f32 `value`, ties to even; NaN stays (quiet) NaN."""
    bits = np.int64(bitcast(np.float32(value), np.uint32))
    sign = (bits >> 16) & 32768
    magnitude = bits & 2147483647
    if magnitude > 2139095040:  # NaN
        return np.uint16(sign | 32256 | ((magnitude >> 13) & 1023))
    if magnitude >= 1199566848:  # from 65520 on: rounds to inf
        return np.uint16(sign | 31744)
    if magnitude >= 947912704:  # normal: drop 13 mantissa bits, ties to even
        return np.uint16(sign | ((magnitude - 939524096 + 4095 + ((magnitude >> 13) & 1)) >> 13))
    scaled = abs(np.float32(value)) * np.float32(16777216.0)  # subnormal units, exact
    units = np.int64(scaled)
    rest = scaled - np.float32(units)
    if rest > np.float32(0.5) or (rest == np.float32(0.5) and units & 1):
        units += 1
    return np.uint16(sign | units)
'''.strip()


# `arith.maximumf`/`minimumf` on the CPU: LLVM's `llvm.maximum`/`llvm.minimum`, which have
# arith's semantics (NaN if either operand is NaN, -0 below +0). `np.maximum` is the same
# function built from compares and selects, which LLVM does not recognise as a max: a row
# max (attention's online softmax, a softmax, a max-pool) then runs as a scalar chain of
# three selects per element; the intrinsic is a vectorised reduction (the block step's
# attention forward kernel: 518 -> 274 us of CPU on one thread).
FLOAT_MINMAX_INTRINSICS = '''
def float_minmax(intrinsic_name):
    """An intrinsic `f(lhs, rhs)` calling `llvm.<intrinsic_name>` on two floats alike."""

    @intrinsic
    def minmax(typingctx, lhs, rhs):
        def codegen(context, builder, signature, args):
            value = context.get_value_type(signature.return_type)
            name = f"llvm.{intrinsic_name}.f{context.get_abi_sizeof(value) * 8}"
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(value, [value, value]), name
            )
            return builder.call(function, args)

        return lhs(lhs, rhs), codegen

    return minmax


fmaximum = float_minmax("maximum")
fminimum = float_minmax("minimum")
'''.strip()


HUGE_PAGES_INTRINSIC = '''
@intrinsic
def huge_pages(typingctx, array):
    """madvise(data, bytes, MADV_HUGEPAGE) for a contiguous array: its 2 MiB pages may
    then be huge pages (an advice: where the kernel refuses, nothing changes)."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0])
        i8p, i64, i32 = ir.IntType(8).as_pointer(), ir.IntType(64), ir.IntType(32)
        advise = ir.FunctionType(i32, [i8p, i64, i32])
        madvise = cgutils.get_or_insert_function(builder.module, advise, "madvise")
        size = context.get_abi_sizeof(context.get_value_type(signature.args[0].dtype))
        length = builder.mul(data.nitems, ir.Constant(i64, size))
        builder.call(madvise, [builder.bitcast(data.data, i8p), length, ir.Constant(i32, 14)])
        return context.get_dummy_value()

    return types.none(array), codegen
'''.strip()


# ---------------------------------------------------------------------------------------
# value names
# ---------------------------------------------------------------------------------------

# Names the generated module defines or imports at the top level (see `to_numba`), Python's
# builtins and its keywords: locals and function names must not shadow them.
_MODULE_NAMES = {
    "np", "math", "njit", "prange", "types", "intrinsic", "bitcast", "FASTMATH", abi.SIGNATURES,
    "ir", "cgutils", "micro_mma", "float_minmax", "fmaximum", "fminimum",
    "carray", "member_pointer", "parallel_for", "external", "void", "voidptr", "intp",
}  # fmt: skip
_BUILTIN_NAMES = set(
    "abs all any bool dict divmod enumerate filter float format hash id int isinstance iter len "
    "list map max min next object pow print range reversed round set slice sorted str sum super "
    "tuple type zip".split()
)
RESERVED_NAMES: frozenset[str] = frozenset(_MODULE_NAMES | _BUILTIN_NAMES | set(keyword.kwlist))


def python_identifier(name: str) -> str:
    """`name` made a valid Python identifier (`my.func-1` -> `my_func_1`)."""
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = "v" + ident
    return ident


class Namer:
    """Unique, readable local names within one function."""

    def __init__(self, taken: Iterable[str]):
        self.taken = set(taken) | RESERVED_NAMES
        self.counters: dict[str, int] = {}

    def hinted(self, hint: str) -> str:
        name = python_identifier(hint)
        if name not in self.taken:
            self.taken.add(name)
            return name
        return self.numbered(name + "_")

    def numbered(self, stem: str) -> str:
        k = self.counters.get(stem, 0)
        while f"{stem}{k}" in self.taken:
            k += 1
        self.counters[stem] = k + 1
        self.taken.add(f"{stem}{k}")
        return f"{stem}{k}"

    def for_value(self, value: SSAValue, stem: str) -> str:
        return self.hinted(value.name_hint) if value.name_hint else self.numbered(stem)
