"""tessc's Numba pipeline (`tessc.runtime.numba_pipeline`): which of Numba's passes a
generated function goes through, and that what it compiles still computes the same."""

from __future__ import annotations

import re

import numpy as np
from numba import njit

from tessc.runtime import load_source
from tessc.runtime.numba_pipeline import TesscCompiler, tune

SOURCE = """
import re

import numpy as np
from numba import njit, prange


@njit(cache=True, error_model="numpy")
def serial(x, out):
    for i in range(x.shape[0]):
        out[i] = np.float32(2.0) * x[i] + np.float32(1.0)


@njit(parallel=True, cache=True, error_model="numpy")
def threads(x, out):
    for i in prange(x.shape[0]):
        out[i] = x[i] * x[i]
"""


def passes_run(dispatcher: object) -> set[str]:
    (result,) = dispatcher.overloads.values()  # type: ignore[attr-defined]
    return {name.split("_", 1)[1] for name in result.metadata["pipeline_times"]["nopython"]}


def test_loaded_functions_compile_with_the_tessc_pipeline(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path))
    module = load_source(SOURCE + f"\n# {tmp_path}\n")  # a source of its own: compiled here
    x = np.arange(1000, dtype=np.float32)
    out = np.empty_like(x)
    module.serial(x, out)
    np.testing.assert_array_equal(out, 2 * x + 1)
    module.threads(x, out)
    np.testing.assert_array_equal(out, x * x)
    for function in (module.serial, module.threads):
        assert function._compiler.pipeline_class is TesscCompiler
        ran = passes_run(function)
        # No IR rewrites.
        assert "nopython_rewrites" not in ran and "generic_rewrites" not in ran
    # Closure inlining only where parfors need it.
    assert "inline_closure_likes" not in passes_run(module.serial)
    assert "inline_closure_likes" in passes_run(module.threads)


def test_only_cpu_dispatchers_are_tuned() -> None:
    @njit
    def f(x):
        return x + 1

    assert tune(f) and f._compiler.pipeline_class is TesscCompiler
    assert f(1) == 2
    assert not tune(object())


def test_a_tiled_contraction_is_still_vectorised(tmp_path, monkeypatch) -> None:
    # Skipping Numba's per-function LLVM pass left this loop nest scalar (30x slower):
    # whatever the pipeline drops, the tiled zip+reduce's inner loop stays vector code.
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    import tessc as ts
    from tessc.runtime.cache import _loaded

    f = ts.jit(lambda a, b: (a * b).sum(dim=1))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256, 1)).astype(np.float32)
    b = rng.standard_normal((1, 256, 256)).astype(np.float32)
    np.testing.assert_allclose(f(a, b), (a * b).sum(axis=1), rtol=1e-4, atol=1e-3)
    (module,) = [m for k, m in _loaded.items() if k.startswith(str(tmp_path))]
    kernels = [v for v in vars(module).values() if hasattr(v, "inspect_asm")]
    assembly = "\n".join(text for k in kernels for text in k.inspect_asm().values())
    assert re.search(r"v(fmadd\w*|mul|add)ps\s+%[yz]mm", assembly)


FIRST_CALL = """
import importlib.util, sys
import numpy as np
import tessc as ts

y = ts.jit(lambda x: (x * 2.0 + 1.0).relu())(np.arange(8, dtype=np.float32) - 4)
assert list(y) == [0, 0, 0, 0, 1, 3, 5, 7], y
from numba.np import arraymath, linalg

assert arraymath._HAVE_BLAS == (importlib.util.find_spec("scipy") is not None)
assert arraymath.ensure_blas is linalg.ensure_blas  # Numba's own again
print("scipy.linalg" in sys.modules)
"""


def test_a_first_call_does_not_import_scipy_linalg(tmp_path) -> None:
    # Numba's BLAS probe imports scipy.linalg (~0.15 s) on the first compile of a process;
    # `skip_blas_probe` answers it without the import (a fresh process: the probe runs once).
    import os
    import subprocess
    import sys

    env = dict(
        os.environ, TESSC_CACHE_DIR=str(tmp_path / "kernels"), NUMBA_CACHE_DIR=str(tmp_path / "nb")
    )
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_numba_blas_functions_still_work_after_the_skipped_probe() -> None:
    import importlib.util

    import pytest

    if importlib.util.find_spec("scipy") is None:
        pytest.skip("Numba's BLAS functions need SciPy")
    import tessc.runtime.numba_pipeline  # noqa: F401  (the probe skipped, if it ran first)

    @njit
    def dot(a: np.ndarray, b: np.ndarray) -> float:
        return np.dot(a, b)

    a = np.arange(4.0)
    assert dot(a, a) == 14.0
