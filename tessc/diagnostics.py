"""
Located diagnostics for tessc's drivers (`tessc-opt`, `tessc-run`): where an error is in
the user's file, and how it is printed.

They work like MLIR's: the parser stamps every op it reads with a `loc("file":line:col)`
(`LocatingParser`; an explicit `loc(...)` in the source wins), so an op keeps its source
position through every pass that keeps the op, and an op a pass creates takes the position
of the op it replaces or was matched at (`tessc.dialects.locations`). When a verifier or a
pass fails, the failing op is found and its location printed as

    file:line:col: error: message
      <source line>
      ^

The failing op comes from the exception: tessc's own `SourceVerifyError` and
`PassOutputVerifyError` carry it, and xDSL's op errors carry it while the driver runs inside
`recording_failing_ops()` (`tessc.xdsl_patches`: xDSL keeps the op only in the message text).
Errors that name no op (a structural block error, a pass raising `PassFailedException`
directly) are found by re-verifying op by op (`first_invalid_op`), or else are reported as
`file: error: message`.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation, TypeAttribute
from xdsl.parser import Parser
from xdsl.parser.core import ForwardDeclaredValue
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from tessc.xdsl_patches.failing_ops import (
    recorded_failing_op,
    recorded_message,
    recording_failing_ops,
)

# ---------------------------------------------------------------------------------------
# Source locations
# ---------------------------------------------------------------------------------------


PLAIN_SHAPED_TYPE = re.compile(r"(?:tensor|memref|vector)<[0-9x?]*(?:[fi][0-9]+|bf16|index)>")
"""A shaped type with static or dynamic dims of a builtin element type, and nothing else
(no layout, encoding or nested attribute): its meaning is its text."""


class LocatingParser(Parser):
    """A `Parser` that gives every op it parses the `FileLineColLoc` of its first token.

    It also parses each distinct plain shaped type (`PLAIN_SHAPED_TYPE`, e.g.
    `tensor<64x64xf32>`) once: a program spells the same few types thousands of times,
    and xDSL lexes and builds each again (a quarter of parsing the 1,000-op program)."""

    def __init__(self, ctx: Context, input: str | bytes, name: str, line_offset: int = 0):
        super().__init__(ctx, decode_utf8(input, name, line_offset), name)
        self.line_offset = line_offset
        # Ops are parsed in source order, so lines are counted from the previous op on
        # (`Span.get_location` counts from the start of the input: quadratic in file size).
        self._counted_to = 0
        self._line = 1 + line_offset
        self._filename = StringAttr(name)
        self._op_starts: list[Span] = []
        self._plain_types: dict[str, TypeAttribute] = {}

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        # Like mlir-opt, an input without operations (e.g. after a trailing `// -----`)
        # is an empty module rather than an error.
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError:
            raise
        except RecursionError:
            raise ParseError(self._failing_span(), "the input is nested too deeply") from None
        except Exception as error:
            # xDSL's attribute and op parsers let some bad input through as Python errors
            # (an out-of-range integer or float, an unknown iterator type, an f80 fill):
            # still the user's input, reported at the op being parsed.
            raise ParseError(self._failing_span(), _parse_failure(error)) from None

    def _failing_span(self) -> Span:
        return self._op_starts[-1] if self._op_starts else self._current_token.span

    def parse_operation(self) -> Operation:
        line, column = self._line_and_column(self._current_token.span.start)
        self._op_starts.append(self._current_token.span)
        op = super().parse_operation()
        self._op_starts.pop()  # kept on an exception: the innermost op being parsed
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(self._filename, IntAttr(line), IntAttr(column))
        return op

    def _parse_optional_builtin_parametrized_type(self) -> TypeAttribute | None:
        token = self._current_token
        if token.kind != MLIRTokenKind.BARE_IDENT:
            return None
        plain = PLAIN_SHAPED_TYPE.match(self.lexer.input.content, token.span.start)
        if plain is None:
            return super()._parse_optional_builtin_parametrized_type()
        known = self._plain_types.get(plain.group())
        if known is None:  # parsed (and checked) by xDSL the first time
            known = super()._parse_optional_builtin_parametrized_type()
            if known is not None:
                self._plain_types[plain.group()] = known
        else:
            self._resume_from(plain.end())
        return known

    def _line_and_column(self, position: int) -> tuple[int, int]:
        input = self.lexer.input
        if position < self._counted_to:  # never in practice; stay correct anyway
            self._counted_to, self._line = 0, 1 + self.line_offset
        self._line += input.content.count(input.newline, self._counted_to, position)
        self._counted_to = position
        return self._line, position - input.get_start_of_line(position) + 1


@dataclass(frozen=True)
class SourceChunk:
    """The text one frontend call parsed, to quote source lines in diagnostics."""

    name: str
    content: str
    line_offset: int = 0

    def line(self, line: int) -> str | None:
        """Line `line` (1-based, counted in the whole file), if it is in this chunk."""
        lines = self.content.split("\n")
        index = line - self.line_offset - 1
        return lines[index].removesuffix("\r") if 0 <= index < len(lines) else None


def format_diagnostic(
    file: str,
    message: str,
    *,
    line: int | None = None,
    column: int | None = None,
    source_line: str | None = None,
    width: int = 1,
    severity: str = "error",
) -> str:
    """`file:line:col: error: message`, then the source line and a caret under the column."""
    where = file if line is None else f"{file}:{line}:{column or 1}"
    # One line per diagnostic (IRDL's constraint messages span several).
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    text = f"{where}: {severity}: {message}"
    if source_line is not None and column is not None:
        width = max(1, min(width, len(source_line) - column + 1))
        text += f"\n{source_line}\n{' ' * (column - 1)}{'^' * width}"
    return text


def describe_parse_error(error: ParseError) -> str:
    """A `ParseError` as a one-location diagnostic (xDSL's own text adds a Python traceback)."""
    span = error.span
    location = span.get_location()
    input = span.input
    line_start = input.get_start_of_line(span.start)
    line_end = input.get_end_of_line(span.start)
    source_line = decode_source(input.content[line_start:line_end]).removesuffix("\r")
    # Columns from xDSL count bytes; count characters so the caret lines up.
    column = len(decode_source(input.content[line_start : span.start])) + 1
    return format_diagnostic(
        location.file,
        error.msg,
        line=location.line,
        column=column,
        source_line=source_line,
        width=len(decode_source(span.content)),
    )


def describe_op_error(
    message: str, op: Operation | None, source: SourceChunk, *, note: str | None = None
) -> str:
    """An error at `op`'s source location when it has one, else at the file."""
    location = _find_location(op)
    if location is None:
        text = format_diagnostic(source.name, message)
    else:
        filename, line, column = location
        source_line = source.line(line) if filename == source.name else None
        text = format_diagnostic(
            filename, message, line=line, column=column, source_line=source_line
        )
    if note is not None:
        text += "\n" + format_diagnostic(source.name, note, severity="note")
    return text


def _find_location(op: Operation | None) -> tuple[str, int, int] | None:
    if op is None or not isinstance(op.location, FileLineColLoc):
        return None
    loc = op.location
    return loc.filename.data, loc.line.data, loc.column.data


def _parse_failure(error: Exception) -> str:
    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, DiagnosticException):
        return message
    return f"invalid op ({message})"


