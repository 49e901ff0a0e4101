"""
Every change tessc makes to xDSL 0.74's own code, each with the xDSL behaviour it works
around: here and in `tessc.xdsl_speedups`. Nothing else in tessc assigns to an xDSL class.

There are two kinds:

- *fixes*, applied once per process by `apply_xdsl_fixes()` (which `tessc.context` calls
  whenever it builds or extends a `Context`, so every tool and test parsing tessc IR has
  them). Each is a function decorated with `@xdsl_fix`; to add one, write the function
  here with a docstring naming the xDSL bug and the IR that hits it, and a test that fails
  without it. They must be idempotent and must not change what valid input xDSL already
  handles. The compile-time fixes — the same answers, computed without the super-linear
  or repeated work xDSL does (tests count the work, not the time) — are in
  `tessc.xdsl_speedups`, registered the same way;
- *scoped hooks*, active only inside a `with` block: `recording_failing_ops()`, which the
  drivers (`tessc-opt`, `tessc-run`, via `tessc.diagnostics`) wrap around a run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from xdsl.dialects.builtin import Float80Type, Float128Type
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import IRNode, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import Rewriter
from xdsl.utils.diagnostic import Diagnostic
from xdsl.utils.mlir_lexer import MLIRLexer

from tessc.dialects.locations import stamp_location

# ---------------------------------------------------------------------------------------
# Fixes (process-wide, applied once)
# ---------------------------------------------------------------------------------------

_FIXES: list[Callable[[], None]] = []
_applied = False


def xdsl_fix(fix: Callable[[], None]) -> Callable[[], None]:
    """Register `fix` (a function that patches xDSL) to run in `apply_xdsl_fixes()`."""
    _FIXES.append(fix)
    return fix


def apply_xdsl_fixes() -> None:
    """Apply every registered fix, once per process."""
    global _applied
    if not _applied:
        import tessc.xdsl_speedups  # noqa: F401  (registers its fixes)

        for fix in _FIXES:
            fix()
        _applied = True


_original_generic_parse = GenericOp.parse.__func__  # type: ignore[attr-defined]


def _parse_generic_with_parenthesised_results(cls: type[GenericOp], parser: Parser) -> Any:
    parse_list = parser.parse_comma_separated_list

    def results_in_parens(delimiter: Any, parse: Any, context_msg: str = "") -> Any:
        if (
            delimiter is Parser.Delimiter.NONE
            and parse == parser.parse_attribute
            and parser._current_token.text == "("
        ):
            return parse_list(Parser.Delimiter.PAREN, parse, context_msg)
        return parse_list(delimiter, parse, context_msg)

    # A generic nested in a generic's body installs its own wrapper and must restore the
    # outer one, not remove it (the outer `del` then failed: an AttributeError).
    outer = vars(parser).get("parse_comma_separated_list")
    parser.parse_comma_separated_list = results_in_parens  # type: ignore[method-assign]
    try:
        return _original_generic_parse(cls, parser)
    finally:
        if outer is None:
            del parser.parse_comma_separated_list
        else:
            parser.parse_comma_separated_list = outer  # type: ignore[method-assign]


@xdsl_fix
def parse_parenthesised_generic_results() -> None:
    """`linalg.generic` with several results prints its result types as `-> (t1, t2)`, as
    MLIR does, but xDSL 0.74 parses only `-> t1, t2`, so multi-output fused kernels
    (`tess-fuse`) could not be read back. The parser is taught the parenthesised form MLIR
    uses; the one-result form is unchanged."""
    GenericOp.parse = classmethod(_parse_generic_with_parenthesised_results)  # type: ignore[method-assign]


STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')
"""xDSL 0.74's `MLIRLexer._unescaped_characters_regex`, without exponential backtracking."""


@xdsl_fix
def string_literal_regex_in_linear_time() -> None:
    r"""The lexer's string-literal regex, `"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`,
    nests `+` in `*`: on a string without its closing quote (`tess.add"(%a, %b) ...`) the
    engine tries every way of splitting the line into runs, 2^n for n characters, and
    `tessc-opt` (and `xdsl-opt`) hang. The same regex with possessive quantifiers (`++`,
    `*+`, Python >= 3.11) matches exactly the same strings — a run can neither contain
    nor end before a `"`, so giving characters back can never let the closing quote match —
    in linear time."""
    MLIRLexer._unescaped_characters_regex = STRING_LITERAL


_original_structurally_equivalent = Operation.is_structurally_equivalent


def _structurally_equivalent_with_types(
    self: Operation, other: IRNode, context: dict[Any, Any] | None = None
) -> bool:
    if isinstance(other, Operation) and self.result_types != other.result_types:
        return False
    return _original_structurally_equivalent(self, other, context)


@xdsl_fix
def structural_equivalence_compares_result_types() -> None:
    """`Operation.is_structurally_equivalent` compares names, operands, attributes,
    properties and regions but not result types, so `arith.fptosi %x : f32 to i32` and
    `... to i64` are "equivalent", and so are two regions differing only there: xDSL's
    `cse` (which compares region-holding ops that way) merged two `scf.if`s computing x
    through i32 and through i64, and `tess-cse-generics` two generic bodies (x -> f32 -> i64
    and x -> f64 -> i64). Ops now also need equal result types."""
    Operation.is_structurally_equivalent = _structurally_equivalent_with_types  # type: ignore[method-assign]


def _encode_extended(value: float, mantissa_bits: int, explicit_one: bool) -> int:
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


def _decode_extended(bits: int, mantissa_bits: int, explicit_one: bool) -> float:
    """The double nearest the f80/f128 `bits` (`_encode_extended`'s inverse)."""
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


