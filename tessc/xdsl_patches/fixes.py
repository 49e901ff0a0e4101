"""
The three bugs of xDSL 0.74 that tessc's IR hits, fixed: multi-result `linalg.generic`s
print a form xDSL cannot read back; the lexer's string regex backtracks exponentially on an
unterminated string; structural equivalence ignores result types (so CSE merged ops that
differ only there). Each fix must be idempotent and must not change what xDSL already does
on valid input; each has a test showing stock xDSL's bug (tests/test_xdsl_patches.py).
"""

from __future__ import annotations

import re
from typing import Any

from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import IRNode, Operation
from xdsl.parser import Parser
from xdsl.utils.mlir_lexer import MLIRLexer

from tessc.xdsl_patches.registry import Patch

_original_generic_parse = GenericOp.parse.__func__  # type: ignore[attr-defined]


def parse_generic_with_parenthesised_results(cls: type[GenericOp], parser: Parser) -> Any:
    """`GenericOp.parse`, also reading the result types of a multi-result generic in the
    form MLIR (and xDSL's printer) gives them, `-> (t1, t2)`; xDSL 0.74 parses only
    `-> t1, t2`, so multi-output fused kernels (`tess-fuse`) could not be read back. The
    one-result form is unchanged."""
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


PARENTHESISED_GENERIC_RESULTS = Patch(
    GenericOp,
    "parse",
    classmethod(parse_generic_with_parenthesised_results),
    "fix",
    upstream=(
        "linalg: parse `-> (t1, t2)` result types of `linalg.generic`. GenericOp.print "
        "prints several result types in parentheses, as MLIR does, but GenericOp.parse "
        "reads them with a bare comma-separated list: parse them with "
        "`parse_optional_comma_separated_list(Delimiter.PAREN, ...)` when the next token is "
        "`(`, else the single type; add a round-trip filecheck of a two-result generic."
    ),
)


STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')
r"""xDSL 0.74's `MLIRLexer._unescaped_characters_regex`,
`"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`, with possessive quantifiers: the
original nests `+` in `*`, so on a string without its closing quote (`tess.add"(%a, %b)`)
the engine tries every way of splitting the line into runs, 2^n for n characters, and
`tessc-opt` (and `xdsl-opt`) hang. A run can neither contain nor end before a `"`, so giving
characters back can never let the closing quote match: the possessive form (Python >= 3.11)
matches exactly the same strings, in linear time."""

LINEAR_TIME_STRING_LITERALS = Patch(
    MLIRLexer,
    "_unescaped_characters_regex",
    STRING_LITERAL,
    "fix",
    upstream=(
        "mlir_lexer: string-literal regex in linear time. `_unescaped_characters_regex` "
        r"nests `[^...]+` inside `(...)*`, which backtracks exponentially on an "
        'unterminated string literal (xdsl-opt hangs on `"abc...` without its closing '
        "quote). Use possessive quantifiers (`++`, `*+`; Python >= 3.11) or drop the inner "
        "`+`; same matches. Add a test lexing a 10,000-character unterminated string."
    ),
)


_original_structurally_equivalent = Operation.is_structurally_equivalent


def structurally_equivalent_with_types(
    self: Operation, other: IRNode, context: dict[Any, Any] | None = None
) -> bool:
    """`Operation.is_structurally_equivalent`, which compares names, operands, attributes,
    properties and regions but not result types, so `arith.fptosi %x : f32 to i32` and
    `... to i64` were "equivalent", and so were two regions differing only there: xDSL's
    `cse` merged two `scf.if`s computing x through i32 and through i64, and
    `tess-cse-generics` two generic bodies. Ops now also need equal result types."""
    if isinstance(other, Operation) and self.result_types != other.result_types:
        return False
    return _original_structurally_equivalent(self, other, context)


EQUIVALENCE_COMPARES_RESULT_TYPES = Patch(
    Operation,
    "is_structurally_equivalent",
    structurally_equivalent_with_types,
    "fix",
    upstream=(
        "ir: Operation.is_structurally_equivalent compares result types. Two ops differing "
        "only in their result types (`arith.fptosi %x : f32 to i32` / `to i64`) are "
        "reported equivalent, and CSE of region-holding ops (`scf.if`) merges them, a "
        "miscompile. Return False when `self.result_types != other.result_types`; add a "
        "CSE filecheck with two such `scf.if`s."
    ),
)

PATCHES = (
    PARENTHESISED_GENERIC_RESULTS,
    LINEAR_TIME_STRING_LITERALS,
    EQUIVALENCE_COMPARES_RESULT_TYPES,
)

__all__ = [
    "EQUIVALENCE_COMPARES_RESULT_TYPES",
    "LINEAR_TIME_STRING_LITERALS",
    "PARENTHESISED_GENERIC_RESULTS",
    "PATCHES",
    "STRING_LITERAL",
    "parse_generic_with_parenthesised_results",
    "structurally_equivalent_with_types",
]
