"""tessc-opt: registration, located diagnostics, clean command-line errors, lazy extensions."""

from __future__ import annotations

import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.diagnostic import Diagnostic
from xdsl.utils.exceptions import PassFailedException

from tessc.cli.opt import TesscOptMain, main
from tessc.cli.verify_diagnostics import EXPECTATION, DiagnosticVerifier, Emitted
from tessc.diagnostics import SourceChunk
from tessc.dialects.tess import AddOp, NegOp
from tessc.passes import INPUT_LEVELS, TESS_PASSES

VALID = """\
func.func @f(%a: tensor<3x1xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %c = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  func.return %c : tensor<3x4xf32>
}
"""

SYNTAX_ERROR = """\
func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> {
  %c = tess.neg %a tensor<3xf32>
  func.return %c : tensor<3xf32>
}
"""

VERIFIER_ERROR = """\
func.func @f(%a: tensor<3x4x1xf32>, %b: tensor<3x5xf32>) -> tensor<3x4x5xf32> {
  %c = tess.add %a, %b : tensor<3x4x1xf32>, tensor<3x5xf32> -> tensor<3x4x5xf32>
  func.return %c : tensor<3x4x5xf32>
}
"""


def run_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tessc.cli.opt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------
# As a process: exit status and stderr
# ---------------------------------------------------------------------------------------


def test_valid_input_round_trips(tmp_path: Path) -> None:
    result = run_opt(str(write(tmp_path, "ok.mlir", VALID)))
    assert result.returncode == 0, result.stderr
    assert "tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>" in result.stdout
    assert result.stderr == ""


