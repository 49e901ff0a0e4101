"""Timing reports: `tessc-opt --timing` and `TESSC_TIMING=1` name every phase and pass."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tessc as ts
from tessc import timing
from tessc.cli.opt import main
from tessc.pipelines import get_pipeline

PROGRAM = """\
func.func @f(%a: tensor<3x1xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %c = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %d = tess.exp %c : tensor<3x4xf32>
  func.return %d : tensor<3x4xf32>
}
"""


def _names(report: str) -> list[str]:
    """The phase names of a printed report, in order, with their indentation depth."""
    rows = re.findall(r"^\s+\d+\.\d+\s+\d+\.\d+ \(\s*[\d.]+%\)  (\s*)(.+)$", report, re.MULTILINE)
    return [f"{len(indent) // 2}:{name}" for indent, name in rows]


def test_phases_nest_and_repeats_add_up() -> None:
    report = timing.TimingReport("t")
    with report.phase("a"):
        with report.phase("b"):
            pass
        with report.phase("b"):
            pass
    report.add("c", 1.5)
    text = report.format()
    assert _names(text) == ["0:a", "1:b", "0:c", "0:Total"]
    assert "Execution time report" not in text and "... t ..." in text


def test_phase_is_free_without_a_report() -> None:
    assert timing.active() is None
    with timing.phase("nothing"):
        pass


def test_tessc_opt_timing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "f.mlir"
    source.write_text(PROGRAM)
    spec = get_pipeline("cpu").passes_to("loops")
    assert main([str(source), "-p", spec, "-t", "numba", "--timing"]) == 0
    out, err = capsys.readouterr()
    assert "@njit" in out and "Wall Time" not in out  # the report goes to stderr only
    names = _names(err)
    assert names[:3] == ["0:tessc-opt", "1:parse", "1:passes"]
    for name in spec.split(","):
        assert f"2:{name.split('{')[0]}" in names
    assert "1:output" in names and names[-1] == "0:Total"


def test_jit_timing_names_passes_codegen_and_numba(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path))  # cold: everything runs
    monkeypatch.setenv("TESSC_TIMING", "1")

    @ts.jit
    def timed(a, b):
        return (a + b).exp()

    a, b = np.ones((3, 1), np.float32), np.ones(4, np.float32)
    timed(a, b)
    names = _names(capsys.readouterr().err)
    assert names[0].startswith("0:jit ") and names[-1] == "0:Total"
    for phase in ("trace", "warm-start lookup", "passes", "codegen", "load module"):
        assert f"1:{phase}" in names
    assert "2:tess-fuse" in names and "2:cse" in names
    # The host compiled by Numba, its kernel nested in it (Numba compiles callees inside).
    assert "2:numba compile timed" in names
    timed(a, b)  # the steady state prints nothing
    assert capsys.readouterr().err == ""
