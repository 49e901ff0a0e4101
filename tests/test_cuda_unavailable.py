"""Without a GPU (and without the simulator) the cuda target is a clear error naming the
remedy, not a Numba driver traceback. This machine has no GPU; on one that has, skip."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import tessc as ts
from tessc.cli.run import main as tessc_run


def _no_gpu() -> bool:
    if importlib.util.find_spec("numba_cuda") is None:
        return False
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    from numba import cuda

    return not cuda.is_available()


pytestmark = pytest.mark.skipif(not _no_gpu(), reason="needs numba-cuda, no GPU, no simulator")


def test_jit_cuda_without_a_gpu_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="no CUDA GPU .* NUMBA_ENABLE_CUDASIM=1"):
        ts.jit(lambda x: x + 1.0, target="cuda")(np.ones(3, np.float32))


def test_tessc_run_cuda_without_a_gpu_is_one_diagnostic(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.tess"
    program.write_text("def f(x: f32[3]) -> f32[3]:\n    return exp(x)\n")
    assert tessc_run([str(program), "--pipeline", "cuda"]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "no CUDA GPU" in err and "Traceback" not in err
