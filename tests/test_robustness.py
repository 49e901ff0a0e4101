"""Hostile inputs (issue 10): each is a located diagnostic and exit status 1, or a correct
result — never a traceback, a hang or a crash. One case per input the issue lists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter

from tessc.cli.opt import main as tessc_opt
from tessc.dialects.tess import AddOp, NegOp

LOCATED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error: (?P<message>.*)$")


def opt(tmp_path: Path, name: str, content: str | bytes, *extra: str, capsys) -> str:
    """Run tessc-opt on a file holding `content`; its stderr (asserting exit status 1)."""
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status = tessc_opt([str(path), *extra])
    captured = capsys.readouterr()
    assert status == 1, captured.out
    assert "Traceback" not in captured.err
    return captured.err


def located(stderr: str) -> re.Match[str]:
    first = stderr.splitlines()[0]
    match = LOCATED.match(first)
    assert match, f"not a located diagnostic: {stderr!r}"
    return match


TESS_HEAD = "def f(x: f32[3]) -> f32[3]:\n    return "

TESS_ERRORS = {
    "huge-power": (TESS_HEAD + "x * 10 ** 400\n", "out of range", (2, 16)),
    "tower-of-powers": (TESS_HEAD + "x * 10 ** 10 ** 9\n", "out of range", (2, 16)),
    "huge-literal": (TESS_HEAD + "x * " + "9" * 400 + "\n", "out of range", (2, 16)),
    "huge-float-literal": (TESS_HEAD + "x * 1e999\n", "out of range", (2, 16)),
    "huge-dim": (
        "def f(x: f32[99999999999999999999]) -> f32[3]:\n    return x\n",
        "too large",
        (1, 14),
    ),
    "complex-constant": (TESS_HEAD + "x * (-8) ** 0.5\n", "not a real number", (2, 16)),
    "deep-negation": (TESS_HEAD + "-" * 5000 + "x\n", "nested too deeply", (2,)),
    "invalid-utf8": (b"def f(x: f32[3]) -> f32[3]:\n    return x \xff\xfe\n", "UTF-8", (2, 14)),
}


@pytest.mark.parametrize("case", sorted(TESS_ERRORS))
def test_tess_inputs_give_located_errors(case: str, tmp_path: Path, capsys) -> None:
    content, message, where = TESS_ERRORS[case]
    match = located(opt(tmp_path, "bad.tess", content, capsys=capsys))
    assert message in match["message"]
    assert (int(match["line"]), int(match["col"]))[: len(where)] == where


def test_a_400_term_sum_compiles(tmp_path: Path, capsys) -> None:
    path = tmp_path / "sum.tess"
    path.write_text(TESS_HEAD + " + ".join(["x"] * 400) + "\n")
    assert tessc_opt([str(path)]) == 0
    assert capsys.readouterr().out.count("tess.add") == 399


def test_constant_folding_keeps_python_semantics() -> None:
    import numpy as np

    from tessc.frontend.tess_lang import parse_tess
    from tessc.reference import interpret

    module = parse_tess(TESS_HEAD + "x * 2 ** 3 ** 2 - 1 - 2 * 3\n")
    (y,) = interpret(module, "f", [np.ones(3, np.float32)])
    assert y.tolist() == [512 - 1 - 6] * 3


def test_tower_of_powers_does_not_hang(tmp_path: Path) -> None:
    path = tmp_path / "tower.tess"
    path.write_text(TESS_HEAD + "x * 10 ** 10 ** 9\n")
    result = subprocess.run(
        [sys.executable, "-m", "tessc.cli.opt", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "out of range" in result.stderr


# -- SSA dominance (issue 10, item 2b) ---------------------------------------------------

T = "tensor<3xf32>"
SELF_USE = f"""func.func @f(%a: {T}) -> {T} {{
  %0 = tess.add %0, %a : {T}, {T} -> {T}
  func.return %0 : {T}
}}
"""
CYCLE = f"""func.func @f(%a: {T}) -> {T} {{
  %0 = tess.add %1, %a : {T}, {T} -> {T}
  %1 = tess.mul %0, %a : {T}, {T} -> {T}
  func.return %1 : {T}
}}
"""
NESTED_USE_BEFORE_DEF = """func.func @f(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = arith.addi %later, %i : index
  }
  %later = arith.constant 2 : index
  func.return
}
"""


@pytest.mark.parametrize(
    "text, message",
    [
        (SELF_USE, "'tess.add' operand 0 is the op's own result"),
        (CYCLE, "'tess.add' operand 0 is used before its definition"),
        (NESTED_USE_BEFORE_DEF, "'arith.addi' operand 0 (%later) is used before"),
    ],
    ids=["self-use", "cycle", "nested"],
)
def test_uses_not_dominated_by_their_definition_are_rejected(text: str, message: str) -> None:
    from xdsl.utils.exceptions import VerifyException

    from tessc.compiler import compile_module
    from tessc.reference import parse_module

    with pytest.raises(VerifyException, match=re.escape(message)):
        parse_module(text)
    from xdsl.parser import Parser

    from tessc.context import make_context

    module = Parser(make_context(), text).parse_module()
    with pytest.raises(VerifyException, match=re.escape(message)):
        compile_module(module, "f", "cpu")


def test_dominated_uses_in_nested_regions_and_blocks_are_accepted() -> None:
    from tessc.reference import parse_module

    parse_module(
        """func.func @f(%n: index, %c: i1) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = arith.addi %c1, %i : index
  }
  cf.cond_br %c, ^a, ^b
