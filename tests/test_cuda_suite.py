"""Run tests/cuda (the CUDA target) in Numba's CUDA simulator, in separate pytest processes:
`NUMBA_ENABLE_CUDASIM` only works when set before Numba is imported.

The files are dealt into `SHARDS` processes, one test each, so that `pytest -n auto` runs
them on different workers instead of one simulator run being the suite's longest test."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CUDA_TESTS = Path(__file__).parent / "cuda"
SHARDS = 3


def shard_files(shard: int) -> list[str]:
    """Every `SHARDS`-th file of tests/cuda, from the `shard`-th: each file in exactly one."""
    files = sorted(path.name for path in CUDA_TESTS.glob("test_*.py"))
    return [str(CUDA_TESTS / name) for name in files[shard::SHARDS]]


def test_the_shards_cover_every_file_once() -> None:
    dealt = [name for shard in range(SHARDS) for name in shard_files(shard)]
    assert sorted(dealt) == sorted(str(path) for path in CUDA_TESTS.glob("test_*.py"))


@pytest.mark.parametrize("shard", range(SHARDS))
def test_cuda_suite_in_the_simulator(shard: int) -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("the simulator is on in this process: tests/cuda ran here directly")
    if importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("numba-cuda is not installed (pip install -e '.[cuda]')")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *shard_files(shard)],
        cwd=CUDA_TESTS.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"tests/cuda (shard {shard} of {SHARDS}) failed in the CUDA simulator (exit status "
            f"{result.returncode}):\n{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
        )
