r"""
Fixes for xDSL 0.74 bugs that tessc's IR runs into, applied once when a context is built.

- `linalg.generic` with several results prints its result types as `-> (t1, t2)`, as MLIR
  does, but xDSL 0.74 parses only `-> t1, t2`, so multi-output fused kernels (`tess-fuse`)
  could not be read back. The parser is taught the parenthesised form MLIR uses; the
  one-result form is unchanged.
- The lexer's string-literal regex, `"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`,
  nests `+` in `*`: on a string without its closing quote (`tess.add"(%a, %b) ...`) the
  engine tries every way of splitting the line into runs, 2^n for n characters, and
  `tessc-opt` (and `xdsl-opt`) hang. The same regex with possessive quantifiers (`++`,
  `*+`, Python >= 3.11) matches exactly the same strings — a run can neither contain
  nor end before a `"`, so giving characters back can never let the closing quote match —
  in linear time.
"""

from __future__ import annotations

import re
from typing import Any

from xdsl.dialects.linalg.ops import GenericOp
from xdsl.parser import Parser
from xdsl.utils.mlir_lexer import MLIRLexer

_applied = False


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

    parser.parse_comma_separated_list = results_in_parens  # type: ignore[method-assign]
    try:
        return _original_generic_parse(cls, parser)
    finally:
        del parser.parse_comma_separated_list


_original_generic_parse = GenericOp.parse.__func__  # type: ignore[attr-defined]


STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')
"""xDSL 0.74's `MLIRLexer._unescaped_characters_regex`, without exponential backtracking."""


def apply_xdsl_fixes() -> None:
    global _applied
    if not _applied:
        GenericOp.parse = classmethod(_parse_generic_with_parenthesised_results)  # type: ignore[method-assign]
        MLIRLexer._unescaped_characters_regex = STRING_LITERAL
        _applied = True
