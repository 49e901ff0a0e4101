"""
Upstream MLIR (`mlir-opt`, `mlir-runner` 22) as a check and as a second oracle.

- Every stage output of the lit corpus (each RUN line's `tessc-opt` output that is IR;
  negative tests and `-t numba` excluded by rule, `helpers.upstream_corpus`) and of a set
  of programs at the tess, fused, buffers, loops (`cpu`) and gpu (`cuda`) stages, printed
  with `--emit-upstream` (`tessc.upstream`), parses and verifies with upstream
  `mlir-opt --allow-unregistered-dialect`: all of them, one `mlir-opt --split-input-file`
  process per lit file and per stage. So do the lit inputs written in upstream syntax
  only (no tessc op in custom form).
- A differential test: each program's fused stage (`kernel.group` inlined; no tessc op is
  left there), lowered by MLIR's own passes and run by `mlir-runner`
  (`helpers.mlir_runner`), gives tessc's compiled (`cpu`) results and the reference
  interpreter's, within the reference tests' tolerance.

Without upstream MLIR (Debian: `apt-get install mlir-22-tools`) the tests skip, saying so;
in CI (`$CI` set) they fail instead: `.ci/run` installs it.
"""

from __future__ import annotations

import functools
import io
import os
import random
import re
import subprocess

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

import tessc as ts
from tessc.compiler import compile_module, lower_module
from tessc.frontend.tess_lang import parse_tess
from tessc.fuzz.programs import generate
from tessc.reference import interpret, parse_module
from tessc.upstream import is_tessc_op, print_upstream

from helpers.compare import assert_results_match, random_inputs
from helpers.mlir_runner import (
    INSTALL_HINT,
    entry_function,
    find_tool,
    inline_kernel_groups,
    parse_printed,
    run_upstream,
    with_entry,
)
from helpers.upstream_corpus import LIT_ROOT, emit_upstream, lit_commands


def upstream_tool(name: str) -> str:
    """The path of `name`; a skip (a failure in CI) where upstream MLIR is not installed."""
    path = find_tool(name)
    if path is None:
        reason = f"upstream MLIR's {name} is not installed ({INSTALL_HINT})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run this test (.ci/run installs it)")
        pytest.skip(reason)
    return path


