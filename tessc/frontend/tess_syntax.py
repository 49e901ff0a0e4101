"""
The syntax of the `.tess` language: `tess.lark` parsed by lark's LALR parser, with an
indentation post-lexer for Python's blocks (`TessIndenter`).

`parse_tree(text, filename)` is the parse tree `tess_lang` lowers to IR. A syntax error is a
`TessSourceError` at `file:line:col` that says what was found and what the parser could
have taken there: the expected set is asked of the parser in its error state (LALR's own
expected set holds lookaheads of merged states, so it names tokens that cannot follow),
and the layout tokens are named for what they mean ("a new line", "the end of the block").
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import Indenter
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Span

from tessc.dialects.builder_types import TessError

GRAMMAR_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tess.lark")


class TessSourceError(ParseError, TessError):
    """An error in a `.tess` file at `filename:line:column`."""

    def __init__(self, text: str, filename: str, offset: int, message: str, length: int = 1):
        offset = max(0, min(offset, len(text)))
        end = min(offset + max(length, 1), len(text))
        ParseError.__init__(self, Span(offset, end, Input(text, filename)), message)
        location = self.span.get_location()
        self.filename, self.line, self.column = filename, location.line, location.col
        self.message = message

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}: error: {self.message}"


class TessIndenter(Indenter):
    """Python-style INDENT/DEDENT tokens; an inconsistent dedent is a located error."""

    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token: Token) -> Iterator[Token]:
        indent_str = token.rsplit("\n", 1)[1]
        indent = indent_str.count(" ") + indent_str.count("\t") * self.tab_len
        if self.paren_level == 0 and indent not in self.indent_level[:-1]:
            if indent < self.indent_level[-1]:
                levels = ", ".join(str(level + 1) for level in self.indent_level)
                raise _LocatedLexError(
                    token.end_pos or 0,
                    f"unindent to column {indent + 1} does not match any outer indentation "
                    f"level (columns {levels})",
                )
        yield from super().handle_NL(token)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return super().process(self._check_brackets(stream))

    def _check_brackets(self, stream: Iterator[Token]) -> Iterator[Token]:
        """Pass tokens through; an unclosed bracket at the end is an error at the bracket."""
        open_brackets: list[Token] = []
        for token in stream:
            if token.type in self.OPEN_PAREN_types:
                open_brackets.append(token)
            elif token.type in self.CLOSE_PAREN_types and open_brackets:
                open_brackets.pop()
            yield token
        if open_brackets:
            bracket = open_brackets[-1]
            raise _LocatedLexError(bracket.start_pos or 0, f"'{bracket}' was never closed")


class _LocatedLexError(Exception):
    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset = offset


@functools.cache
def tess_parser() -> Lark:
    with open(GRAMMAR_PATH, encoding="utf-8") as grammar:
        return Lark(
            grammar.read(),
            parser="lalr",
            postlex=TessIndenter(),
            propagate_positions=True,
            maybe_placeholders=True,
        )


_TERMINAL_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "_NL": "a new line",
    "_INDENT": "an indented block",
    "_DEDENT": "the end of the block",
    "$END": "the end of the file",
}


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    for terminal in tess_parser().terminals:
        if terminal.name == name:
            return repr(terminal.pattern.value) if terminal.pattern.type == "str" else name
    return name


def _accepted_terminals(state: Any) -> set[str]:
    """The terminals the LALR parser in `state` can shift (as `InteractiveParser.accepts`)."""
    try:
        conf = copy.copy(state.parse_conf)
        conf.callbacks = {}
        accepted = set()
        for name in state.parse_conf.parse_table.states[state.position]:
            if name.isupper():
                cursor = state.copy(deepcopy_values=False)
                cursor.parse_conf = conf
                try:
                    cursor.feed_token(Token(name, ""))
                except UnexpectedToken:
                    continue
                accepted.add(name)
        return accepted
    except AttributeError:  # no parser state (another parser or lexer)
        return set()


def _syntax_error(error: UnexpectedInput, text: str, filename: str) -> TessSourceError:
    expected: set[str] = set()
    if isinstance(error, UnexpectedToken):
        token = error.token
        # LALR's expected set holds lookaheads of merged states; ask the parser instead.
        parser = error.interactive_parser
        expected = set(parser.accepts() if parser is not None else error.expected)
        if token.type == "$END":
            found, offset = "end of file", len(text)
        elif token.type in ("_NL", "_INDENT", "_DEDENT"):
            found = {"_NL": "end of line", "_INDENT": "indentation"}.get(token.type, "end of block")
            # A newline token starts at the end of the line it ends: point there.
            offset = token.start_pos or 0
            if token.type == "_INDENT":
                offset = token.end_pos or offset
        else:
            found, offset = repr(str(token)), token.start_pos or 0
    elif isinstance(error, UnexpectedCharacters):
        found, offset = repr(text[error.pos_in_stream]), error.pos_in_stream
        expected = _accepted_terminals(error.state) or set(error.allowed or ())
    elif isinstance(error, UnexpectedEOF):
        found, offset = "end of file", len(text)
        expected = set(error.expected)
    else:
        found, offset = "unexpected input", getattr(error, "pos_in_stream", 0) or 0
    names = sorted({_describe_terminal(name) for name in expected})
    message = f"unexpected {found}"
    if names:
        message += "; expected " + (names[0] if len(names) == 1 else "one of " + ", ".join(names))
    return TessSourceError(text, filename, offset, message)


def parse_tree(text: str, filename: str = "<tess>") -> Tree:
    """The lark parse tree of a `.tess` file (syntax errors as `TessSourceError`)."""
    source = text if text.endswith("\n") else text + "\n"
    try:
        return tess_parser().parse(source)
    except UnexpectedInput as error:
        raise _syntax_error(error, source, filename) from None
    except _LocatedLexError as error:
        raise TessSourceError(source, filename, error.offset, str(error)) from None


__all__ = ["TessIndenter", "TessSourceError", "parse_tree", "tess_parser"]
