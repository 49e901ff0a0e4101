"""
`tessc-opt`: xDSL's `xdsl-opt` with the `tess` dialect, tessc's passes and located errors.

It is `xDSLOptMain` (every xDSL dialect, pass and target, `-p 'pass{opt=v}'`,
`--print-between-passes`, `--split-input-file`, `--verify-diagnostics`, ...) plus:

- the `tess` dialect and every pass of `tessc.passes` (loaded lazily, by name);
- a `numba` target (`-t numba`): the module as Python source, by
  `tessc.lowering.to_numba.emit_numba` (loops level) or `tessc.lowering.to_cuda.emit_cuda`
  (gpu level);
- a frontend for `.tess` files, `tessc.frontend.tess_lang.parse_tess`;
- errors as compiler diagnostics instead of Python tracebacks.

Diagnostics work like MLIR's: the parser stamps every op it reads with a
`loc("file":line:col)` (`LocatingParser`; an explicit `loc(...)` in the source wins), so an
op keeps its source position through every pass that keeps the op. When a verifier or a pass
fails, the failing op is found and its location printed as

    file:line:col: error: message
      <source line>
      ^

on stderr, with exit status 1. xDSL raises op errors through `Diagnostic.raise_exception`
(from `Operation.emit_error`, which every failing verifier goes through) without keeping the
op on the exception, so while tessc-opt runs that method also records the op on the
exception (`recording_failing_ops`). Errors that name no op (a structural block error, a pass
raising `PassFailedException` directly) are found by re-verifying op by op, or else are
reported as `file: error: message`.

With `--verify-diagnostics` (verifier and pass errors) or `--parsing-diagnostics` (parse
errors) the same diagnostic goes to stdout instead, the exit status stays 0, and the next
`--split-input-file` chunk is processed: invalid-IR tests FileCheck the diagnostics.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, ClassVar, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import IRNode, Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.diagnostic import Diagnostic
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    ShrinkException,
)
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from tessc import timing
from tessc.context import register_tess_dialects
from tessc.passes import pass_loaders

# ---------------------------------------------------------------------------------------
# Source locations
# ---------------------------------------------------------------------------------------


class LocatingParser(Parser):
    """A `Parser` that gives every op it parses the `FileLineColLoc` of its first token."""

    def __init__(self, ctx: Context, input: str | bytes, name: str, line_offset: int = 0):
        super().__init__(ctx, input, name)
        self.line_offset = line_offset
        # Ops are parsed in source order, so lines are counted from the previous op on
        # (`Span.get_location` counts from the start of the input: quadratic in file size).
        self._counted_to = 0
        self._line = 1 + line_offset
        self._filename = StringAttr(name)

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        # Like mlir-opt, an input without operations (e.g. after a trailing `// -----`)
        # is an empty module rather than an error.
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return super().parse_module(allow_implicit_module)

    def parse_operation(self) -> Operation:
        line, column = self._line_and_column(self._current_token.span.start)
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(self._filename, IntAttr(line), IntAttr(column))
        return op

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
    source_line = _text(input.content[line_start:line_end]).removesuffix("\r")
    # Columns from xDSL count bytes; count characters so the caret lines up.
    column = len(_text(input.content[line_start : span.start])) + 1
    return format_diagnostic(
        location.file,
        error.msg,
        line=location.line,
        column=column,
        source_line=source_line,
        width=len(_text(span.content)),
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


def _text(content: str | bytes) -> str:
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else content


# ---------------------------------------------------------------------------------------
# Which op failed
# ---------------------------------------------------------------------------------------

_FAILING_OP = "_tessc_failing_op"
_FAILING_MESSAGE = "_tessc_failing_message"


@contextmanager
def recording_failing_ops() -> Iterator[None]:
    """While active, an exception raised by `op.emit_error` remembers `op` (`failing_op`)."""
    original = Diagnostic.raise_exception

    def raise_exception(self: Diagnostic, ir: IRNode, underlying_error: Exception) -> NoReturn:
        if self.op_messages and not hasattr(underlying_error, _FAILING_OP):
            op, messages = next(iter(self.op_messages.items()))
            setattr(underlying_error, _FAILING_OP, op)
            setattr(underlying_error, _FAILING_MESSAGE, messages[0] if messages else "")
        original(self, ir, underlying_error)

    Diagnostic.raise_exception = raise_exception
    try:
        yield
    finally:
        Diagnostic.raise_exception = original


def failing_op(error: BaseException) -> Operation | None:
    return getattr(error, _FAILING_OP, None)


def error_message(error: BaseException) -> str:
    """The exception's own text or, when it has none (`op.emit_error(msg, VerifyException())`),
    the message given to `emit_error`."""
    return str(error) or getattr(error, _FAILING_MESSAGE, "") or type(error).__name__


def first_invalid_op(module: ModuleOp) -> Operation | None:
    """The first op, innermost first, whose own checks fail (for errors naming no op)."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as error:
            return failing_op(error) or op
    return None


