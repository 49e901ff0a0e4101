"""Replays every program under tests/regressions/: failures found by the fuzzer
(`python -m tessc.fuzz programs`, shrunk) or reported in issues, each run at every
compiling pipeline against the reference interpreter (and its gradients, when its header
says `grad=yes`, against the reference and float64 central differences)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tessc.fuzz.check import replay

REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.mlir"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path: Path) -> None:
    assert replay(path) is None
