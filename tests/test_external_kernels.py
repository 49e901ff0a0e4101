"""Kernels compiled on their own and called by name (`tessc.lowering.codegen.numba_external`,
`tessc.runtime.external`): which kernels codegen picks (the MLP's gradient, in
tests/filecheck/autodiff/mlp-grad-to-numba.mlir, which tests/test_autodiff.py runs against
the reference interpreter), and that such a program computes the reference interpreter's
results cold (compiled here and by the compile worker), warm (a new process loads
everything, compiles nothing), without a worker, with a failing one, and in memory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tessc import timing
from tessc.lowering.codegen import numba_external
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.pipelines import run_passes
from tessc.reference import interpret, parse_module
from tessc.runtime import external
from tessc.runtime.cache import CacheWarning, load_source, numba_compile_stats
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
    """The gradient's source with its kernels called by name as Numba's (those written
    as LLVM IR are tests/test_llvm_kernels.py's)."""
    module = gradient_module()
    run_passes(module, TO_LOOPS)
    return emit_numba(module, **{"llvm_kernels": False, **codegen})  # type: ignore[arg-type]


def kernel_count(source: str) -> int:
    return source.count("\ndef loss_grad_kernel_")


def test_a_host_of_many_kernels_calls_them_by_name() -> None:
    source = gradient_source()
    kernels = kernel_count(source)
    assert kernels > 2 and source.count("@external(") == kernels
    host = source[source.index("def loss_grad(") : source.index("@external(")]
    assert "for " not in host and "loss_grad_kernel_0(" in host and ".ctypes.data" in host
    # The forward function's few small kernels stay in its body.
    assert "    # loss_kernel_0\n" in source and "def loss_kernel_0(" not in source
    assert "@external(" not in gradient_source(external_kernels=False)


def test_below_the_threshold_kernels_stay_in_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 10**6)
    source = gradient_source()
    assert "@external(" not in source and "    # loss_grad_kernel_0\n" in source


SMALL = """
func.func @f(%x: tensor<16x8xf32>, %b: tensor<8xf32>) -> (tensor<16x8xf32>, tensor<16xf32>) {
  %0 = tess.add %x, %b : tensor<16x8xf32>, tensor<8xf32> -> tensor<16x8xf32>
  %1 = tess.relu %0 : tensor<16x8xf32>
  %2 = tess.exp %1 : tensor<16x8xf32>
  %3 = tess.sum %2 dims = [1] : tensor<16x8xf32> -> tensor<16xf32>
  func.return %1, %3 : tensor<16x8xf32>, tensor<16xf32>
}
"""
UNFUSED = "tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse"


def small_source(**codegen: object) -> str:
    """SMALL, one kernel per op (5 with the sum's fill: too small to go by name by
    default)."""
    module = parse_module(SMALL)
    run_passes(module, UNFUSED)
    return emit_numba(module, **{"llvm_kernels": False, **codegen})  # type: ignore[arg-type]


def check_small(module: object) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    expected = interpret(parse_module(SMALL), "f", [x, b])
    actual = Executable(module, "f")(x, b)  # type: ignore[arg-type]
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.fixture
def by_name(monkeypatch: pytest.MonkeyPatch) -> str:
    """SMALL's source with every kernel called by name, and the worker asked whatever
    there is to compile."""
    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 0)
    monkeypatch.setattr(external, "WORKER_MIN_LINES", 0)
    source = small_source()
    assert source.count("@external(") == 5
    return source


WARM_CHILD = textwrap.dedent(
    """
    import json, sys
    from tessc.runtime import external, llvm_kernels
    from tessc.runtime.cache import load_source, numba_compile_stats
    from tests.test_external_kernels import check_small
    module = load_source(sys.stdin.read(), sys.argv[1])
    check_small(module)
    stats = numba_compile_stats(module)
    report = {"compiled": stats.compiled, "hits": stats.cache_hits}
    report["llvm compiled"] = llvm_kernels.STATS.compiled
    print(json.dumps({**report, "workers": external.STATS.started}))
    """
)


