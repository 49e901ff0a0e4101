"""
Fix: f80 and f128 float attributes. xDSL 0.74 parses `1.5 : f80` (and `: f128`), which
MLIR accepts, but its `Float80Type`/`Float128Type` have no byte format (`format` raises
NotImplementedError), so printing such an attribute, even inside a diagnostic about it
(`tess.fill` takes an f64), and parsing a hex literal of it were tracebacks. They get the
byte encodings LLVM uses (x87's 80-bit extended with its explicit integer bit, 10 bytes;
IEEE quad, 16) for the double xDSL keeps as the value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from xdsl.dialects.builtin import Float80Type, Float128Type

from tessc.xdsl_patches.registry import Patch


def encode_extended(value: float, mantissa_bits: int, explicit_one: bool) -> int:
    """The bits of `value` (a double, so exact) as an IEEE-style float of a 15-bit exponent
    (bias 16383) and `mantissa_bits`, the leading one stored (x87's f80) or implicit (f128)."""
    sign = int(math.copysign(1.0, value) < 0) << (15 + mantissa_bits)
    if math.isnan(value):
        return (0x7FFF << mantissa_bits) | (
            3 << (mantissa_bits - 2) if explicit_one else 1 << (mantissa_bits - 1)
        )
    if math.isinf(value):
        return sign | (0x7FFF << mantissa_bits) | (int(explicit_one) << (mantissa_bits - 1))
    if value == 0.0:
        return sign
    fraction, exponent = math.frexp(abs(value))  # 0.5 <= fraction < 1
    significand = int(fraction * 2.0**53) << (mantissa_bits - 53 + int(not explicit_one))
    if not explicit_one:
        significand -= 1 << mantissa_bits
    return sign | ((exponent - 1 + 16383) << mantissa_bits) | significand


def decode_extended(bits: int, mantissa_bits: int, explicit_one: bool) -> float:
    """The double nearest the f80/f128 `bits` (`encode_extended`'s inverse)."""
    negative = (bits >> (15 + mantissa_bits)) & 1
    biased = (bits >> mantissa_bits) & 0x7FFF
    significand = bits & ((1 << mantissa_bits) - 1)
    fraction = significand & ((1 << (mantissa_bits - int(explicit_one))) - 1)
    if biased == 0x7FFF:
        return math.nan if fraction else -math.inf if negative else math.inf
    if not explicit_one and biased:
        significand |= 1 << mantissa_bits
    shift = max(biased, 1) - 16383 - (mantissa_bits - int(explicit_one))
    try:
        magnitude = math.ldexp(float(significand), shift)
    except OverflowError:
        magnitude = math.inf
    return -magnitude if negative else magnitude


def extended_codec(mantissa_bits: int, explicit_one: bool) -> dict[str, Any]:
    """`PackableType`'s methods for an f80/f128 type of `size` bytes."""

    def pack(self: Any, values: Sequence[float]) -> bytes:
        return b"".join(
            encode_extended(float(v), mantissa_bits, explicit_one).to_bytes(self.size, "little")
            for v in values
        )

    def iter_unpack(self: Any, buffer: Any) -> Iterator[float]:
        raw = bytes(memoryview(buffer))
        if len(raw) % self.size:
            raise ValueError(f"Buffer length {len(raw)} not multiple of {self.name} size")
        for start in range(0, len(raw), self.size):
            bits = int.from_bytes(raw[start : start + self.size], "little")
            yield decode_extended(bits, mantissa_bits, explicit_one)

    def unpack(self: Any, buffer: Any, num: int) -> tuple[float, ...]:
        values = tuple(iter_unpack(self, buffer))
        if len(values) != num:
            raise ValueError(f"Buffer holds {len(values)} {self.name} values, not {num}")
        return values

    def pack_into(self: Any, buffer: Any, offset: int, value: float) -> None:
        memoryview(buffer)[offset : offset + self.size] = pack(self, [value])

    return {
        "pack": pack,
        "iter_unpack": iter_unpack,
        "unpack": unpack,
        "pack_into": pack_into,
        "compile_time_size": property(lambda self: self.size),
    }


UPSTREAM = (
    "builtin: byte formats for f80 and f128. `Float80Type.format`/`Float128Type.format` "
    "raise NotImplementedError, so a FloatAttr of those types cannot be printed (its hex "
    "form), packed into a DenseIntOrFPElementsAttr or parsed from hex, although the parser "
    "accepts `1.5 : f80` as MLIR does. Give PackableType's pack/unpack/iter_unpack/"
    "pack_into for them LLVM's encodings (x87 extended with its explicit integer bit in 10 "
    "bytes, IEEE binary128 in 16), with round-trip tests of 0, -0, inf, nan and normals."
)

PATCHES: tuple[Patch, ...] = tuple(
    Patch(float_type, name, method, "fix", upstream=UPSTREAM)
    for float_type, mantissa_bits, explicit_one in (
        (Float80Type, 64, True),
        (Float128Type, 112, False),
    )
    for name, method in extended_codec(mantissa_bits, explicit_one).items()
)
"""PackableType's methods for f80 (64 mantissa bits, the leading one stored) and f128."""

__all__ = ["PATCHES", "decode_extended", "encode_extended", "extended_codec"]
