"""
The lit part of the corpus `tests/test_upstream_mlir.py` hands to upstream `mlir-opt`:
what `tessc-opt ... --emit-upstream` prints for each RUN line of the lit tests (the first
command of its pipe, run in-process). The test adds its programs at every IR stage.

A RUN line is left out by rule, not by name: a negative test (`not tessc-opt`,
`--verify-diagnostics`, `--parsing-diagnostics`) prints diagnostics, and a target other
than `mlir` (`-t numba`) prints Python source; neither is IR.
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

from tessc.cli.opt import main as tessc_opt

ROOT = Path(__file__).resolve().parents[2]
LIT_ROOT = ROOT / "tests" / "filecheck"

NOT_IR_FLAGS = ("--verify-diagnostics", "--parsing-diagnostics", "-t", "--target")


def lit_commands(path: Path) -> list[list[str]]:
    """The `tessc-opt` arguments of each RUN line of `path` that prints IR (the first
    command of the line's pipe; `%s` replaced by the path)."""
    commands = []
    for line in path.read_text().splitlines():
        _, marker, run = line.partition("RUN:")
        if not marker:
            continue
        words = shlex.split(run.split("|")[0].replace("2>&1", ""))
        if not words or words[0] != "tessc-opt":  # `not tessc-opt`, tessc-run, python
            continue
        words = [w for w in words[1:] if not w.startswith(">")]
        if any(w in NOT_IR_FLAGS or w.startswith(("--target=", "-t=")) for w in words):
            continue
        commands.append([str(path) if w == "%s" else w for w in words])
    return commands


def emit_upstream(args: list[str]) -> str:
    """What `tessc-opt ARGS --emit-upstream` prints; an error if it fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = tessc_opt([*args, "--emit-upstream"])
    if status != 0:
        raise AssertionError(f"tessc-opt {shlex.join(args)} failed:\n{err.getvalue()}")
    return out.getvalue()


def lit_stage_outputs() -> list[tuple[str, str]]:
    """(name, upstream text) of every IR-printing RUN line of the lit corpus."""
    outputs = []
    files = sorted(LIT_ROOT.glob("**/*.mlir")) + sorted(LIT_ROOT.glob("**/*.tess"))
    for path in files:
        for k, args in enumerate(lit_commands(path)):
            name = f"{path.relative_to(LIT_ROOT)}:RUN{k}"
            outputs.append((name, emit_upstream(args)))
    return outputs
