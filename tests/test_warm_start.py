"""The warm-start index: a program compiled once skips the compiler afterwards, and any
change to the compiler's sources (or the program, pipeline, options) misses it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tessc.compiler as compiler
from tessc import program_key
from tessc.passes import TESS_PASSES
from tessc.reference import parse_module
from tessc.runtime import program_cache

PROGRAM = """
func.func @f(%x: tensor<4x3xf32>, %y: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = tess.add %x, %y : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %1 = tess.relu %0 : tensor<4x3xf32>
  func.return %1 : tensor<4x3xf32>
}
"""


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def codegen_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every run of the passes + codegen (`compiler.numba_source`)."""
    calls: list[str] = []
    original = compiler.numba_source

    def counting(module, **kwargs):
        calls.append(kwargs.get("pipeline", "cpu"))
        return original(module, **kwargs)

    monkeypatch.setattr(compiler, "numba_source", counting)
    return calls


def _args() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3), np.float32), rng.standard_normal(3, np.float32)


def _expected(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(x + y, 0)


def test_a_warm_hit_runs_no_pass(cache_dir: Path, codegen_calls: list[str]) -> None:
    module = parse_module(PROGRAM)
    x, y = _args()
    hits = program_cache.STATS.hits
    (first,) = compiler.compile_module(module, "f")(x, y)
    assert codegen_calls == ["cpu"] and program_cache.STATS.hits == hits
    assert len(list((cache_dir / program_cache.INDEX_DIR).iterdir())) == 1

    (second,) = compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    assert codegen_calls == ["cpu"], "the warm start ran the passes again"
    assert program_cache.STATS.hits == hits + 1
    np.testing.assert_allclose(first, _expected(x, y), rtol=1e-6)
    np.testing.assert_array_equal(first, second)


def test_the_key_covers_program_pipeline_and_options(
    cache_dir: Path, codegen_calls: list[str]
) -> None:
    x, y = _args()
    compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    compiler.compile_module(parse_module(PROGRAM), "f", "cpu-unfused")(x, y)
    compiler.compile_module(parse_module(PROGRAM), "f", parallel_threshold=1)(x, y)
    other = PROGRAM.replace("tess.relu", "tess.exp")
    (out,) = compiler.compile_module(parse_module(other), "f")(x, y)
    assert codegen_calls == ["cpu", "cpu-unfused", "cpu", "cpu"]
    np.testing.assert_allclose(out, np.exp(x + y), rtol=1e-6)
    # Options given in another order are the same key.
    assert program_key.program_key("m", "cpu", "p", {"a": 1, "b": (2,)}) == (
        program_key.program_key("m", "cpu", "p", {"b": (2,), "a": 1})
    )


def test_a_changed_compiler_misses(
    cache_dir: Path, codegen_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = _args()
    compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    monkeypatch.setattr(program_key, "toolchain_stamp", lambda: "another compiler")
    compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    assert codegen_calls == ["cpu", "cpu"]


def test_every_pass_source_is_in_the_stamp() -> None:
    files = set(program_key.source_files(program_key.package_roots()))
    for name, target in TESS_PASSES.items():
        module_name = target.split(":")[0]
        spec = importlib.util.find_spec(module_name)
        if spec is None:  # registered by a branch whose module has not landed yet
            continue
        assert spec.origin is not None and Path(spec.origin).resolve() in files, name
    names = {f.name for f in files}
    assert {"to_numba.py", "numba_ops.py", "pipelines.py", "tess.py", "executor.py"} <= names


def test_editing_a_pass_changes_the_fingerprint(tmp_path: Path) -> None:
    roots = program_key.package_roots(["tessc.lowering"])
    copy = tmp_path / "lowering"
    shutil.copytree(roots[0], copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = program_key.sources_fingerprint([copy])
    assert before == program_key.sources_fingerprint(roots)
    with open(copy / "fuse.py", "a", encoding="utf-8") as handle:
        handle.write("\n# an edit\n")
    assert program_key.sources_fingerprint([copy]) != before
    (copy / "fuse.py").rename(copy / "fuse2.py")  # a renamed file is a change too
    assert program_key.sources_fingerprint([copy]) not in (before,)


def test_a_broken_entry_is_a_miss(cache_dir: Path, codegen_calls: list[str]) -> None:
    x, y = _args()
    compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    (entry,) = (cache_dir / program_cache.INDEX_DIR).iterdir()
    digest = entry.read_text().strip()
    kernel_file = cache_dir / f"tessc_{digest}.py"
    kernel_file.write_text(kernel_file.read_text() + "\n# tampered\n")
    assert program_cache.lookup(entry.name) is None
    entry.write_text("not a digest\n")
    assert program_cache.lookup(entry.name) is None
    kernel_file.unlink()
    (out,) = compiler.compile_module(parse_module(PROGRAM), "f")(x, y)
    assert len(codegen_calls) == 2
    np.testing.assert_allclose(out, _expected(x, y), rtol=1e-6)
    assert program_cache.lookup(entry.name) is not None  # recorded again


def test_a_fresh_process_loads_without_importing_a_pass(tmp_path: Path) -> None:
    """The warm first call of `jit` in a new process: tracing and loading only."""
    child = textwrap.dedent(
        """
        import sys
        import numpy as np
        import tessc as ts

        @ts.jit
        def f(x, y):
            return (x * y + 1.0).relu().sum(dim=0)

        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        out = f(x, np.ones(3, np.float32))
        assert np.allclose(out, np.maximum(x + 1, 0).sum(0)), out
        print(sorted(m for m in sys.modules if m.startswith("tessc.lowering")))
        """
    )
    env = dict(os.environ, TESSC_CACHE_DIR=str(tmp_path))

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert "tessc.lowering.fusion.fuse" in run()  # cold: the passes ran
    assert run() == "[]"  # warm: no pass (nor codegen) was even imported
