"""
`tessc-opt`: xDSL's `xdsl-opt` with the `tess` dialect, tessc's passes and located errors.

It is `xDSLOptMain` (every xDSL dialect, pass and target, `-p 'pass{opt=v}'`,
`--print-between-passes`, `--split-input-file`, ...) plus what looks like mlir-opt behaves
like it: `--verify-diagnostics` checks `expected-error {{...}}` comments
(`tessc.cli.verify_diagnostics`), `--pass-pipeline='builtin.module(...)'`, named pipelines
(`-p cpu`), `--mlir-print-ir-{before,after}-all`, `--mlir-print-op-generic`, `--mlir-timing`,
`-` for stdin, and `--list-passes` (`tessc.cli.opt_passes`); and:

- the `tess` dialect and every pass of `tessc.passes` (loaded lazily, by name); a pass the
  command line names, run on a module without one op of its input level, is an error;
- a `numba` target (`-t numba`) and a frontend for `.tess` files (`tessc.cli.opt_extensions`);
- an `upstream` target (`--emit-upstream`, `tessc.upstream`): IR that upstream
  `mlir-opt --allow-unregistered-dialect` parses (tessc's own ops in the generic form);
- errors as compiler diagnostics instead of Python tracebacks.

Errors are located diagnostics (`tessc.diagnostics`): `file:line:col: error: message`, the
source line and a caret, on stderr, with exit status 1 (`--parsing-diagnostics`: a parse
error goes to stdout, exit 0). With `--split-input-file` every chunk is compiled.

Verification: the input is verified (its errors are the user's), and so is the output of
the last pass. Between passes the module is verified only with `--verify-each` or
`$TESSC_VERIFY_PASSES=1`: verifying a large module costs as much as a pass, and after every
pass it was a quarter of the compile time. A pass leaving invalid IR is still an internal
compiler error naming that pass: when the output does not verify, the pipeline is replayed
from the source, verifying after each pass, to find the first pass whose output fails.
Likewise no copy of the module is kept for crash reports: the input of a failing pass is
made again from the source by the passes before it (passes are deterministic).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
import time
from pathlib import Path
from typing import IO, ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    ShrinkException,
)
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from tessc import timing
from tessc.cli.opt_extensions import NumbaTarget, parse_tess_source
from tessc.cli.opt_passes import (
    PipelineError,
    ir_dump_header,
    pass_listing,
    plan_pipeline,
    unanchored,
)
from tessc.cli.verify_diagnostics import (
    DiagnosticVerifier,
    Emitted,
    one_line,
    op_diagnostic,
    parse_error_diagnostic,
)
from tessc.context import register_dialects
from tessc.diagnostics import (
    InternalCompilerError,
    LocatedError,
    LocatingParser,
    PassOutputVerifyError,
    SourceChunk,
    SourceFileError,
    SourceVerifyError,
    decode_source,
    describe_op_error,
    describe_parse_error,
    error_message,
    failing_op,
    internal_error,
    pass_spec,
    read_source_file,
    recording_failing_ops,
    verify_located,
    write_reproducer,
)
from tessc.passes import INPUT_LEVELS, pass_loaders


def upstream_target() -> type[Target]:
    """`-t upstream` (`--emit-upstream`), loaded when asked for."""
    from tessc.upstream import UpstreamTarget

    return UpstreamTarget


class CommandLineError(Exception):
    """A bad command line (pass pipeline, input file): reported without a location."""


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------


class TesscOptMain(xDSLOptMain):
    version_format: ClassVar[str] = "tessc-opt built on xdsl version {xdsl_version}"

    _source: SourceChunk
    _content: bytes  # the chunk being compiled, to replay the pipeline on a failure
    _file_extension: str
    _current_pass: ModulePass | None
    _explicit: tuple[bool, ...]  # per pass: named by the command line, not by a pipeline
    _pass_index: int  # of `_current_pass` in the pipeline
    _pass_start: float
    _pass_cpu: float

    def __init__(self, args: list[str] | None = None):
        self._source = SourceChunk("stdin", "")
        self._content, self._file_extension = b"", "mlir"
        self._current_pass = None
        self._pass_index = 0
        self._pass_start, self._pass_cpu = time.perf_counter(), time.process_time()
        super().__init__(description="tessc modular optimizer driver", args=args)

    # registration ----------------------------------------------------------------------

    def register_all_dialects(self) -> None:
        register_dialects(self.ctx)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, loader in pass_loaders().items():
            self.register_pass(name, loader)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets["numba"] = lambda: NumbaTarget
        self.available_targets["upstream"] = upstream_target

    def register_all_frontends(self) -> None:
        self.available_frontends["mlir"] = self._parse_mlir
        self.available_frontends["tess"] = self._parse_tess

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "tessc-opt"
        arg_parser.add_argument(
            "--timing",
            "--mlir-timing",
            dest="timing",
            action="store_true",
            help="print the wall time of parsing, each pass, verification and output to "
            "stderr (like mlir-opt -mlir-timing)",
        )
        arg_parser.add_argument(
            "--pass-pipeline",
            help="the passes as mlir-opt spells them: 'builtin.module(p1,p2{opt=v})'",
        )
        arg_parser.add_argument(
            "--mlir-print-ir-before-all",
            action="store_true",
            help="print the module to stderr before every pass, under mlir-opt's header",
        )
        arg_parser.add_argument(
            "--mlir-print-ir-after-all",
            action="store_true",
            help="print the module to stderr after every pass, under mlir-opt's header",
        )
        arg_parser.add_argument(
            "--mlir-print-op-generic",
            dest="print_op_generic",
            action="store_true",
            help="the same as --print-op-generic",
        )
        arg_parser.add_argument(
            "--list-passes",
            action="store_true",
            help="list every pass with its options, and the named pipelines, and exit",
        )
        # --help ends with the same list (loading every pass only when it is asked for).
        format_help = arg_parser.format_help
        arg_parser.format_help = lambda: format_help() + "\n" + self._pass_listing()
        arg_parser.add_argument(
            "--emit-upstream",
            dest="target",
            action="store_const",
            const="upstream",
            help="print the output as upstream mlir-opt reads it (`-t upstream`: tessc's own "
            "ops in the generic form; see tessc.upstream)",
        )
        arg_parser.add_argument(
            "--verify-each",
            action="store_true",
            help="verify the module after every pass (also $TESSC_VERIFY_PASSES=1); by "
            "default only the input and the last pass's output are verified",
        )

    # parsing ---------------------------------------------------------------------------

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        content = chunk.read()
        self._source = SourceChunk(self.get_input_name(), decode_source(content), start_offset)
        self._content, self._file_extension = content, file_extension
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
        return parse_tess_source(stream.read(), self.get_input_name())

    # passes ----------------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        """The passes of `-p` or `--pass-pipeline`, a named pipeline standing for its own."""
        from tessc.pipelines import PIPELINES

        spec = self.args.passes
        try:
            if self.args.pass_pipeline is not None:
                if spec:
                    raise PipelineError("give the passes with -p or with --pass-pipeline, not both")
                spec = unanchored(self.args.pass_pipeline)
        except PipelineError as error:
            raise CommandLineError(str(error)) from None
        named = {name: pipeline.spec for name, pipeline in PIPELINES.items()}
        try:
            plan = plan_pipeline(self.available_passes, spec, named)
        except ArgSpecParseError as error:
            raise CommandLineError(str(error).rstrip()) from None
        except (ValueError, TypeError, ImportError) as error:
            raise CommandLineError(f"invalid pass pipeline '{spec}': {error}") from None
        self.pipeline = PassPipeline(plan.passes, self._between_passes)
        self._explicit = plan.explicit

    def _pass_listing(self) -> str:
        from tessc.pipelines import PIPELINES

        descriptions = {name: pipeline.description for name, pipeline in PIPELINES.items()}
        return pass_listing(self.available_passes, descriptions)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file == "-":  # `-` is stdin, as for mlir-opt
            return sys.stdin.buffer, "mlir"
        return super().get_input_stream()

    def get_input_name(self) -> str:
        return "stdin" if self.args.input_file in (None, "-") else self.args.input_file

    def _verify_each(self) -> bool:
        if self.args.verify_each:
            return True
        return os.environ.get("TESSC_VERIFY_PASSES", "") not in ("", "0")

    def _between_passes(
        self, previous: ModulePass | None, module: ModuleOp, next: ModulePass | None
    ) -> None:
        """Verify (with a location), time and print between passes, like xdsl-opt."""
        report = timing.active()
        if previous is not None and report is not None:
            report.add(
                previous.name,
                time.perf_counter() - self._pass_start,
                time.process_time() - self._pass_cpu,
            )
        if self.args.time_passes and previous is not None:
            print(f"Pass {previous.name} took {time.perf_counter() - self._pass_start} seconds")
        if previous is not None and self.args.mlir_print_ir_after_all:
            self._dump_ir(ir_dump_header("After", previous), module)
        if previous is None or next is None or self._verify_each():
            with timing.phase("(verify)"):
                self._verify_between(module, previous)
        if previous is not None and next is not None and self.args.print_between_passes:
            print(f"IR after {previous.name}:")
            Printer(stream=sys.stdout).print_op(module)
            print("\n\n\n")
        if previous is not None:
            self._pass_index += 1
        self._current_pass = next
        if next is not None:
            if self._explicit[self._pass_index]:
                self._check_input_level(next, module)
            if self.args.mlir_print_ir_before_all:
                self._dump_ir(ir_dump_header("Before", next), module)
        self._pass_start, self._pass_cpu = time.perf_counter(), time.process_time()

    def _check_input_level(self, module_pass: ModulePass, module: ModuleOp) -> None:
        """A pass the command line names, run on a module without one op of its input
        level, is an error at the module (it would silently do nothing)."""
        level = INPUT_LEVELS.get(module_pass.name)
        if level is not None and not level.present(module):
            raise LocatedError(level.missing_message(module_pass.name), module)

    def _dump_ir(self, header: str, module: ModuleOp) -> None:
        """mlir-opt's IR dump between passes: on stderr, under `header`."""
        sys.stdout.flush()
        print(header, file=sys.stderr)
        printer = Printer(stream=sys.stderr, print_generic_format=self.args.print_op_generic)
        printer.print_op(module)
        print("\n", file=sys.stderr)

    def _verify_between(self, module: ModuleOp, previous: ModulePass | None) -> None:
        if self.args.disable_verify:
            return
        if previous is None:
            verify_located(module)
            return
        try:
            verify_located(module)
        except SourceVerifyError as error:
            found: tuple[int, SourceVerifyError] = (self._pass_index, error)
            before = None
            if not self._verify_each() and self._pass_index > 0:
                # Only this output was checked: the first invalid one may be earlier.
                replayed, invalid = self._replay(self._pass_index + 1, verify=True)
                if invalid is not None:
                    before, found = replayed, invalid
            if before is None:
                before, _ = self._replay(found[0])
            raise self._invalid_output(*found, before) from None

    def _invalid_output(
        self, index: int, error: SourceVerifyError, before: ModuleOp | None
    ) -> PassOutputVerifyError:
        """The internal compiler error for pass `index` producing IR that does not verify
        (`error`), with its input `before` saved as the reproducer."""
        culprit = self.pipeline.passes[index]
        output_error = PassOutputVerifyError(str(error), failing_op(error), culprit.name)
        output_error.spec = pass_spec(culprit)
        if before is not None:
            note = f"the input of pass '{culprit.name}'"
            output_error.reproducer = write_reproducer(before, note)
        return output_error

    def _replay(
        self, count: int, *, verify: bool = False
    ) -> tuple[ModuleOp | None, tuple[int, SourceVerifyError] | None]:
        """The module after the first `count` passes, made again from the source (passes
        are deterministic), and None; with `verify`, the output of each pass is verified,
        and at the first that fails: the module before that pass, and (its index, the
        error). (None, None) if the replay itself fails.

        This makes the reproducer of an internal compiler error, so that compiling keeps
        no copy of the module until a pass fails."""
        try:
            module = self.available_frontends[self._file_extension](_RewoundBytes(self._content))
            assert module is not None
            for index, module_pass in enumerate(self.pipeline.passes[:count]):
                before = module.clone() if verify else None
                module_pass.apply(self.ctx, module)
                if before is not None:
                    try:
                        verify_located(module)
                    except SourceVerifyError as error:
                        return before, (index, error)
            return module, None
        except Exception:
            return None, None

    def apply_passes(self, prog: ModuleOp) -> None:
        self._current_pass = None
        self._pass_index = 0
        try:
            self.pipeline.apply(self.ctx, prog)
        except (DiagnosticException, InternalCompilerError):
            raise
        except Exception as error:
            current = self._current_pass
            if current is None:
                raise
            # A pass crashing on invalid IR an earlier pass left (unverified) is that
            # earlier pass's bug.
            verify = not self._verify_each() and not self.args.disable_verify
            before, invalid = self._replay(self._pass_index, verify=verify)
            if invalid is not None:
                raise self._invalid_output(*invalid, before) from error
            where = f"pass '{current.name}'"
            raise internal_error(where, error, before, pass_spec(current)) from error

    # running ---------------------------------------------------------------------------

    def run(self) -> int:
        """Process every input chunk; the exit status (1 if any reported an error)."""
        if self.args.timing:
            with timing.reporting("tessc-opt"):
                return self._run_all()
        return self._run_all()

    def _run_all(self) -> int:
        if self.args.list_passes:
            sys.stdout.write(self._pass_listing())
            return 0
        if self.args.input_file is not None and self.args.input_file != "-":
            try:  # a regular file of a sane size: not /dev/zero, not a directory
                read_source_file(Path(self.args.input_file))
            except SourceFileError as error:
                raise CommandLineError(f"{self.args.input_file}: {error}") from None
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
        if self.args.verify_diagnostics:
            return self._verify_chunk(chunk, file_extension, offset, output)
        try:
            self._compile_chunk(chunk, file_extension, offset, output)
            return 0
        except ParseError as error:
            expected = self.args.parsing_diagnostics
            return self._report(describe_parse_error(error), expected=expected)
        except DiagnosticException as error:
            return self._report(self._describe(error), expected=False)
        except InternalCompilerError as error:
            return self._report(f"{self._source.name}: error: {error}", expected=False)

    def _compile_chunk(
        self, chunk: IO[bytes], file_extension: str, offset: int, output: IO[str]
    ) -> None:
        with timing.phase("parse"):
            module = self.parse_chunk(chunk, file_extension, offset)
        if module is not None:
            with timing.phase("passes"):
                self.apply_passes(module)
            with timing.phase("output"):
                output.write(self._output(module))
        output.flush()

    def _verify_chunk(
        self, chunk: IO[bytes], file_extension: str, offset: int, output: IO[str]
    ) -> int:
        """Compile the chunk and check its diagnostics against its `expected-*` comments
        (`tessc.cli.verify_diagnostics`); the errors go to stderr."""
        emitted: list[Emitted] = []
        try:
            self._compile_chunk(chunk, file_extension, offset, output)
        except ParseError as error:
            emitted.append(parse_error_diagnostic(error))
        except DiagnosticException as error:
            message, op, _ = self._diagnostic_parts(error)
            emitted.append(op_diagnostic(message, op))
        except InternalCompilerError as error:
            emitted.append(Emitted("error", one_line(str(error))))
        verifier = DiagnosticVerifier(self._source)
        for diagnostic in emitted:
            verifier.process(diagnostic)
        errors = verifier.finish()
        for error in errors:
            print(error, file=sys.stderr)
        return 1 if errors else 0

    def _output(self, module: ModuleOp) -> str:
        """The printed module or the target's output; a target's crash is an ICE report."""
        try:
            return self.output_resulting_program(module)
        except DiagnosticException:
            raise
        except Exception as error:
            where = f"target '{self.args.target}'"
            before = None
            if self.args.target != "mlir":  # the target's input, made again from the source
                before, _ = self._replay(len(self.pipeline.passes))
            raise internal_error(where, error, before) from error

    def _describe(self, error: DiagnosticException) -> str:
        message, op, note = self._diagnostic_parts(error)
        return describe_op_error(message, op, self._source, note=note)

    def _diagnostic_parts(
        self, error: DiagnosticException
    ) -> tuple[str, Operation | None, str | None]:
        """The message of `error`, the op it is at and the driver's note."""
        message = error_message(error)
        op = failing_op(error)
        note = None
        if isinstance(error, PassOutputVerifyError):
            message = (
                f"internal compiler error: IR produced by pass '{error.pass_name}' does not "
                f"verify: {message}"
            )
            note = "this is a bug in tessc"
            reproducer = getattr(error, "reproducer", None)
            if reproducer is not None:
                spec = getattr(error, "spec", error.pass_name)
                rerun = f"tessc-opt {reproducer} -p '{spec}'"
                note += f"; the input of the pass is saved in {reproducer} (rerun: {rerun})"
        elif self._current_pass is not None:
            note = f"while running pass '{self._current_pass.name}'"
        return message, op, note

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