def test_syntax_error_is_located(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.mlir", SYNTAX_ERROR)
    result = run_opt(str(path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:2:20: error: Expected ':'\n")
    assert "  %c = tess.neg %a tensor<3xf32>\n" + " " * 19 + "^" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_verifier_error_is_located(tmp_path: Path) -> None:
    path = write(tmp_path, "verify.mlir", VERIFIER_ERROR)
    result = run_opt(str(path))
    assert result.returncode == 1
    first_line = result.stderr.splitlines()[0]
    assert first_line == (
        f"{path}:2:3: error: 'tess.add': shapes (3,4,1) and (3,5) are not broadcastable"
    )
    assert "Traceback" not in result.stderr
    # No dump of the module (xdsl-opt prints the whole module in generic form).
    assert '"func.func"' not in result.stderr + result.stdout


def test_error_from_stdin_names_stdin() -> None:
    result = run_opt(stdin=VERIFIER_ERROR)
    assert result.returncode == 1
    assert result.stderr.startswith("stdin:2:3: error: 'tess.add': shapes (3,4,1)")


def test_verify_diagnostics_checks_expectations(tmp_path: Path) -> None:
    expected_verifier = VERIFIER_ERROR.replace(
        "  %c = tess.add", "  // expected-error @+1 {{are not broadcastable}}\n  %c = tess.add"
    )
    expected_syntax = "// expected-error @+2 {{Expected ':'}}\n" + SYNTAX_ERROR
    text = expected_verifier + "// -----\n" + VALID + "// -----\n" + expected_syntax
    result = run_opt(
        str(write(tmp_path, "d.mlir", text)), "--split-input-file", "--verify-diagnostics"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "func.func @f(%a: tensor<3x1xf32>" in result.stdout  # a valid chunk is printed


def test_verify_diagnostics_fails_on_a_mismatch(tmp_path: Path) -> None:
    wrong = VERIFIER_ERROR.replace(
        "  %c = tess.add", "  // expected-error @+1 {{are broadcastable}}\n  %c = tess.add"
    )
    # The expectation of the first chunk does not count for the second (same line there).
    text = wrong + "// -----\n" + VERIFIER_ERROR
    path = write(tmp_path, "d.mlir", text)
    result = run_opt(str(path), "--split-input-file", "--verify-diagnostics")
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if ": error: " in line] == [
        f"{path}:3:3: error: unexpected error: 'tess.add': shapes (3,4,1) and (3,5) are not "
        "broadcastable",
        f'{path}:2:6: error: expected error "are broadcastable" was not produced',
        f"{path}:8:3: error: unexpected error: 'tess.add': shapes (3,4,1) and (3,5) are not "
        "broadcastable",
    ]
    assert "Traceback" not in result.stderr


def test_split_input_file_reports_every_failing_chunk(tmp_path: Path) -> None:
    text = VERIFIER_ERROR + "// -----\n" + VALID + "// -----\n" + SYNTAX_ERROR
    result = run_opt(str(write(tmp_path, "s.mlir", text)), "--split-input-file")
    assert result.returncode == 1
    assert [
        line.split(": error:")[0] for line in result.stderr.splitlines() if "error:" in line
    ] == [
        f"{tmp_path / 's.mlir'}:2:3",
        f"{tmp_path / 's.mlir'}:12:20",
    ]
    assert "func.func @f(%a: tensor<3x1xf32>" in result.stdout


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("no-such-pass", "Unrecognized passes: ['no-such-pass']"),
        ("canonicalize{no-such-option=1}", 'Provided arguments ["no_such_option"] not found'),
        ("canonicalize{", "Expected argument name here"),
    ],
)
def test_bad_pipeline_is_a_clean_error(tmp_path: Path, pipeline: str, message: str) -> None:
    result = run_opt(str(write(tmp_path, "ok.mlir", VALID)), "-p", pipeline)
    assert result.returncode == 1
    assert result.stderr.startswith("tessc-opt: error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_input_file_is_a_clean_error(tmp_path: Path) -> None:
    result = run_opt(str(tmp_path / "missing.mlir"))
    assert result.returncode == 1
    assert result.stderr.startswith("tessc-opt: error: ")
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------
# In-process: registration and pass failures
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailAtAddPass(ModulePass):
    """Fails at the first tess.add: through `emit_error` (located) or a bare exception."""

    name = "test-fail-at-add"

    located: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for child in op.walk():
            if isinstance(child, AddOp):
                if self.located:
                    child.emit_error("cannot lower this add", PassFailedException())
                raise PassFailedException("cannot lower this module")


@dataclass(frozen=True)
class BreakTypesPass(ModulePass):
    """Leaves invalid IR behind: the negation of a 3x1 tensor typed as 3x4."""

    name = "test-break-types"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for child in list(op.walk()):
            if isinstance(child, AddOp):
                neg = NegOp(child.lhs)
                neg.results[0]._type = child.result.type  # invalid on purpose
                child.parent_block().insert_op_before(neg, child)


@dataclass(frozen=True)
class NothingPass(ModulePass):
    """Changes nothing (unlike cse or canonicalize, it keeps dead invalid ops)."""

    name = "test-nothing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


@dataclass(frozen=True)
class CrashPass(ModulePass):
    """A pass with a bug: it crashes (on any input)."""

    name = "test-crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise KeyError("no such value")


class _RefuseAdd(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AddOp, rewriter: PatternRewriter) -> None:
        raise PassFailedException("this add cannot be rewritten")


@dataclass(frozen=True)
class RefuseAddPatternPass(ModulePass):
    """Fails inside a rewrite pattern, the way most passes would."""

    name = "test-refuse-add-pattern"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(_RefuseAdd()).rewrite_module(op)


class _TestOptMain(TesscOptMain):
    def register_all_passes(self) -> None:
        super().register_all_passes()
        self.register_pass(RefuseAddPatternPass.name, lambda: RefuseAddPatternPass)
        self.register_pass(FailAtAddPass.name, lambda: FailAtAddPass)
        self.register_pass(BreakTypesPass.name, lambda: BreakTypesPass)
        self.register_pass(CrashPass.name, lambda: CrashPass)
        self.register_pass(NothingPass.name, lambda: NothingPass)


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = _TestOptMain(args=list(args)).run()
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_registers_tess_dialect_passes_and_targets() -> None:
    driver = TesscOptMain(args=[])
    assert set(TESS_PASSES) <= set(driver.available_passes)
    assert {"canonicalize", "cse", "convert-linalg-to-loops"} <= set(driver.available_passes)
    assert "numba" in driver.available_targets and "mlir" in driver.available_targets
    assert {"mlir", "tess"} <= set(driver.available_frontends)
    assert "tess" in driver.ctx.registered_dialect_names
    assert "linalg" in driver.ctx.registered_dialect_names


def test_pass_failure_at_an_op_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, out, err = run_in_process(capsys, str(path), "-p", "cse,test-fail-at-add")
    assert status == 1
    assert err.splitlines()[0] == f"{path}:2:3: error: cannot lower this add"
    assert f"{path}: note: while running pass 'test-fail-at-add'" in err
    assert out == ""


def test_pass_failure_in_a_pattern_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, _, err = run_in_process(capsys, str(path), "-p", "test-refuse-add-pattern")
    assert status == 1
    assert err.splitlines()[0] == f"{path}:2:3: error: this add cannot be rewritten"


def test_pass_failure_without_an_op_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, _, err = run_in_process(capsys, str(path), "-p", "test-fail-at-add{located=false}")
    assert status == 1
    assert err.splitlines()[0] == f"{path}: error: cannot lower this module"


def test_invalid_pass_output_is_reported_at_the_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, _, err = run_in_process(capsys, str(path), "-p", "test-break-types")
    assert status == 1
    assert err.startswith(
        f"{path}: error: internal compiler error: IR produced by pass 'test-break-types' "
        "does not verify:"
    )
    assert "this is a bug in tessc" in err


@pytest.mark.parametrize("verify_each", [False, True])
def test_invalid_output_of_an_earlier_pass_names_that_pass(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    verify_each: bool,
) -> None:
    # By default only the last pass's output is verified; the pipeline is then replayed
    # to find the pass that broke the IR, with --verify-each it is caught right after it.
    monkeypatch.setenv("TESSC_REPRODUCER_DIR", str(tmp_path / "reproducers"))
    path = write(tmp_path, "ok.mlir", VALID)
    args = [str(path), "-p", "cse,test-break-types,test-nothing"]
    status, _, err = run_in_process(capsys, *args, *(["--verify-each"] if verify_each else []))
    assert status == 1
    assert err.startswith(
        f"{path}: error: internal compiler error: IR produced by pass 'test-break-types' "
        "does not verify:"
    )
    (reproducer,) = (tmp_path / "reproducers").iterdir()
    assert f"rerun: tessc-opt {reproducer} -p 'test-break-types'" in err
    assert "tess.neg" not in reproducer.read_text()  # the input of the breaking pass


def test_crash_on_unverified_invalid_ir_names_the_pass_that_broke_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESSC_REPRODUCER_DIR", str(tmp_path / "reproducers"))
    path = write(tmp_path, "ok.mlir", VALID)
    status, _, err = run_in_process(
        capsys, str(path), "-p", "test-break-types,test-nothing,test-crash"
    )
    assert status == 1
    assert "IR produced by pass 'test-break-types' does not verify" in err
    # A crash after valid passes is the crashing pass's, with its input saved.
    status, _, err = run_in_process(capsys, str(path), "-p", "cse,canonicalize,test-crash")
    assert status == 1
    assert "internal compiler error in pass 'test-crash': KeyError" in err
    assert "-p 'test-crash'" in err


def test_pass_failure_with_verify_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = VALID.replace("  %c", "  // expected-error @+1 {{cannot lower this add}}\n  %c")
    args = ("-p", "test-fail-at-add", "--verify-diagnostics")
    status, out, err = run_in_process(capsys, str(write(tmp_path, "e.mlir", expected)), *args)
    assert (status, out, err) == (0, "", "")
    # Unexpected: reported at the op (the driver's "while running pass" note is not one).
    path = write(tmp_path, "ok.mlir", VALID)
    status, out, err = run_in_process(capsys, str(path), *args)
    assert status == 1
    assert err.splitlines()[0] == f"{path}:2:3: error: unexpected error: cannot lower this add"
    assert "note" not in err and out == ""


def test_print_between_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, out, _ = run_in_process(
        capsys, str(path), "-p", "cse,canonicalize", "--print-between-passes"
    )
    assert status == 0
    assert out.startswith("IR after cse:\n")
    assert out.count("tess.add") == 2


def test_diagnostic_hook_is_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = Diagnostic.raise_exception
    run_in_process(capsys, str(write(tmp_path, "v.mlir", VERIFIER_ERROR)))
    assert Diagnostic.raise_exception is original


def test_main_returns_status_for_argument_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(write(tmp_path, "ok.mlir", VALID))]) == 0
    assert main([str(write(tmp_path, "bad.mlir", VERIFIER_ERROR))]) == 1
    assert main([str(tmp_path / "ok.mlir"), "-p", "no-such-pass"]) == 1
    capsys.readouterr()