def test_cold_kernels_compile_here_and_in_the_worker_then_load_warm_and_verified(
    tmp_path: Path, by_name: str
) -> None:
    external.start_worker(ready=True)  # it takes kernels once ready: the first may be done
    by_worker = external.STATS.compiled
    report = io.StringIO()
    with timing.reporting("load", report, numba_events=True):
        module = load_source(by_name, tmp_path)
    check_small(module)
    stats = numba_compile_stats(module)
    assert stats.compiled + stats.cache_hits == 6  # the kernels and the host
    if external.workers_allowed():
        assert external.STATS.compiled > by_worker  # then loaded here from the disk cache
        assert stats.cache_hits == external.STATS.compiled - by_worker
        # The timing report lists the worker's kernels with the worker's time.
        lines = [line for line in report.getvalue().splitlines() if "(compile worker)" in line]
        assert len(lines) == external.STATS.compiled - by_worker
        assert all(float(line.split()[1]) > 0 for line in lines)  # wall seconds
    # A warm start compiles nothing and starts no worker.
    assert warm_child(tmp_path, by_name) == {
        "compiled": 0,
        "hits": 6,
        "workers": 0,
        "llvm compiled": 0,
    }
    # A flipped bit in one kernel's machine code: discarded and compiled again, never run.
    sums = json.loads(next(tmp_path.glob("*.sums")).read_text())["files"]
    code = next(Path(f) for f in sums if "f_kernel_1" in f and f.endswith(".nbc"))
    data = bytearray(code.read_bytes())
    data[len(data) // 2] ^= 0x10
    code.write_bytes(bytes(data))
    assert warm_child(tmp_path, by_name) == {
        "compiled": 1,
        "hits": 5,
        "workers": 0,
        "llvm compiled": 0,
    }


def test_llvm_kernels_compile_here_while_the_worker_compiles_their_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 0)
    source = small_source(llvm_kernels=True)
    assert source.count("llvm_kernel(__name__") == 5 and "@external(" not in source
    external.start_worker(ready=True)
    by_worker = external.STATS.compiled
    report = io.StringIO()
    with timing.reporting("load", report, numba_events=True):
        module = load_source(source, tmp_path)
        check_small(module)
    stats = numba_compile_stats(module)
    assert "llvm compile 5 LLVM kernels" in report.getvalue()
    if external.workers_allowed():
        assert external.STATS.compiled == by_worker + 1  # the host, loaded here
        assert (stats.compiled, stats.cache_hits) == (0, 1)
        assert "numba compile host:f (compile worker)" in report.getvalue()
    # A warm start compiles nothing: the kernels' machine code and the host are on disk.
    warm = {"compiled": 0, "hits": 1, "workers": 0, "llvm compiled": 0}
    assert warm_child(tmp_path, source) == warm


def warm_child(cache_dir: Path, source: str) -> dict:
    """WARM_CHILD's report: a new process loading `source` from `cache_dir`."""
    from numba.core import config

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if config.CACHE_DIR:
        env["NUMBA_CACHE_DIR"] = config.CACHE_DIR
    warm = subprocess.run(
        [sys.executable, "-c", WARM_CHILD, str(cache_dir)],
        input=source,
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        check=True,
    )
    return json.loads(warm.stdout)