def decode_utf8(content: str | bytes, name: str, line_offset: int = 0) -> str:
    """`content` as text; bytes that are not UTF-8 are a `ParseError` at the first one."""
    if isinstance(content, str):
        return content
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        text = content.decode("utf-8", "replace")
        position = len(content[: error.start].decode("utf-8", "replace"))
        span = Span(position, position + 1, Input(text, name), line_offset)
        raise ParseError(span, f"invalid UTF-8 (byte 0x{content[error.start]:02x})") from None


def decode_source(content: str | bytes) -> str:
    """Source text as `str` (xDSL spans may hold bytes), undecodable bytes replaced."""
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else content


# ---------------------------------------------------------------------------------------
# Which op failed
# ---------------------------------------------------------------------------------------


def failing_op(error: BaseException) -> Operation | None:
    """The op `error` is about, if it knows one."""
    if isinstance(error, LocatedError):
        return error.op
    return recorded_failing_op(error)


def error_message(error: BaseException) -> str:
    """The exception's own text or, when it has none (`op.emit_error(msg, VerifyException())`),
    the message given to `emit_error`."""
    return str(error) or recorded_message(error) or type(error).__name__


_VERIFIER_CRASHES = (ValueError, TypeError, AttributeError, KeyError, IndexError)
"""What an xDSL verifier raises when it crashes on malformed IR (e.g. a misspelt property)."""


def _verifier_crash(error: Exception) -> bool:
    """One of `_VERIFIER_CRASHES`, or a bare `Exception`: xDSL 0.74's `memref.load` and
    `memref.store` verifiers raise one for a wrong index count (`memref.store %v, %m[]` of a
    rank-1 memref; found by `python -m tessc.fuzz mutate --seed 3005`)."""
    return isinstance(error, _VERIFIER_CRASHES) or type(error) is Exception


def first_invalid_op(module: ModuleOp) -> Operation | None:
    """The first op, innermost first, whose own checks fail or crash (for errors naming no
    op)."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as error:
            return failing_op(error) or op
        except Exception as error:
            if _verifier_crash(error):
                return op
            raise
    return None


class LocatedError(DiagnosticException):
    """A diagnostic that knows the op it is about (`failing_op`)."""

    def __init__(self, message: str, op: Operation | None):
        super().__init__(message)
        self.op = op


class SourceVerifyError(LocatedError):
    """The input does not verify: a diagnostic about the user's program."""


class PassOutputVerifyError(LocatedError):
    """A pass produced IR that does not verify: a compiler bug, still reported at the op."""

    def __init__(self, message: str, op: Operation | None, pass_name: str):
        super().__init__(message, op)
        self.pass_name = pass_name