COLLECTION_THRESHOLDS = (100_000, 50, 100)
"""`gc.set_threshold` while compiling. IR is a large graph of long-lived objects full of
reference cycles (an op and its block point at each other), and a compile allocates
millions of objects: with CPython's default thresholds (700, 10, 10) the cyclic collector
ran ~530 times on the 1,000-op program, traversing the live IR again each time, 0.23 s of
2.5 s. With these, ~90 collections, 0.04 s; peak memory grows ~10%. Garbage cycles (erased
ops) are still collected."""


def main(args: list[str] | None = None) -> int:
    """The `tessc-opt` console script; returns (and exits with) the status."""
    thresholds = gc.get_threshold()
    gc.set_threshold(*COLLECTION_THRESHOLDS)
    try:
        driver = TesscOptMain(args=args)
        status = driver.run()
    except CommandLineError as error:
        print(f"tessc-opt: error: {error}", file=sys.stderr)
        status = 1
    finally:
        gc.set_threshold(*thresholds)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`tessc-opt x.mlir | head`): not an error of ours.
        sys.stdout = open(os.devnull, "w")
    if args is None:
        # The console script exits now: the IR is cyclic garbage the interpreter's final
        # collection would traverse and free object by object (0.13 s after a 1,000-op
        # compile). Frozen objects are left to the operating system.
        gc.freeze()
        sys.exit(status)
    return status


if __name__ == "__main__":
    main()