def test_without_a_worker_all_compile_here(
    tmp_path: Path, by_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(external.WORKERS_VARIABLE, "0")
    by_worker = external.STATS.compiled
    module = load_source(by_name, tmp_path)
    check_small(module)
    assert external.STATS.compiled == by_worker
    assert numba_compile_stats(module).compiled == 6


def test_a_failing_worker_leaves_its_kernels_to_this_process(
    tmp_path: Path, by_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not external.workers_allowed():
        pytest.skip("one CPU: no compile worker")
    external.stop_worker()
    monkeypatch.setattr(external, "_WORKER_COMMAND", "import sys; sys.exit(3)")
    by_worker = external.STATS.compiled
    try:
        module = load_source(by_name, tmp_path)
    finally:
        external.stop_worker()  # the next test starts a working one
    check_small(module)
    assert external.STATS.compiled == by_worker
    assert numba_compile_stats(module).compiled == 6


FORKED_CHILD = textwrap.dedent(
    """
    import json, os, select, sys
    from tessc.runtime import external
    from tessc.runtime.cache import load_source
    from tests.test_external_kernels import check_small
    theirs, ours = os.pipe()  # a pipe of another child of this process, say
    external.start_worker(ready=True)  # one thread: forked
    os.close(ours)  # the worker holds no copy of it: end-of-file
    at_end = bool(select.select([theirs], [], [], 10)[0]) and os.read(theirs, 1) == b""
    module = load_source(sys.stdin.read(), sys.argv[1])
    check_small(module)
    stats = external.STATS
    external.stop_worker()
    print(json.dumps({"forked": stats.forked, "started": stats.started, "sent": stats.sent,
                      "compiled": stats.compiled, "failed": stats.failed, "eof": at_end}))
    """
)


def test_a_worker_forked_from_a_one_thread_process_compiles_kernels(
    tmp_path: Path, by_name: str
) -> None:
    if not external.workers_allowed() or not sys.platform.startswith("linux"):
        pytest.skip("forked only on Linux, with two CPUs")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(sys.path),
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
    )
    # The fixture's settings (every kernel called by name, the worker always asked) are
    # this process's: the child gets the source they made, and asks the worker for any.
    code = FORKED_CHILD.replace(
        "external.start_worker", "external.WORKER_MIN_LINES = 0; external.start_worker"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "kernels")],
        input=by_name,
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["forked"] == report["started"] == 1
    assert report["sent"] >= 1 and report["compiled"] == report["sent"] and not report["failed"]
    assert report["eof"]  # the worker closed the file descriptors it inherited


def test_a_worker_still_starting_is_handed_no_kernel(
    tmp_path: Path, by_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker takes kernels once it answers `ready`: one still importing Numba would hold
    # the largest kernel while this process, idle, waited for it.
    if not external.workers_allowed():
        pytest.skip("one CPU: no compile worker")
    external.stop_worker()
    monkeypatch.setattr(external, "_WORKER_COMMAND", "import sys; sys.stdin.read()")
    monkeypatch.setattr(external, "WORKER_TIMEOUT", 20.0)
    sent, by_worker = external.STATS.sent, external.STATS.compiled
    try:
        module = load_source(by_name, tmp_path)
    finally:
        external.stop_worker()
    check_small(module)
    assert external.STATS.sent == sent and external.STATS.compiled == by_worker
    assert numba_compile_stats(module).compiled == 6


def test_an_unusable_cache_directory_compiles_them_in_memory(tmp_path: Path, by_name: str) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    with pytest.warns(CacheWarning):
        module = load_source(by_name, not_a_directory)
    check_small(module)
    assert numba_compile_stats(module).compiled == 6


def test_small_kernels_compile_at_o2_and_leave_numbas_level(by_name: str) -> None:
    """A kernel under `SMALL_KERNEL_LINES` is optimised at -O2 (Numba reads `config.OPT`
    while it compiles), a large one at Numba's level; `config.OPT` is restored."""
    from numba.core import config

    module = load_source(by_name, None)
    kernels = external.module_kernels(module)
    assert kernels and all(k.optimization_level() == 2 for k in kernels)
    seen: list[int] = []

    class Recorder:
        def compile(self) -> None:
            seen.append(int(config.OPT))

    before = config.OPT
    kernels[0].build(Recorder())  # type: ignore[arg-type]
    assert seen == [min(2, int(before))] and config.OPT is before
    large = external.ExternalKernel(kernels[0].py_func, kernels[0].signature, {})
    large.cost = lambda: external.SMALL_KERNEL_LINES  # type: ignore[method-assign]
    assert large.optimization_level() is None
    large.build(Recorder())  # type: ignore[arg-type]
    assert seen[-1] == int(before)