def _extended_codec(mantissa_bits: int, explicit_one: bool) -> dict[str, Any]:
    """`PackableType`'s methods for an f80/f128 type of `size` bytes."""

    def pack(self: Any, values: Sequence[float]) -> bytes:
        return b"".join(
            _encode_extended(float(v), mantissa_bits, explicit_one).to_bytes(self.size, "little")
            for v in values
        )

    def iter_unpack(self: Any, buffer: Any) -> Iterator[float]:
        raw = bytes(memoryview(buffer))
        if len(raw) % self.size:
            raise ValueError(f"Buffer length {len(raw)} not multiple of {self.name} size")
        for start in range(0, len(raw), self.size):
            bits = int.from_bytes(raw[start : start + self.size], "little")
            yield _decode_extended(bits, mantissa_bits, explicit_one)

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


@xdsl_fix
def extended_float_attributes() -> None:
    """xDSL 0.74 parses `1.5 : f80` (and `: f128`), which MLIR accepts, but its f80/f128
    types have no byte format (`format` raises NotImplementedError): printing such an
    attribute, even inside a diagnostic about it (`tess.fill` takes an f64), and parsing a
    hex literal of it were tracebacks. They get the byte encodings LLVM uses (x87's 80-bit
    extended with its explicit integer bit, 10 bytes; IEEE quad, 16), for the double
    that xDSL keeps as the value."""
    for typ, mantissa_bits, explicit_one in ((Float80Type, 64, True), (Float128Type, 112, False)):
        for name, method in _extended_codec(mantissa_bits, explicit_one).items():
            setattr(typ, name, method)


def _as_ops(new_ops: Operation | Sequence[Operation]) -> Sequence[Operation]:
    return (new_ops,) if isinstance(new_ops, Operation) else new_ops


_original_static_replace_op = Rewriter.replace_op
_original_pattern_replace = PatternRewriter.replace
_original_pattern_rewriter_init = PatternRewriter.__init__


def _static_replace_op_keeping_location(
    op: Operation,
    new_ops: Operation | Sequence[Operation],
    new_results: Sequence[SSAValue | None] | None = None,
    safe_erase: bool = True,
) -> None:
    stamp_location(_as_ops(new_ops), op.location)
    _original_static_replace_op(op, new_ops, new_results, safe_erase)


def _pattern_replace_keeping_location(
    self: PatternRewriter,
    op: Operation,
    new_ops: Operation | Sequence[Operation],
    new_results: Sequence[SSAValue | None] | None = None,
    safe_erase: bool = True,
) -> None:
    stamp_location(_as_ops(new_ops), op.location)
    _original_pattern_replace(self, op, new_ops, new_results, safe_erase)


def _pattern_rewriter_init_stamping(self: PatternRewriter, insert_point: Any) -> None:
    _original_pattern_rewriter_init(self, insert_point)

    def stamp_matched(op: Operation) -> None:
        # The walker reuses one rewriter, resetting the matched op: read it at insertion.
        matched = self._current_operation
        if matched is not None:
            stamp_location((op,), matched.location)

    self.operation_insertion_handler.append(stamp_matched)


@xdsl_fix
def rewrites_keep_source_locations() -> None:
    """Ops a pass creates have no location in xDSL 0.74 (MLIR's builders take the
    matched op's), so IR a pass broke was reported at no line of the user's file. Now an op
    replacing another (`Rewriter.replace_op`, `PatternRewriter.replace`) takes the replaced
    op's location, and an op a pattern inserts takes the matched op's, each with the ops
    nested in it; ops that already have a location (moved, cloned) keep theirs."""
    Rewriter.replace_op = staticmethod(_static_replace_op_keeping_location)  # type: ignore[method-assign]
    PatternRewriter.replace = _pattern_replace_keeping_location  # type: ignore[method-assign]
    PatternRewriter.__init__ = _pattern_rewriter_init_stamping  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------------
# Scoped hooks
# ---------------------------------------------------------------------------------------

_FAILING_OP = "_tessc_failing_op"
_FAILING_MESSAGE = "_tessc_failing_message"


@contextmanager
def recording_failing_ops() -> Iterator[None]:
    """While active, an exception raised by `op.emit_error` remembers `op`
    (`recorded_failing_op`) and the message given to `emit_error` (`recorded_message`).

    xDSL 0.74 raises every op error (`Operation.emit_error`, which every failing verifier
    goes through) via `Diagnostic.raise_exception`, which puts the op into the exception's
    *text* only: the exception does not keep the op, so a driver cannot print the op's
    source location as MLIR does. This wraps that method to attach the first op with a
    message to the exception; the original is restored on exit.
    """
    original = Diagnostic.raise_exception

    def raise_exception(self: Diagnostic, ir: IRNode, underlying_error: Exception) -> NoReturn:
        if self.op_messages and not hasattr(underlying_error, _FAILING_OP):
            op, messages = next(iter(self.op_messages.items()))
            setattr(underlying_error, _FAILING_OP, op)
            setattr(underlying_error, _FAILING_MESSAGE, messages[0] if messages else "")
        original(self, ir, underlying_error)

    Diagnostic.raise_exception = raise_exception  # type: ignore[method-assign]
    try:
        yield
    finally:
        Diagnostic.raise_exception = original  # type: ignore[method-assign]


def recorded_failing_op(error: BaseException) -> Operation | None:
    """The op `recording_failing_ops` attached to `error`, if any."""
    return getattr(error, _FAILING_OP, None)


def recorded_message(error: BaseException) -> str:
    """The message given to `emit_error` that `recording_failing_ops` attached, or ""."""
    return getattr(error, _FAILING_MESSAGE, "")


__all__ = [
    "apply_xdsl_fixes",
    "recorded_failing_op",
    "recorded_message",
    "recording_failing_ops",
    "xdsl_fix",
]
