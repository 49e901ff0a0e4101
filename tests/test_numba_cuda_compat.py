"""The NumPy >= 2.5 trap (issue 25): numba-cuda 0.30's CUDA target reads `np.row_stack`,
which NumPy 2.5 removed. Each case runs in a fresh interpreter with the alias deleted, as
NumPy 2.5 ships it, so that the import order is the one a user gets."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from tessc.runtime import numba_cuda_compat

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda is not installed"
)

IMPORT_THE_CUDA_LOWERING = """
    import numpy as np
    del np.row_stack  # NumPy 2.5
    {before}
    from numba import cuda
    from numba.cuda.np import arrayobj  # what numba-cuda's first kernel compile loads
    print("loaded")
"""


def run(before: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(IMPORT_THE_CUDA_LOWERING).format(before=before)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")  # require_cuda() needs a GPU or this
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_the_trap_is_real_without_the_shim() -> None:
    if numba_cuda_compat.numba_cuda_version() > numba_cuda_compat.LAST_AFFECTED:
        pytest.skip("this numba-cuda is newer than the releases known to need np.row_stack")
    result = run("")
    assert result.returncode != 0 and "row_stack" in result.stderr


def test_the_cuda_runtime_restores_the_alias_before_numba_cuda_loads() -> None:
    result = run("from tessc.runtime.cuda import require_cuda; require_cuda()")
    assert result.returncode == 0 and "loaded" in result.stdout, result.stderr


def test_nothing_is_patched_where_numpy_still_has_row_stack() -> None:
    assert numba_cuda_compat.numpy_has_row_stack()
    assert not numba_cuda_compat.restore_numpy_row_stack()
