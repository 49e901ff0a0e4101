"""`bench/gpu_check.py`'s dry run (`SIMULATE=1`): the script a lent GPU runs must not rot
between loans. A few of its steps run here at toy sizes in Numba's CUDA simulator; the
whole dry run (`SIMULATE=1 python bench/gpu_check.py`) is recorded in the README."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="needs numba-cuda")
def test_the_dry_run_writes_one_summary_and_every_step_holds(tmp_path: Path) -> None:
    env = dict(os.environ, SIMULATE="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)  # the script sets it for its own children
    steps = ["probe", "repeat", "foreign"]
    result = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--out", str(tmp_path), "--only", *steps],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads((tmp_path / "gpu-check.json").read_text())
    assert summary["simulated"] and list(summary["steps"]) == steps
    assert result.returncode == 0, (tmp_path / "gpu-check.md").read_text()
    assert summary["steps"]["repeat"]["bitwise_same_over_5_runs"]
    assert "simulator" in (tmp_path / "gpu-check.md").read_text()