class SourceVerifyError(DiagnosticException):
    """The input does not verify: a diagnostic about the user's program."""

    def __init__(self, message: str, op: Operation | None):
        super().__init__(message)
        setattr(self, _FAILING_OP, op)


class PassOutputVerifyError(DiagnosticException):
    """A pass produced IR that does not verify: a compiler bug, still reported at the op."""

    def __init__(self, message: str, op: Operation | None, pass_name: str):
        super().__init__(message)
        self.pass_name = pass_name
        setattr(self, _FAILING_OP, op)


def verify_located(module: ModuleOp) -> None:
    """`module.verify()`, raising with the failing op attached (`failing_op`)."""
    try:
        module.verify()
    except DiagnosticException as error:
        op = failing_op(error) or first_invalid_op(module)
        raise SourceVerifyError(error_message(error), op) from None


# ---------------------------------------------------------------------------------------
# The numba target and the .tess frontend (both lazy: written in other modules)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumbaTarget(Target):
    """`-t numba`: the module as the Python source of Numba kernels: CPU kernels from the
    loops level, CUDA kernels (`tessc.lowering.to_cuda`) from the gpu level (a module
    holding a `gpu.module`)."""

    name = "numba"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        gpu_level = any(op.name == "gpu.module" for op in module.ops)
        try:
            if gpu_level:
                from tessc.lowering.to_cuda import emit_cuda as emit
            else:
                from tessc.lowering.to_numba import emit_numba as emit
        except ImportError as error:
            raise DiagnosticException(f"the numba target is not available: {error}") from None
        output.write(emit(module))


class CommandLineError(Exception):
    """A bad command line (pass pipeline, input file): reported without a location."""


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------