# ---------------------------------------------------------------------------------------
# Lazy extensions: the numba target and the .tess frontend
# ---------------------------------------------------------------------------------------


def test_numba_target_calls_emit_numba(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("tessc.lowering.codegen.to_numba")
    seen: list[ModuleOp] = []

    def emit_numba(module: ModuleOp) -> str:
        seen.append(module)
        return "# generated\n"

    fake.emit_numba = emit_numba  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tessc.lowering.codegen.to_numba", fake)
    status, out, _ = run_in_process(capsys, str(write(tmp_path, "ok.mlir", VALID)), "-t", "numba")
    assert status == 0
    assert out == "# generated\n"
    assert len(seen) == 1 and isinstance(seen[0], ModuleOp)


def test_numba_target_unavailable_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tessc.lowering.codegen.to_numba", None)  # import fails
    status, _, err = run_in_process(capsys, str(write(tmp_path, "ok.mlir", VALID)), "-t", "numba")
    assert status == 1
    assert "error: the numba target is not available" in err


class _LocatedFrontendError(Exception):
    """Shaped like lark's UnexpectedInput: a message plus `line` and `column`."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.line, self.column = line, column


def _fake_tess_lang(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    from xdsl.parser import Parser

    from tessc.context import make_context

    calls: list[tuple[str, str]] = []

    def parse_tess(text: str, filename: str) -> ModuleOp:
        calls.append((text, filename))
        if text.startswith("bad"):
            raise _LocatedFrontendError("unexpected token 'y'", line=2, column=5)
        if text.startswith("shape"):
            raise ValueError("shapes (3,4,1) and (3,5) are not broadcastable")
        return Parser(make_context(), VALID, filename).parse_module()

    fake = types.ModuleType("tessc.frontend.tess_lang")
    fake.parse_tess = parse_tess  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tessc.frontend.tess_lang", fake)
    return calls


def test_tess_frontend_is_used_for_tess_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_tess_lang(monkeypatch)
    path = write(tmp_path, "prog.tess", "def f(x): return x\n")
    status, out, _ = run_in_process(capsys, str(path))
    assert status == 0
    assert calls == [("def f(x): return x\n", str(path))]
    assert "tess.add" in out


def test_tess_frontend_errors_are_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_tess_lang(monkeypatch)
    bad = write(tmp_path, "bad.tess", "bad\nx = y\n")
    status, _, err = run_in_process(capsys, str(bad))
    assert status == 1
    assert err.splitlines()[:3] == [
        f"{bad}:2:5: error: unexpected token 'y'",
        "x = y",
        "    ^",
    ]
    shape = write(tmp_path, "shape.tess", "shape\n")
    status, _, err = run_in_process(capsys, str(shape))
    assert status == 1
    assert err.splitlines()[0] == (
        f"{shape}: error: shapes (3,4,1) and (3,5) are not broadcastable"
    )


# ---------------------------------------------------------------------------------------
# --verify-diagnostics: each anchor form and each failure mode
# ---------------------------------------------------------------------------------------

ANCHORED = """\
op0  // expected-error {{on its own line}}
// expected-error @+2 {{two below}}
// expected-warning @below {{the next plain line}}
op3
// expected-remark @-1 {{one above}}
// expected-note @above {{the last plain line}}
// expected-error-re @unknown {{no {{loc[a-z]+}} at all}}
op7
"""


def _verify(text: str, *emitted: Emitted, name: str = "t.mlir", offset: int = 0) -> list[str]:
    verifier = DiagnosticVerifier(SourceChunk(name, text, offset))
    for diagnostic in emitted:
        verifier.process(diagnostic)
    return verifier.finish()


def test_every_anchor_form_finds_its_line() -> None:
    emitted = [
        Emitted("error", "error on its own line here", "t.mlir", 1, 1),
        Emitted("error", "two below", "t.mlir", 4, 1),
        Emitted("warning", "the next plain line", "t.mlir", 4, 1),
        Emitted("remark", "one above", "t.mlir", 4, 1),
        Emitted("note", "the last plain line", "t.mlir", 4, 1),
        Emitted("error", "no location at all"),
    ]
    assert _verify(ANCHORED, *emitted) == []
    # In a later --split-input-file chunk, lines count from the start of the file.
    moved = [Emitted(d.severity, d.message, d.file, d.line and d.line + 10) for d in emitted]
    assert _verify(ANCHORED, *moved, offset=10) == []


@pytest.mark.parametrize(
    ("emitted", "message"),
    [
        # the text is a substring, case and all
        (Emitted("error", "On its own line", "t.mlir", 1, 1), "unexpected error: On its own"),
        # the line must match, and the file
        (Emitted("error", "on its own line", "t.mlir", 2, 1), "t.mlir:2:1: error: unexpected"),
        (Emitted("error", "on its own line", "u.mlir", 1, 1), "u.mlir:1:1: error: unexpected"),
        # a located diagnostic does not match @unknown, nor an unlocated one a line
        (Emitted("error", "no location at all", "t.mlir", 7, 1), "unexpected error: no loc"),
        (Emitted("error", "on its own line"), "t.mlir: error: unexpected error: on its own"),
        # the severity must match
        (
            Emitted("warning", "on its own line", "t.mlir", 1, 1),
            "t.mlir:1:9: error: 'warning' diagnostic emitted when expecting a 'error'",
        ),
    ],
)
def test_a_mismatch_is_reported(emitted: Emitted, message: str) -> None:
    text = "op0  // expected-error {{on its own line}}\n"
    text += "// expected-error @unknown {{no location at all}}\n"
    errors = _verify(text, emitted)
    assert any(message in error for error in errors), errors
    assert errors, "a mismatch must fail"


def test_an_expectation_nothing_meets_is_reported_at_its_comment() -> None:
    errors = _verify(ANCHORED)
    assert len(errors) == 6
    assert errors[0].startswith('t.mlir:1:9: error: expected error "on its own line" was not')
    assert (
        't.mlir:7:4: error: expected error "no {{loc[a-z]+}} at all" was not produced'
        in (errors[5])
    )


def test_bad_expectations_are_errors() -> None:
    assert _verify("// expected-error-re {{a {{[}} b}}\n")[0].startswith(
        "t.mlir:1:4: error: invalid regex:"
    )
    assert "found start of regex with no end" in _verify("// expected-error-re {{a {{b}}\n")[0]
    # a dangling @below expects its diagnostic on the last line
    assert _verify("// expected-error @below {{x}}", Emitted("error", "x", "t.mlir", 1, 1)) == []


def test_regex_blocks_are_regular_expressions_and_the_rest_literal() -> None:
    text = "op // expected-error-re {{f(x) at {{[0-9]+}}.}}\n"
    assert _verify(text, Emitted("error", "f(x) at 42.", "t.mlir", 1, 1)) == []
    assert _verify(text, Emitted("error", "fx at 42.", "t.mlir", 1, 1)) != []


def test_expectations_in_tess_comments(tmp_path: Path) -> None:
    assert EXPECTATION.search("# expected-error @+1 {{x}}") is not None


# ---------------------------------------------------------------------------------------
# mlir-opt's command line: stdin, --pass-pipeline, named pipelines, IR dumps, pass lists
# ---------------------------------------------------------------------------------------


def test_dash_reads_stdin() -> None:
    result = run_opt("-", stdin=VALID)
    assert result.returncode == 0, result.stderr
    assert "tess.add" in result.stdout
    result = run_opt("-", stdin=VERIFIER_ERROR)
    assert result.stderr.startswith("stdin:2:3: error: 'tess.add'")


def test_pass_pipeline_as_mlir_opt_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write(tmp_path, "ok.mlir", VALID))
    spec = "builtin.module(tess-to-linalg, tess-fuse{max-cheap-ops=2}, cse)"
    status, out, _ = run_in_process(capsys, path, f"--pass-pipeline={spec}")
    assert status == 0 and "linalg.generic" in out
    for bad, message in [
        ("builtin.module(func.func(cse))", "nested pipeline 'func.func(...)' is not supported"),
        ("cse", "expected 'builtin.module(...)'"),
    ]:
        assert main([path, f"--pass-pipeline={bad}"]) == 1
        assert message in capsys.readouterr().err
    assert main([path, "-p", "cse", "--pass-pipeline=builtin.module(cse)"]) == 1
    assert "not both" in capsys.readouterr().err


def test_named_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # cpu on an elementwise program: tess-pack-matmul & co. find nothing, and say nothing.
    path = str(write(tmp_path, "ok.mlir", VALID))
    status, out, err = run_in_process(capsys, path, "-p", "cpu")
    assert (status, err) == (0, "")
    assert "tess.kernel" in out and "scf.parallel" in out
    assert main([path, "-p", "cpu{fast=true}"]) == 1
    assert "the named pipeline 'cpu' takes no options" in capsys.readouterr().err


def test_print_ir_before_and_after_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write(tmp_path, "ok.mlir", VALID))
    args = ["-p", "cse,canonicalize", "--mlir-print-ir-before-all", "--mlir-print-ir-after-all"]
    status, out, err = run_in_process(capsys, path, *args, "--mlir-print-op-generic")
    assert status == 0
    headers = [line for line in err.splitlines() if line.startswith("// -----// IR Dump")]
    assert headers == [
        "// -----// IR Dump Before CommonSubexpressionElimination (cse) //----- //",
        "// -----// IR Dump After CommonSubexpressionElimination (cse) //----- //",
        "// -----// IR Dump Before CanonicalizePass (canonicalize) //----- //",
        "// -----// IR Dump After CanonicalizePass (canonicalize) //----- //",
    ]
    assert err.count('"tess.add"') == 4 and '"tess.add"' in out  # generic form everywhere


def test_mlir_timing_is_timing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_in_process(
        capsys, str(write(tmp_path, "ok.mlir", VALID)), "-p", "cse", "--mlir-timing"
    )
    assert status == 0 and "Total Execution Time" in err


def test_list_passes_shows_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-passes"]) == 0
    listing = capsys.readouterr().out
    assert "  tess-fuse-horizontal - " in listing
    assert "      donated-only=<bool> (default false)" in listing
    assert "      chunk-size=<int> (default 16384)" in listing
    assert "  cpu - " in listing and "canonicalize" in listing
    for name in TESS_PASSES:
        assert f"  {name}" in listing
    with pytest.raises(SystemExit):
        TesscOptMain(args=["--help"])
    assert "donated-only=<bool>" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# A pass named on the command line needs ops of its input level
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("passes", "message"),
    [
        ("tess-fuse", "pass 'tess-fuse' expects linalg-on-tensors IR (ops like linalg.generic"),
        ("tess-linalg-to-loops", "pass 'tess-linalg-to-loops' expects linalg IR"),
        ("tess-gpu-map", "pass 'tess-gpu-map' expects kernel-function IR"),
        ("tess-to-linalg,tess-tile", "pass 'tess-tile' expects loop IR"),
    ],
)
def test_pass_without_its_input_level_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], passes: str, message: str
) -> None:
    path = write(tmp_path, "ok.mlir", VALID)
    status, _, err = run_in_process(capsys, str(path), "-p", passes)
    assert status == 1
    assert err.startswith(f"{path}: error: {message}"), err
    assert err.count("error:") == 1  # once
    # As a diagnostic at the module, which has no location: expected-error @unknown.
    expected = f"// expected-error @unknown {{{{{message}}}}}\n" + VALID
    status, _, err = run_in_process(
        capsys, str(write(tmp_path, "e.mlir", expected)), "-p", passes, "--verify-diagnostics"
    )
    assert (status, err) == (0, "")


def test_every_level_checked_pass_is_a_tess_pass() -> None:
    assert set(INPUT_LEVELS) <= set(TESS_PASSES)