def check_parses(texts: list[tuple[str, str]]) -> None:
    """`mlir-opt --allow-unregistered-dialect` parses and verifies every (name, text): one
    process for all, split on `// -----`; a failure names the texts it reports on."""
    mlir_opt = upstream_tool("mlir-opt")
    joined, starts = "", []
    for name, text in texts:
        starts.append((joined.count("\n") + 1, name))
        joined += text.rstrip("\n") + "\n// -----\n"
    result = subprocess.run(
        [mlir_opt, "--allow-unregistered-dialect", "--split-input-file", "-o", "/dev/null", "-"],
        input=joined,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        failing = sorted(
            {
                next(name for start, name in reversed(starts) if start <= int(line))
                for line in _error_lines(result.stderr)
            }
        )
        raise AssertionError(
            f"mlir-opt rejects {', '.join(failing) or 'the corpus'}:\n{result.stderr[:4000]}"
        )


def _error_lines(stderr: str) -> list[str]:
    """The line numbers of `<stdin>:LINE:COL: error:` diagnostics."""
    lines = []
    for message in stderr.splitlines():
        head, _, rest = message.partition(": error:")
        parts = head.rsplit(":", 2)
        if rest and len(parts) == 3 and parts[1].isdigit():
            lines.append(parts[1])
    return lines


# -- the printer (no upstream MLIR needed) ------------------------------------------------


def test_emit_upstream_prints_only_tessc_ops_generic() -> None:
    text = emit_upstream([str(LIT_ROOT / "dialect" / "roundtrip.mlir")])
    assert '= "tess.add"(%a, %b) : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>' in text
    assert "func.func @binary(" in text and "func.return" in text  # MLIR's custom form
    text = upstream_text(lower_module(parse_tess(PROGRAMS), "fused"))
    assert '"kernel.group"() ({' in text  # a reduction and its fill
    assert '"linalg.generic"' not in text  # the ops a generic op holds: their custom form


# -- the lit corpus -----------------------------------------------------------------------

LIT_FILES = sorted(LIT_ROOT.glob("**/*.mlir")) + sorted(LIT_ROOT.glob("**/*.tess"))
LIT_IR_FILES = [p for p in LIT_FILES if lit_commands(p)]


def test_the_corpus_has_ir_outputs() -> None:
    # The rule excludes negative tests and other targets, not whole directories.
    assert len(LIT_IR_FILES) >= 45
    assert sum(len(lit_commands(p)) for p in LIT_IR_FILES) >= 90


@pytest.mark.parametrize("path", LIT_IR_FILES, ids=lambda p: str(p.relative_to(LIT_ROOT)))
def test_lit_stage_outputs_parse_upstream(path) -> None:
    upstream_tool("mlir-opt")
    outputs = [
        (f"{path.name} RUN {k}", emit_upstream(args)) for k, args in enumerate(lit_commands(path))
    ]
    check_parses(outputs)


TESSC_CUSTOM_OP = re.compile(r"^\s*(%[^=\n]*=\s*)?(tess|kernel|micro)\.\w+", re.M)
"""An op of tessc's dialects in its custom form at the start of a line (upstream MLIR
cannot parse those; their generic form, `"tess.add"(...)`, it can)."""


def upstream_inputs() -> list[tuple[str, str]]:
    """(name, text) of the lit inputs of positive tests written in upstream syntax only:
    no op of tessc's dialects in custom form (comments aside)."""
    inputs = []
    for path in LIT_IR_FILES:
        if path.suffix != ".mlir":
            continue
        text = path.read_text()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
        if not TESSC_CUSTOM_OP.search(code):
            inputs.append((str(path.relative_to(LIT_ROOT)), text))
    return inputs


def test_lit_inputs_in_upstream_syntax_parse_upstream() -> None:
    # A test input is IR too: xDSL's parser is laxer than MLIR's in places (a multi-result
    # linalg.generic's result types without parentheses), which a test must not lean on.
    inputs = upstream_inputs()
    assert len(inputs) >= 10
    check_parses(inputs)


# -- programs -----------------------------------------------------------------------------

PROGRAMS = """
def broadcast(x: f32[4, 3], y: f32[3], z: f32[4, 1]) -> f32[4, 3]:
    return (x + y) * z - relu(x)

def scalars(x: f64[2, 3]) -> f64[2, 3]:
    return -x ** 2 * (1 / 4) - 1

def reductions(x: f32[5, 6]) -> (f32[5], f32[6], f32[], f32[5, 1]):
    return sum(x, dim=1), max(x, dim=0), mean(x), x.sum(dim=-1, keepdim=True)

def matmul(a: f32[4, 5], b: f32[5, 3]) -> f32[4, 3]:
    return a @ b

def batched(a: f32[2, 4, 5], b: f32[2, 5, 3]) -> f32[2, 4, 3]:
    return a @ b

def softmax(x: f32[4, 7]) -> f32[4, 7]:
    e = exp(x - unsqueeze(max(x, dim=1), 1))
    return e / unsqueeze(sum(e, dim=1), 1)

def mlp(x: f32[8, 6], w1: f32[6, 5], b1: f32[5], w2: f32[5, 3]) -> f32[8]:
    h = relu(x @ w1 + b1)
    return sum(h @ w2, dim=1)

def shapes(x: f32[2, 3, 4], v: f32[4]) -> (f32[4, 6], f32[4, 2, 3], f32[5, 4]):
    return x.reshape(4, -1), permute(x, [2, 0, 1]), broadcast_to(v, [5, 4])

def compare(x: f32[3], y: f32[2, 1]) -> bool[2, 3]:
    return x < y

def loss(w: f64[3, 2], x: f64[4, 3]) -> f64[]:
    return sum(tanh(x @ w) * tanh(x @ w))

def backward(w: f64[3, 2], x: f64[4, 3]) -> (f64[3, 2], f64[4, 3]):
    return grad(loss, wrt=w)(w, x), grad(loss, wrt=x)(w, x)
"""


def mlp_loss(p: dict, x: np.ndarray, y: np.ndarray) -> object:
    h = ts.relu(x @ p["w1"] + p["b1"])
    d = h @ p["w2"] - y
    return (d * d).sum()


def mlp_step(params: dict, x: np.ndarray, y: np.ndarray) -> tuple:
    """A jitted training step: the MLP's loss, its gradient and an Adam update."""
    grads = ts.grad(mlp_loss)(params, x, y)
    return ts.optim.Adam(lr=0.01).step(params, grads, ts.optim.Adam().init(params))


def jitted_programs() -> list[tuple[str, ModuleOp, str]]:
    """(name, tess module, entry) of jitted Python functions."""
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((6, 5)).astype(np.float32),
        "b1": rng.standard_normal(5).astype(np.float32),
        "w2": rng.standard_normal((5, 3)).astype(np.float32),
    }
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    traced = ts.jit(mlp_step).trace(params, x, y)
    return [("jit_mlp_step", traced.module, traced.entry)]