^a:
  %y = arith.addi %c0, %n : index
  cf.br ^b
^b:
  func.return %c1 : index
}
"""
    )


# -- the lexer's string literals (issue 10, item 2a) -------------------------------------

UNTERMINATED = f"""func.func @f(%a: {T}, %b: {T}) -> {T} {{
  %c = tess.add"(%a, %b) : ({T}, {T}) -> {T} {"x" * 60}
  func.return %c : {T}
}}
"""


def test_the_patched_string_regex_matches_what_xdsl_matches() -> None:
    import random

    from tessc.xdsl_patches.fixes import STRING_LITERAL

    original = re.compile(r'"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
    rng = random.Random(0)
    alphabet = ['"', "\\", "n", "t", "a", "0", "F", "\n", "\v", " ", "é", "g"]
    for _ in range(20_000):
        text = '"' + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        expected, got = original.match(text), STRING_LITERAL.match(text)
        assert (expected and expected.group()) == (got and got.group()), text


def test_an_unterminated_string_is_a_located_error_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "unterminated.mlir"
    path.write_text(UNTERMINATED)
    result = subprocess.run(
        [sys.executable, "-m", "tessc.cli.opt", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    match = located(result.stderr)
    assert (match["line"], match["col"]) == ("2", "16")


# -- .mlir inputs that reached Python errors (issue 10, item 4) --------------------------

FUNC = (
    "func.func @f(%a: tensor<3xf32>) -> tensor<3xf32> {{\n{}\n"
    "  func.return %a : tensor<3xf32>\n}}\n"
)
MLIR_ERRORS = {
    "invalid-utf8": (FUNC.format("  // \xff").encode("latin-1"), "invalid UTF-8", (2, 6)),
    "huge-dims": (
        FUNC.format(
            "  %0 = tess.sum %a dims = [99999999999999999999] : tensor<3xf32> -> tensor<f32>"
        ),
        "",
        (2,),
    ),
    "f32-constant-overflow": (FUNC.format("  %0 = arith.constant 1.0e39 : f32"), "", (2,)),
    "hex-float-overflow": (
        FUNC.format("  %0 = arith.constant 0xFFFFFFFFFFFFFFFFFFFF : f32"),
        "",
        (2,),
    ),
    "f80-fill": (FUNC.format("  %0 = tess.fill 1.0 : tensor<3xf80>"), "", (2,)),
    "bad-iterator-type": (
        FUNC.format(
            "  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], "
            'iterator_types = ["paralel"]} outs(%a : tensor<3xf32>) {\n'
            "  ^bb0(%x: f32):\n    linalg.yield %x : f32\n  } -> tensor<3xf32>"
        ),
        "paralel",
        (2, 3),
    ),
    "self-use": (SELF_USE, "own result", (2, 3)),
    "operand-defined-in-its-own-region": (
        "func.func @f(%n: index) -> f32 {\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %r = scf.for %i = %c0 to %n step %c0 iter_args(%b = %v) -> (f32) {\n"
        "    %v = arith.constant 1.0 : f32\n"
        "    scf.yield %v : f32\n"
        "  }\n"
        "  func.return %r : f32\n"
        "}\n",
        "never defined",
        (3, 3),
    ),
    "cycle": (CYCLE, "used before its definition", (2, 3)),
    "misspelt-property": (  # func.return's verifier crashed on its parent's missing property
        '"builtin.module"() ({\n'
        '  "func.func"() <{sym_name = "g", functiof_type = () -> ()}> ({\n'
        '    "func.return"() : () -> ()\n'
        "  }) : () -> ()\n"
        "}) : () -> ()\n",
        "function_type",
        (3, 5),
    ),
    "store-index-count": (  # xDSL's memref.store verifier raised a bare Exception
        "func.func @f(%m: memref<8xf32>, %v: f32) {\n"
        "  memref.store %v, %m[] : memref<8xf32>\n"
        "  func.return\n"
        "}\n",
        "Expected an index for each dimension",
        (2, 3),
    ),
}


@pytest.mark.parametrize("case", sorted(MLIR_ERRORS))
def test_mlir_inputs_give_located_errors(case: str, tmp_path: Path, capsys) -> None:
    content, message, where = MLIR_ERRORS[case]
    match = located(opt(tmp_path, "bad.mlir", content, capsys=capsys))
    assert message in match["message"]
    assert (int(match["line"]), int(match["col"]))[: len(where)] == where


# -- internal compiler errors (issue 10, item 3) ----------------------------------------

ADD = f"""func.func @f(%a: {T}) -> {T} {{
  %0 = tess.add %a, %a : {T}, {T} -> {T}
  func.return %0 : {T}
}}
"""


class CrashingPass(ModulePass):
    """A pass with a bug (raises a KeyError), registered only by these tests."""

    name = "tess-test-crash"

    def apply(self, ctx, op) -> None:
        raise KeyError("no such value")


class BreakingPass(ModulePass):
    """A pass with a bug: it leaves an op using its own result."""

    name = "tess-test-break"

    def apply(self, ctx, op) -> None:
        for inner in op.walk():
            if inner.name == "linalg.generic" and inner.results:
                inner.operands[0] = inner.results[0]
                return


def _bad_add(value: SSAValue) -> Operation:
    """A `tess.add` whose result shape is wrong: it does not verify."""
    return AddOp.create(operands=[value, value], result_types=[TensorType(f32, [7])])


class ReplaceNegBadly(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NegOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, _bad_add(op.operands[0]), safe_erase=False)


class InsertBeforeNeg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NegOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.prev_op, AddOp):  # once
            rewriter.insert(_bad_add(op.operands[0]))


class ReplacingPass(ModulePass):
    """A pass with a bug: it rewrites each tess.neg into an invalid op (test-only)."""

    name = "tess-test-invalid-replace"

    def apply(self, ctx, op) -> None:
        PatternRewriteWalker(ReplaceNegBadly()).rewrite_module(op)


class InsertingPass(ModulePass):
    """A pass with a bug: matching a tess.neg, it inserts an invalid op (test-only)."""

    name = "tess-test-invalid-insert"

    def apply(self, ctx, op) -> None:
        PatternRewriteWalker(InsertBeforeNeg()).rewrite_module(op)


class StaticReplacingPass(ModulePass):
    """A pass with a bug: `Rewriter.replace_op` of each tess.neg by an op holding an
    invalid op in its region (test-only)."""

    name = "tess-test-invalid-nested"

    def apply(self, ctx, op) -> None:
        for neg in [o for o in op.walk() if isinstance(o, NegOp)]:
            inner = Block([_bad_add(neg.operands[0])])
            inner.add_op(scf.YieldOp(neg.operands[0]))
            wrapper = scf.ExecuteRegionOp([neg.result.type], Region(inner))
            Rewriter.replace_op(neg, wrapper)


INVALID_REWRITES = {
    "tess-test-invalid-replace": ReplacingPass,
    "tess-test-invalid-insert": InsertingPass,
    "tess-test-invalid-nested": StaticReplacingPass,
}

NEG = f"""func.func @f(%a: {T}) -> {T} {{
  %0 = tess.exp %a : {T}
  %1 = tess.neg %0 : {T}
  func.return %1 : {T}
}}
"""


@pytest.mark.parametrize("name", sorted(INVALID_REWRITES))
def test_invalid_ir_from_a_pass_is_reported_at_the_rewritten_users_line(
    name: str, test_passes, tmp_path: Path, capsys
) -> None:
    stderr = opt(tmp_path, "neg.mlir", NEG, "-p", name, capsys=capsys)
    match = located(stderr)  # was `neg.mlir: error: ...`: a new op had no location
    assert (match["line"], match["col"]) == ("3", "3")  # the tess.neg
    assert f"IR produced by pass '{name}' does not verify" in match["message"]


def reproducer_in(text: str) -> Path:
    match = re.search(r"saved in (\S+\.mlir)", text)
    assert match, text
    path = Path(match.group(1))
    assert path.exists()
    return path


@pytest.fixture
def test_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    from tessc.passes import TESS_PASSES

    monkeypatch.setitem(TESS_PASSES, "tess-test-crash", "tests.test_robustness:CrashingPass")
    monkeypatch.setitem(TESS_PASSES, "tess-test-break", "tests.test_robustness:BreakingPass")
    for name, cls in INVALID_REWRITES.items():
        monkeypatch.setitem(TESS_PASSES, name, f"tests.test_robustness:{cls.__name__}")
    monkeypatch.setenv("TESSC_REPRODUCER_DIR", str(tmp_path / "reproducers"))
    # A fresh kernel cache: a warm-start hit would run no pass at all.
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "reproducers"


def test_tessc_opt_reports_a_crashing_pass_as_an_ice(test_passes, tmp_path, capsys) -> None:
    stderr = opt(tmp_path, "add.mlir", ADD, "-p", "tess-to-linalg,tess-test-crash", capsys=capsys)
    assert "internal compiler error in pass 'tess-test-crash': KeyError" in stderr
    assert "this is a bug in tessc" in stderr
    reproducer = reproducer_in(stderr)
    assert reproducer.parent == test_passes
    assert "linalg.generic" in reproducer.read_text()  # the module before the pass
    assert f"tessc-opt {reproducer} -p 'tess-test-crash'" in stderr


def test_tessc_opt_reports_broken_pass_output_as_an_ice(test_passes, tmp_path, capsys) -> None:
    stderr = opt(tmp_path, "add.mlir", ADD, "-p", "tess-to-linalg,tess-test-break", capsys=capsys)
    assert "internal compiler error: IR produced by pass 'tess-test-break'" in stderr
    assert "this is a bug in tessc" in stderr
    assert "linalg.generic" in reproducer_in(stderr).read_text()


def test_compile_module_reports_a_crashing_pass_as_an_ice(
    test_passes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tessc.compiler import compile_module
    from tessc.diagnostics import InternalCompilerError
    from tessc.lowering.buffers.bufferize import TessBufferizePass
    from tessc.reference import parse_module

    monkeypatch.setattr(TessBufferizePass, "apply", CrashingPass.apply)
    with pytest.raises(InternalCompilerError, match="pass 'tess-bufferize'.*bug in tessc") as info:
        compile_module(parse_module(ADD), "f", "cpu")
    text = reproducer_in(str(info.value)).read_text()
    assert "linalg.generic" in text and "memref" not in text  # just before bufferization


def test_tessc_run_reports_a_crashing_pass_as_an_ice(
    test_passes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    from tessc.cli.run import main as tessc_run
    from tessc.lowering.buffers.bufferize import TessBufferizePass

    monkeypatch.setattr(TessBufferizePass, "apply", CrashingPass.apply)
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    assert tessc_run([str(path)]) == 1
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    assert "internal compiler error in pass 'tess-bufferize'" in stderr
    assert "this is a bug in tessc" in stderr and reproducer_in(stderr).exists()


# -- tessc-run's inputs and options (issue 10, items 4 and 6) ----------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["/dev/zero"], "/dev/zero: error: cannot read the file: not a regular file"),
        (["."], "error: cannot read the file: a directory"),
        (["{add}", "--precision", "-3"], "argument --precision: expected a number of digits"),
        (["{add}", "--precision", "100000"], "argument --precision: expected a number"),
        (["{add}", "--seed", "-5"], "argument --seed: expected a non-negative integer, got -5"),
    ],
)
def test_tessc_run_refuses_bad_files_and_options(argv, message, tmp_path: Path, capsys) -> None:
    from tessc.cli.run import main as tessc_run

    add = tmp_path / "add.mlir"
    add.write_text(ADD)
    try:
        status = tessc_run([a.format(add=add) for a in argv])
    except SystemExit as exit:  # argparse
        status = exit.code
    assert status in (1, 2)
    stderr = capsys.readouterr().err
    assert message in stderr and "Traceback" not in stderr


def test_tessc_opt_refuses_a_device_file(capsys) -> None:
    assert tessc_opt(["/dev/zero"]) == 1
    assert "not a regular file" in capsys.readouterr().err


# -- clear behaviour for API habits (issue 10, item 6) -----------------------------------


def test_jit_of_a_jitted_function_traces_through() -> None:
    import numpy as np

    import tessc as ts

    inner = ts.jit(lambda x: x * 2.0, target="reference")
    outer = ts.jit(inner, target="reference")
    helper_user = ts.jit(lambda x: inner(x) + 1.0, target="reference")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(outer(x), x * 2)
    np.testing.assert_array_equal(helper_user(x), x * 2 + 1)


def test_big_endian_arrays_are_computed_on_in_native_order() -> None:
    import numpy as np

    import tessc as ts
    from tessc.compiler import compile_module
    from tessc.reference import parse_module

    x = np.arange(3, dtype=">f4")
    y = ts.jit(lambda x: x * 2.0, target="reference")(x)
    assert y.dtype == np.float32 and y.tolist() == [0.0, 2.0, 4.0]
    (z,) = compile_module(parse_module(ADD), "f", "reference")(x.astype("<f4"))
    (w,) = compile_module(parse_module(ADD), "f", "cpu")(x)
    assert w.tolist() == z.tolist() == [0.0, 2.0, 4.0]


def test_a_vector_op_given_to_the_numba_target_is_located(tmp_path: Path, capsys) -> None:
    # A vector-level input is valid IR the numba target cannot emit: the user's input,
    # so a located error at the op, not an internal compiler error.
    source = (
        "func.func @f(%v: vector<4xf32>) -> vector<4xf32> {\n"
        "  %w = math.exp %v : vector<4xf32>\n"
        "  func.return %w : vector<4xf32>\n"
        "}\n"
    )
    stderr = opt(tmp_path, "vector.mlir", source, "-t", "numba", capsys=capsys)
    match = located(stderr)
    assert (match.group("line"), match.group("col")) == ("2", "3")
    assert "internal compiler error" not in stderr
    assert "vector<4xf32>" in stderr


# -- the cpu pipeline on linalg ops it cannot outline (issue 23, section 4) ---------------

GENERIC_1D = (
    "linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], "
    'iterator_types = ["parallel"]}'
)
NESTED = {
    "generic-in-generic": (
        "func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
        f"  %0 = {GENERIC_1D} ins(%a : tensor<4xf32>) outs(%b : tensor<4xf32>) {{\n"
        "  ^bb0(%x: f32, %y: f32):\n"
        "    %e = tensor.empty() : tensor<2xf32>\n"
        "    %1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], "
        'iterator_types = ["parallel"]} outs(%e : tensor<2xf32>) {\n'
        "    ^bb1(%z: f32):\n"
        "      linalg.yield %x : f32\n"
        "    } -> tensor<2xf32>\n"
        "    linalg.yield %x : f32\n"
        "  } -> tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n"
        "}\n",
        "expects linalg ops at the top level of @f, found 'linalg.generic' nested in "
        "'linalg.generic'",
        (5, 5),
    ),
    "generic-in-scf-for": (
        "func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %c2 = arith.constant 2 : index\n"
        "  %c1 = arith.constant 1 : index\n"
        "  scf.for %i = %c0 to %c2 step %c1 {\n"
        f"    {GENERIC_1D} ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {{\n"
        "    ^bb0(%x: f32, %y: f32):\n"
        "      linalg.yield %x : f32\n"
        "    }\n"
        "  }\n"
        "  func.return\n"
        "}\n",
        "found 'linalg.generic' nested in 'scf.for'",
        (6, 5),
    ),
    "tensor-generic-in-scf-if": (
        "func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: i1) -> tensor<4xf32> {\n"
        "  %0 = scf.if %c -> (tensor<4xf32>) {\n"
        f"    %1 = {GENERIC_1D} ins(%a : tensor<4xf32>) outs(%b : tensor<4xf32>) {{\n"
        "    ^bb0(%x: f32, %y: f32):\n"
        "      linalg.yield %x : f32\n"
        "    } -> tensor<4xf32>\n"
        "    scf.yield %1 : tensor<4xf32>\n"
        "  } else {\n"
        "    scf.yield %a : tensor<4xf32>\n"
        "  }\n"
        "  func.return %0 : tensor<4xf32>\n"
        "}\n",
        "tess-bufferize cannot bufferize 'scf.if'",
        (2, 3),
    ),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_the_cpu_pipeline_locates_linalg_ops_it_cannot_outline(
    case: str, tmp_path: Path, capsys
) -> None:

    content, message, where = NESTED[case]
    stderr = opt(tmp_path, "nested.mlir", content, "-p", "cpu", capsys=capsys)
    match = located(stderr)  # was `nested.mlir: error: ...`, no line
    assert message in match["message"]
    assert (int(match["line"]), int(match["col"])) == where


def test_a_reproducer_with_a_multi_line_message_parses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tessc.diagnostics import write_reproducer
    from tessc.reference import parse_module

    monkeypatch.setenv("TESSC_REPRODUCER_DIR", str(tmp_path))
    note = "tessc internal compiler error in pass 'p': ValueError: first line\nsecond line\n"
    path = write_reproducer(parse_module(ADD), note)
    assert path is not None
    text = path.read_text()
    assert "// second line\n" in text
    parse_module(text)  # the note's every line is a comment
