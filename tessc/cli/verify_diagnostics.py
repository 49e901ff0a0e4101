"""
`tessc-opt --verify-diagnostics`: the input's `expected-*` comments against its diagnostics.

As MLIR's `SourceMgrDiagnosticVerifierHandler`: a comment
`expected-<error|warning|remark|note>[-re] [@+N|@-N|@above|@below|@unknown] {{text}}`
expects a diagnostic of that severity whose message contains `text`, on the comment's line,
N lines below or above it, the nearest line above or below that holds no expectation, or at
no location (tessc's unlocated `file: error: ...`). With `-re`, `{{regex}}` blocks inside
`text` are regular expressions (Python's `re`; the rest is literal). Columns are not checked
and one expectation may absorb several identical diagnostics. A diagnostic nothing expects
(`unexpected error: ...`, at its location) and an expectation nothing met (`expected error
"..." was not produced`, at the comment) are errors: tessc-opt exits 1. With
`--split-input-file` each chunk is checked against its own expectations. The driver's note
`while running pass ...` is context mlir-opt does not print, not a diagnostic to expect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation
from xdsl.utils.exceptions import ParseError

from tessc.diagnostics import SourceChunk, decode_source, format_diagnostic

SEVERITIES = ("error", "warning", "remark", "note")

EXPECTATION = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *"
    r"\{\{(.*)\}\}$"
)
"""MLIR's pattern, searched in each line with trailing blanks removed."""


@dataclass(frozen=True)
class Emitted:
    """A diagnostic the compiler reported: its severity, one-line message and location
    (`file`, `line` and `column` are None for an unlocated one)."""

    severity: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None


@dataclass
class Expectation:
    """One `expected-*` comment: what it expects where, and where it is written."""

    severity: str
    text: str
    line: int | None  # the line it expects the diagnostic on; None for `@unknown`
    pattern: re.Pattern[str] | None  # for `-re`
    comment_line: int
    comment_column: int
    matched: bool = False

    def matches(self, message: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(message) is not None
        return self.text in message


def expectation_regex(text: str) -> re.Pattern[str]:
    """`text` of an `expected-*-re` comment as a pattern: `{{...}}` blocks are regular
    expressions, the rest literal. Raises `ValueError` with MLIR's messages."""
    parts: list[str] = []
    rest = text
    while rest:
        start = rest.find("{{")
        if start < 0:
            parts.append(re.escape(rest))
            break
        parts.append(re.escape(rest[:start]))
        rest = rest[start + 2 :]
        end = rest.find("}}")
        if end < 0:
            raise ValueError("found start of regex with no end '}}'")
        block = rest[:end]
        try:
            re.compile(block)
        except re.error as error:
            raise ValueError(f"invalid regex: {error}") from None
        parts.append(f"({block})")
        rest = rest[end + 2 :]
    return re.compile("".join(parts))


class DiagnosticVerifier:
    """The expectations of one chunk; `process` each diagnostic, then `finish`.

    Both return the errors to report, formatted like every tessc diagnostic."""

    def __init__(self, source: SourceChunk):
        self.source = source
        self.expectations: list[Expectation] = []
        self.errors: list[str] = []
        self._scan()

    def _scan(self) -> None:
        lines = self.source.content.split("\n")
        last_plain = 0  # index of the last line without an expectation
        below: list[Expectation] = []
        for index, text in enumerate(lines):
            number = index + 1 + self.source.line_offset
            found = EXPECTATION.search(text.rstrip())
            if found is None:
                for expectation in below:
                    expectation.line = number
                below.clear()
                last_plain = index
                continue
            severity, regex, anchor, text_expected = (
                found.group(1),
                found.group(2),
                found.group(4),
                found.group(5),
            )
            column = found.start() + 1
            pattern = None
            if regex:
                try:
                    pattern = expectation_regex(text_expected)
                except ValueError as error:
                    self._error_at(number, column, str(error), len(text_expected))
                    continue
            line: int | None = number
            if anchor is None:
                pass
            elif anchor[0] in "+-":
                offset = int(anchor[1:])
                line = number + offset if anchor[0] == "+" else number - offset
            elif anchor == "unknown":
                line = None
            elif anchor == "above":
                line = last_plain + 1 + self.source.line_offset
            else:  # below: the next line without an expectation (else the last line)
                line = len(lines) + self.source.line_offset
            expectation = Expectation(severity, text_expected, line, pattern, number, column)
            if anchor == "below":
                below.append(expectation)
            self.expectations.append(expectation)

    def _error_at(self, line: int, column: int, message: str, width: int = 1) -> None:
        self.errors.append(
            format_diagnostic(
                self.source.name,
                message,
                line=line,
                column=column,
                source_line=self.source.line(line),
                width=width,
            )
        )

    def process(self, diagnostic: Emitted) -> None:
        """Match `diagnostic` with an expectation, or record the error that none does."""
        located = diagnostic.line is not None
        near_miss: Expectation | None = None
        for expectation in self.expectations:
            if located:
                if diagnostic.file != self.source.name or expectation.line != diagnostic.line:
                    continue
            elif expectation.line is not None:
                continue
            if expectation.matches(diagnostic.message):
                if expectation.severity == diagnostic.severity:
                    expectation.matched = True
                    return
                near_miss = expectation
        if near_miss is not None:
            self._error_at(
                near_miss.comment_line,
                near_miss.comment_column,
                f"'{diagnostic.severity}' diagnostic emitted when expecting a "
                f"'{near_miss.severity}'",
            )
            return
        message = f"unexpected {diagnostic.severity}: {diagnostic.message}"
        if not located or diagnostic.file is None:
            self.errors.append(format_diagnostic(diagnostic.file or self.source.name, message))
            return
        source_line = (
            self.source.line(diagnostic.line) if diagnostic.file == self.source.name else None
        )
        self.errors.append(
            format_diagnostic(
                diagnostic.file,
                message,
                line=diagnostic.line,
                column=diagnostic.column,
                source_line=source_line,
            )
        )

    def finish(self) -> list[str]:
        """Every error: unexpected diagnostics, then expectations that were not met."""
        for expectation in self.expectations:
            if not expectation.matched:
                self._error_at(
                    expectation.comment_line,
                    expectation.comment_column,
                    f'expected {expectation.severity} "{expectation.text}" was not produced',
                    len(expectation.text),
                )
        return self.errors


def one_line(message: str) -> str:
    """A message as diagnostics print it: its lines joined (IRDL's span several)."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def op_diagnostic(message: str, op: Operation | None, severity: str = "error") -> Emitted:
    """A diagnostic at `op`'s source location, unlocated if it has none."""
    if op is None or not isinstance(op.location, FileLineColLoc):
        return Emitted(severity, one_line(message))
    location = op.location
    return Emitted(
        severity,
        one_line(message),
        location.filename.data,
        location.line.data,
        location.column.data,
    )


def parse_error_diagnostic(error: ParseError) -> Emitted:
    """A parse error as a diagnostic at its span."""
    span = error.span
    location = span.get_location()
    line_start = span.input.get_start_of_line(span.start)
    column = len(decode_source(span.input.content[line_start : span.start])) + 1
    return Emitted("error", one_line(error.msg), location.file, location.line, column)


__all__ = [
    "SEVERITIES",
    "DiagnosticVerifier",
    "Emitted",
    "Expectation",
    "expectation_regex",
    "one_line",
    "op_diagnostic",
    "parse_error_diagnostic",
]