FUZZ_SEEDS = range(12)
SOURCE_ENTRIES = [n for n in re.findall(r"^def (\w+)", PROGRAMS, re.M) if n != "loss"]
PROGRAM_NAMES = [*SOURCE_ENTRIES, *(f"fuzz{seed}" for seed in FUZZ_SEEDS), "jit_mlp_step"]


@functools.cache
def programs() -> dict[str, tuple[ModuleOp, str]]:
    """The (tess module, entry) of every program checked, by name: the defs of `PROGRAMS`
    (one module), the fuzzer's programs of `FUZZ_SEEDS` and `jitted_programs()`."""
    found: dict[str, tuple[ModuleOp, str]] = {}
    source = parse_tess(PROGRAMS)
    for name in SOURCE_ENTRIES:
        found[name] = (source, name)
    for seed in FUZZ_SEEDS:
        program = generate(random.Random(seed), ops=8)
        found[f"fuzz{seed}"] = (parse_module(program.text()), program.name)
    for name, module, entry in jitted_programs():
        found[name] = (module, entry)
    assert list(found) == PROGRAM_NAMES
    return found


def program_modules() -> list[tuple[str, ModuleOp]]:
    """Each distinct module of `programs()` once, named by its first program."""
    seen: dict[int, tuple[str, ModuleOp]] = {}
    for name, (module, _) in programs().items():
        seen.setdefault(id(module), (name, module))
    return list(seen.values())


STAGES = [("tess", "cpu"), ("fused", "cpu"), ("buffers", "cpu"), ("loops", "cpu"), ("gpu", "cuda")]


def upstream_text(module: ModuleOp) -> str:
    out = io.StringIO()
    print_upstream(module, out)
    return out.getvalue()


@pytest.mark.parametrize(("stage", "pipeline"), STAGES, ids=[s for s, _ in STAGES])
def test_program_stages_parse_upstream(stage: str, pipeline: str) -> None:
    upstream_tool("mlir-opt")
    texts = [
        (f"{name} at {stage}", upstream_text(lower_module(module, stage, pipeline=pipeline)))
        for name, module in program_modules()
    ]
    check_parses(texts)


# -- the differential test ---------------------------------------------------------------


def entry_of(module: ModuleOp, entry: str) -> func.FuncOp:
    return next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == entry)


def as_list(outputs: object) -> list[np.ndarray]:
    return list(outputs) if isinstance(outputs, list | tuple) else [outputs]  # type: ignore[arg-type]


def test_the_differential_covers_enough_programs() -> None:
    assert len(PROGRAM_NAMES) >= 20


@pytest.mark.parametrize("name", PROGRAM_NAMES)
def test_upstream_lowering_runs_like_tessc(name: str) -> None:
    mlir_opt, mlir_runner = upstream_tool("mlir-opt"), upstream_tool("mlir-runner")
    module, entry = programs()[name]
    index = PROGRAM_NAMES.index(name)
    fused = lower_module(module, "fused")
    inline_kernel_groups(fused)
    assert not any(is_tessc_op(op) for op in fused.walk()), f"{name}: tessc ops at fused"
    inputs = random_inputs(entry_of(module, entry), seed=index)
    function = entry_of(fused, entry)
    text = with_entry(upstream_text(fused), entry_function(function, inputs))
    got = parse_printed(run_upstream(mlir_opt, mlir_runner, text), function)
    assert_results_match(got, interpret(module, entry, inputs))
    assert_results_match(got, as_list(compile_module(module, entry)(*inputs)))
