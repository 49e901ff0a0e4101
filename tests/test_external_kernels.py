"""Kernels compiled on their own and called by name (`tessc.lowering.numba_external`,
`tessc.runtime.external`): which kernels codegen picks, and that such a program computes the
reference interpreter's results cold (compiled here and by the compile worker), warm (a new
process loads everything, compiles nothing), without a worker, and with a failing one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tessc.lowering import numba_external
from tessc.lowering.to_numba import emit_numba
from tessc.pipelines import run_passes
from tessc.reference import interpret, parse_module
from tessc.runtime import external
from tessc.runtime.cache import load_source, numba_compile_stats
from tessc.runtime.executor import Executable

MLP = Path(__file__).parent / "filecheck" / "autodiff" / "mlp-grad-to-numba.mlir"
AUTODIFF = "tess-autodiff{func=loss wrt=1,2,3,4}"
TO_LOOPS = (
    "tess-to-linalg,tess-fuse,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,"
    "canonicalize,cse"
)


def gradient_module():
    module = parse_module(MLP.read_text())
    run_passes(module, AUTODIFF)
    return module


def gradient_source(**codegen: object) -> str:
    module = gradient_module()
    run_passes(module, TO_LOOPS)
    return emit_numba(module, **codegen)  # type: ignore[arg-type]


def inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    shapes = [(8, 4), (4, 16), (16,), (16, 3), (3,)]
    args = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    labels = np.zeros((8, 3), np.float32)
    labels[np.arange(8), rng.integers(0, 3, 8)] = 1
    return [*args, labels]


def check_gradient(module: object) -> None:
    args = inputs()
    expected = interpret(gradient_module(), "loss_grad", args)
    actual = Executable(module, "loss_grad")(*args)  # type: ignore[arg-type]
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def kernel_count(source: str) -> int:
    return source.count("\ndef loss_grad_kernel_")


def test_a_host_of_many_kernels_calls_them_by_name() -> None:
    source = gradient_source()
    kernels = kernel_count(source)
    assert kernels > 2 and source.count("@external(") == kernels
    host = source[source.index("def loss_grad(") : source.index("@external(")]
    assert "for " not in host and "loss_grad_kernel_0(" in host and ".ctypes" in host
    # The forward function's few small kernels stay in its body.
    assert "    # loss_kernel_0\n" in source and "def loss_kernel_0(" not in source
    assert "@external(" not in gradient_source(external_kernels=False)


def test_below_the_threshold_kernels_stay_in_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 10**6)
    source = gradient_source()
    assert "@external(" not in source and "    # loss_grad_kernel_0\n" in source


WARM_CHILD = textwrap.dedent(
    """
    import json, sys
    from tessc.runtime.cache import load_source, numba_compile_stats
    module = load_source(sys.stdin.read(), sys.argv[1])
    from tests.test_external_kernels import check_gradient
    check_gradient(module)
    stats = numba_compile_stats(module)
    print(json.dumps({"compiled": stats.compiled, "hits": stats.cache_hits}))
    """
)


def test_cold_kernels_compile_here_and_in_the_worker_then_load_warm(tmp_path: Path) -> None:
    source = gradient_source()
    by_worker = external.STATS.compiled
    module = load_source(source, tmp_path)
    check_gradient(module)
    stats = numba_compile_stats(module)
    functions = kernel_count(source) + 1  # and the host called
    assert stats.compiled + stats.cache_hits == functions
    if external.workers_allowed():
        assert external.STATS.compiled > by_worker  # loaded here from the disk cache
        assert stats.cache_hits == external.STATS.compiled - by_worker
    from numba.core import config

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if config.CACHE_DIR:
        env["NUMBA_CACHE_DIR"] = config.CACHE_DIR
    warm = subprocess.run(
        [sys.executable, "-c", WARM_CHILD, str(tmp_path)],
        input=source,
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        check=True,
    )
    assert json.loads(warm.stdout) == {"compiled": 0, "hits": functions}


def test_without_a_worker_all_compile_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(external.WORKERS_VARIABLE, "0")
    source = gradient_source(fastmath=["contract"])  # a module no other test loads
    by_worker = external.STATS.compiled
    module = load_source(source, tmp_path)
    check_gradient(module)
    assert external.STATS.compiled == by_worker
    assert numba_compile_stats(module).compiled == kernel_count(source) + 1


def test_a_failing_worker_leaves_its_kernels_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not external.workers_allowed():
        pytest.skip("one CPU: no compile worker")
    external.stop_worker()
    monkeypatch.setattr(external, "_WORKER_COMMAND", "import sys; sys.exit(3)")
    source = gradient_source(fastmath=["nsz"])
    by_worker = external.STATS.compiled
    try:
        module = load_source(source, tmp_path)
    finally:
        external.stop_worker()  # the next test starts a working one
    check_gradient(module)
    assert external.STATS.compiled == by_worker
    assert numba_compile_stats(module).compiled == kernel_count(source) + 1
