"""
Fixes for xDSL 0.74 bugs that tessc's IR runs into, applied once when a context is built.

- `linalg.generic` with several results prints its result types as `-> (t1, t2)`, as MLIR
  does, but xDSL 0.74 parses only `-> t1, t2`, so multi-output fused kernels (`tess-fuse`)
  could not be read back. The parser is taught the parenthesised form MLIR uses; the
  one-result form is unchanged.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.linalg.ops import GenericOp
from xdsl.parser import Parser

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


def apply_xdsl_fixes() -> None:
    global _applied
    if not _applied:
        GenericOp.parse = classmethod(_parse_generic_with_parenthesised_results)  # type: ignore[method-assign]
        _applied = True