def verify_located(module: ModuleOp) -> None:
    """`module.verify()` and SSA dominance, which xDSL does not check, raising with the
    failing op attached (`failing_op`)."""
    from tessc.dialects.dominance import verify_dominance

    for op in module.walk():
        for operand in op.operands:
            if isinstance(operand, ForwardDeclaredValue):  # xDSL's verifier would crash
                name = f"%{operand.name_hint}" if operand.name_hint else "a value"
                raise SourceVerifyError(f"'{op.name}' uses {name}, which is never defined", op)
    try:
        module.verify()
        verify_dominance(module)
    except DiagnosticException as error:
        op = failing_op(error) or first_invalid_op(module)
        raise SourceVerifyError(error_message(error), op) from None
    except Exception as error:
        if not _verifier_crash(error):
            raise
        # An xDSL verifier that crashed on malformed IR: still the input's fault.
        message = " ".join(str(error).split()) or type(error).__name__
        op = failing_op(error) or first_invalid_op(module)
        raise SourceVerifyError(f"invalid IR ({message})", op) from None


# ---------------------------------------------------------------------------------------
# Internal compiler errors
# ---------------------------------------------------------------------------------------


class InternalCompilerError(Exception):
    """A pass (or codegen) failed on a valid module: a bug in tessc, reported with the
    module it failed on saved to a file (`reproducer`), never as a bare exception."""

    def __init__(self, where: str, error: BaseException, reproducer: Path | None, spec: str = ""):
        self.where = where
        self.error = error
        self.reproducer = reproducer
        cause = " ".join(str(error).split())[:500] or "(no message)"
        message = (
            f"internal compiler error in {where}: {type(error).__name__}: {cause}; "
            "this is a bug in tessc"
        )
        if reproducer is not None:
            rerun = f"tessc-opt {reproducer}" + (f" -p '{spec}'" if spec else "")
            message += f"; the module it failed on is saved in {reproducer} (rerun: {rerun})"
        super().__init__(message)


def pass_spec(pass_: object) -> str:
    """`name{options}` of a pass instance, as `-p` takes it."""
    try:
        return str(pass_.spec())  # type: ignore[attr-defined]
    except Exception:
        return str(getattr(pass_, "name", pass_))


def write_reproducer(module: Operation, note: str) -> Path | None:
    """Save `module` (custom form, else generic) to a new file under `$TESSC_REPRODUCER_DIR`
    (default: the temporary directory); None if it cannot be written."""
    from io import StringIO

    from xdsl.printer import Printer

    text = None
    for generic in (False, True):
        stream = StringIO()
        try:
            Printer(stream=stream, print_generic_format=generic).print_op(module)
            text = stream.getvalue()
            break
        except Exception:
            continue
    if text is None:
        return None
    directory = os.environ.get("TESSC_REPRODUCER_DIR") or tempfile.gettempdir()
    try:
        os.makedirs(directory, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="tessc-reproducer-", suffix=".mlir", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # Every line of a multi-line note a comment: the file must parse as it is.
            comment = "".join(f"// {line}\n" for line in note.splitlines() or [""])
            handle.write(f"{comment}{text}\n")
    except OSError:
        return None
    return Path(path)


def internal_error(where: str, error: BaseException, module: Operation | None, spec: str = ""):
    """An `InternalCompilerError` for `error` in `where`, with `module` saved."""
    reproducer = None
    if module is not None:
        reproducer = write_reproducer(module, f"tessc internal compiler error in {where}: {error}")
    return InternalCompilerError(where, error, reproducer, spec)


# ---------------------------------------------------------------------------------------
# Input files
# ---------------------------------------------------------------------------------------

MAX_SOURCE_BYTES = 64 << 20
"""The largest program file the drivers read (a larger one is surely not a program, and
`/dev/zero` would never end)."""


class SourceFileError(Exception):
    """The program file cannot be read: reported as `file: error: message`."""


def read_source_file(path: Path) -> bytes:
    """The bytes of the program file `path`: a regular file of at most `MAX_SOURCE_BYTES`."""
    try:
        if not path.is_file():
            if not path.exists():
                raise SourceFileError("cannot read the file: no such file")
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise SourceFileError(f"cannot read the file: {kind}")
        with path.open("rb") as handle:
            content = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as error:
        raise SourceFileError(f"cannot read the file: {error.strerror or error}") from None
    if len(content) > MAX_SOURCE_BYTES:
        raise SourceFileError(f"the file is larger than {MAX_SOURCE_BYTES >> 20} MiB")
    return content


__all__ = [
    "InternalCompilerError",
    "LocatedError",
    "LocatingParser",
    "PassOutputVerifyError",
    "SourceFileError",
    "SourceChunk",
    "SourceVerifyError",
    "describe_op_error",
    "decode_source",
    "decode_utf8",
    "describe_parse_error",
    "error_message",
    "failing_op",
    "first_invalid_op",
    "format_diagnostic",
    "internal_error",
    "pass_spec",
    "read_source_file",
    "write_reproducer",
    "recording_failing_ops",
    "verify_located",
]
