"""Run tests/cuda (the CUDA target) in Numba's CUDA simulator, in a separate pytest process:
`NUMBA_ENABLE_CUDASIM` only works when set before Numba is imported."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CUDA_TESTS = Path(__file__).parent / "cuda"


def test_cuda_suite_in_the_simulator() -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("the simulator is on in this process: tests/cuda ran here directly")
    if importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (pip install -e '.[cuda]')")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CUDA_TESTS)],
        cwd=CUDA_TESTS.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"tests/cuda failed in the CUDA simulator (exit status {result.returncode}):\n"
            f"{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
        )