class TesscOptMain(xDSLOptMain):
    version_format: ClassVar[str] = "tessc-opt built on xdsl version {xdsl_version}"

    _source: SourceChunk
    _current_pass: ModulePass | None
    _pass_start: float

    def __init__(self, args: list[str] | None = None):
        self._source = SourceChunk("stdin", "")
        self._current_pass = None
        self._pass_start = time.perf_counter()
        super().__init__(description="tessc modular optimizer driver", args=args)

    # registration ----------------------------------------------------------------------

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        register_tess_dialects(self.ctx)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, loader in pass_loaders().items():
            self.register_pass(name, loader)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets["numba"] = lambda: NumbaTarget

    def register_all_frontends(self) -> None:
        self.available_frontends["mlir"] = self._parse_mlir
        self.available_frontends["tess"] = self._parse_tess

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "tessc-opt"
        arg_parser.add_argument(
            "--timing",
            action="store_true",
            help="print the wall time of parsing, each pass, verification and output to "
            "stderr (like mlir-opt -mlir-timing)",
        )

    # parsing ---------------------------------------------------------------------------

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        content = chunk.read()
        self._source = SourceChunk(self.get_input_name(), _text(content), start_offset)
        try:
            return self.available_frontends[file_extension](_RewoundBytes(content))
        except ParseError as error:
            error.span = dataclasses.replace(error.span, line_offset=start_offset)
            raise

    def _parse_mlir(self, stream: IO[bytes]) -> ModuleOp:
        parser = LocatingParser(
            self.ctx, stream.read(), self.get_input_name(), self._source.line_offset
        )
        return parser.parse_module(not self.args.no_implicit_module)

    def _parse_tess(self, stream: IO[bytes]) -> ModuleOp:
        from tessc.frontend.tess_lang import parse_tess

        text = stream.read().decode("utf-8")
        try:
            return parse_tess(text, self.get_input_name())
        except (ParseError, DiagnosticException):
            raise
        except Exception as error:
            # A source error that is not an xDSL ParseError: a ValueError (the builders'
            # shape errors) or anything that says where it is (lark's `line`/`column`).
            # Anything else is a bug in the frontend and keeps its traceback.
            if isinstance(error, ValueError) or hasattr(error, "line"):
                raise _as_parse_error(error, text, self.get_input_name()) from None
            raise

    # passes ----------------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        try:
            self.pipeline = PassPipeline.parse_spec(
                self.available_passes, self.args.passes, self._between_passes
            )
        except ArgSpecParseError as error:
            raise CommandLineError(str(error).rstrip()) from None
        except (ValueError, TypeError, ImportError) as error:
            raise CommandLineError(f"invalid pass pipeline '{self.args.passes}': {error}") from None

    def _between_passes(
        self, previous: ModulePass | None, module: ModuleOp, next: ModulePass | None
    ) -> None:
        """Verify (with a location), time and print between passes, like xdsl-opt."""
        report = timing.active()
        if previous is not None and report is not None:
            report.add(previous.name, time.perf_counter() - self._pass_start)
        if self.args.time_passes and previous is not None:
            print(f"Pass {previous.name} took {time.perf_counter() - self._pass_start} seconds")
        with timing.phase("(verify)"):
            self._verify_between(module, previous)
        if previous is not None and next is not None and self.args.print_between_passes:
            print(f"IR after {previous.name}:")
            Printer(stream=sys.stdout).print_op(module)
            print("\n\n\n")
        self._current_pass = next
        self._pass_start = time.perf_counter()

    def _verify_between(self, module: ModuleOp, previous: ModulePass | None) -> None:
        if not self.args.disable_verify:
            if previous is None:
                verify_located(module)
            else:
                try:
                    verify_located(module)
                except SourceVerifyError as error:
                    raise PassOutputVerifyError(
                        str(error), failing_op(error), previous.name
                    ) from None

    def apply_passes(self, prog: ModuleOp) -> None:
        self._current_pass = None
        self.pipeline.apply(self.ctx, prog)

    # running ---------------------------------------------------------------------------

    def run(self) -> int:
        """Process every input chunk; the exit status (1 if any reported an error)."""
        if self.args.timing:
            with timing.reporting("tessc-opt"):
                return self._run_all()
        return self._run_all()

    def _run_all(self) -> int:
        try:
            chunks, file_extension = self.prepare_input()
        except (OSError, ValueError) as error:
            raise CommandLineError(str(error)) from None
        status = 0
        try:
            output = self.prepare_output()
        except OSError as error:
            for chunk, _ in chunks:
                chunk.close()
            raise CommandLineError(str(error)) from None
        try:
            with recording_failing_ops():
                for index, (chunk, offset) in enumerate(chunks):
                    if index > 0:
                        output.write("// -----\n")
                    try:
                        status |= self._run_chunk(chunk, file_extension, offset, output)
                    finally:
                        chunk.close()
        except ShrinkException:
            assert self.args.shrink
            print("Success, can shrink")
            return 0
        finally:
            if output is not sys.stdout:
                output.close()
        if self.args.shrink:
            print("Failure, can't shrink")
            return 1
        return status

    def _run_chunk(
        self, chunk: IO[bytes], file_extension: str, offset: int, output: IO[str]
    ) -> int:
        try:
            with timing.phase("parse"):
                module = self.parse_chunk(chunk, file_extension, offset)
            if module is not None:
                with timing.phase("passes"):
                    self.apply_passes(module)
                with timing.phase("output"):
                    output.write(self.output_resulting_program(module))
            output.flush()
            return 0
        except ParseError as error:
            expected = self.args.parsing_diagnostics or self.args.verify_diagnostics
            return self._report(describe_parse_error(error), expected=expected)
        except DiagnosticException as error:
            return self._report(self._describe(error), expected=self.args.verify_diagnostics)

    def _describe(self, error: DiagnosticException) -> str:
        message = error_message(error)
        op = failing_op(error)
        note = None
        if isinstance(error, PassOutputVerifyError):
            message = f"IR produced by pass '{error.pass_name}' does not verify: {message}"
        elif self._current_pass is not None:
            note = f"while running pass '{self._current_pass.name}'"
        return describe_op_error(message, op, self._source, note=note)

    def _report(self, diagnostic: str, *, expected: bool) -> int:
        if expected:
            print(diagnostic)
            return 0
        print(diagnostic, file=sys.stderr)
        return 1


class _RewoundBytes:
    """The already-read bytes of a chunk, handed to a frontend as a stream again."""

    def __init__(self, content: bytes):
        self._content = content

    def read(self) -> bytes:
        return self._content

    def close(self) -> None:
        pass


def _as_parse_error(error: Exception, text: str, filename: str) -> Exception:
    """A located `ParseError` if `error` has a `line` and `column`, else an unlocated one."""
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    message = str(error).strip().split("\n")[0] or type(error).__name__
    if not (isinstance(line, int) and isinstance(column, int) and line >= 1 and column >= 1):
        return DiagnosticException(message)
    lines = text.split("\n")
    position = min(sum(len(s) + 1 for s in lines[: line - 1]) + column - 1, len(text))
    return ParseError(Span(position, min(position + 1, len(text)), Input(text, filename)), message)


def main(args: list[str] | None = None) -> int:
    """The `tessc-opt` console script; returns (and exits with) the status."""
    try:
        driver = TesscOptMain(args=args)
        status = driver.run()
    except CommandLineError as error:
        print(f"tessc-opt: error: {error}", file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`tessc-opt x.mlir | head`): not an error of ours.
        sys.stdout = open(os.devnull, "w")
    if args is None:
        sys.exit(status)
    return status


if __name__ == "__main__":
    main()
