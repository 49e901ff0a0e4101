"""The runtime: the content-hashed source cache, Numba's cache across processes, Executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tessc.runtime import Executable, cache, load_source

# A generated module in miniature: what codegen emits, without compiling any IR.
SOURCE = textwrap.dedent(
    """
    import numpy as np
    from numba import njit

    FASTMATH = {"contract"}

    TESSC_SIGNATURES = {
        "scale": {
            "function": "scale",
            "inputs": [((2, 3), "float32"), ((), "float32")],
            "input_names": ["x", "s"],
            "outputs": [((2, 3), "float32"), ((3,), "float32")],
            "output_names": ["y", "col"],
        },
    }


    @njit(cache=True, fastmath=FASTMATH, error_model="numpy")
    def scale_kernel_0(x, s, y, col):
        for i in range(2):
            for j in range(3):
                y[i, j] = x[i, j] * s[()]
        for j in range(3):
            col[j] = y[0, j] + y[1, j]


    @njit(cache=True, error_model="numpy")
    def scale(x, s, y, col):
        scale_kernel_0(x, s, y, col)
    """
)

# Runs SOURCE in a fresh process and reports what the caches did, as JSON.
CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from tessc.runtime import Executable, cache, load_source
    program = Executable(load_source(sys.stdin.read()), "scale")
    y, col = program(np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(2.0))
    stats = program.compile_stats()
    print(json.dumps({
        "compiled": stats.compiled, "hits": stats.cache_hits,
        "written": cache.STATS.written, "repaired": cache.STATS.repaired,
        "reused": cache.STATS.reused, "y": y.tolist(), "col": col.tolist(),
    }))
    """
)

EXPECTED_Y = [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
EXPECTED_COL = [6.0, 10.0, 14.0]


def run_child(cache_dir: Path, source: str = SOURCE) -> dict:
    env = dict(os.environ, TESSC_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)
    result = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=source,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path: Path) -> None:
    first = run_child(tmp_path)
    assert first["written"] == 1 and first["compiled"] >= 1
    assert first["y"] == EXPECTED_Y and first["col"] == EXPECTED_COL
    second = run_child(tmp_path)
    assert second["reused"] == 1 and second["written"] == second["repaired"] == 0
    assert second["compiled"] == 0 and second["hits"] >= 1
    assert second["y"] == EXPECTED_Y and second["col"] == EXPECTED_COL


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated mid-file
        lambda text: "",  # empty
        lambda text: text.replace("* s[()]", "* s[()] * 2"),  # edited body, header kept
        lambda text: text.split("\n", 1)[1],  # header lost
    ],
    ids=["truncated", "empty", "edited", "no-header"],
)
def test_damaged_cache_file_is_rebuilt(tmp_path: Path, damage) -> None:
    path = cache.store_source(SOURCE, tmp_path)
    path.write_text(damage(path.read_text()))
    report = run_child(tmp_path)
    assert report["repaired"] == 1 and report["written"] == 0
    assert report["y"] == EXPECTED_Y and report["col"] == EXPECTED_COL
    assert cache.verified_body(path, cache.source_hash(SOURCE)) is not None


def test_cache_file_layout(tmp_path: Path) -> None:
    path = cache.store_source(SOURCE, tmp_path)
    digest = cache.source_hash(SOURCE)
    assert path == tmp_path / f"tessc_{digest}.py"
    header, body = path.read_text().split("\n", 1)
    assert header == f"# tessc-sha256: {digest}" and body == SOURCE
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary files left
    before = cache.STATS.reused
    assert cache.store_source(SOURCE, tmp_path) == path
    assert cache.STATS.reused == before + 1


def test_cache_dir_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path / "here"))
    assert cache.default_cache_dir() == tmp_path / "here"
    assert cache.cache_path("x = 1\n").parent == tmp_path / "here"
    monkeypatch.delenv("TESSC_CACHE_DIR")
    assert cache.default_cache_dir() == Path.home() / ".cache" / "tessc"


def test_a_source_loads_once_per_process(tmp_path: Path) -> None:
    source = SOURCE + "\n# variant: loads once\n"
    module = load_source(source, tmp_path)
    assert load_source(source, tmp_path) is module
    assert module.__file__ == str(cache.cache_path(source, tmp_path))
    assert module.__name__ in sys.modules


def test_runtime_imports_no_ir() -> None:
    code = (
        "import sys, tessc.runtime, tessc.runtime.cache, tessc.runtime.executor\n"
        "bad = [m for m in sys.modules if m.startswith(('xdsl', 'tessc.lowering', "
        "'tessc.dialects', 'tessc.compiler'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---------------------------------------------------------------------------------------
# Executable
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def program() -> Executable:
    return Executable(load_source(SOURCE), "scale")


def test_executable_returns_fresh_outputs(program: Executable) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = program(x, np.array(2.0, dtype=np.float32))
    second = program(x, np.array(3.0, dtype=np.float32))
    np.testing.assert_array_equal(first[0], np.array(EXPECTED_Y, dtype=np.float32))
    np.testing.assert_array_equal(second[1], np.array(EXPECTED_COL, dtype=np.float32) * 1.5)
    assert first[0] is not second[0]
    assert [o.dtype for o in first] == [np.float32, np.float32]


def test_executable_makes_inputs_contiguous(program: Executable) -> None:
    x = np.arange(6, dtype=np.float32).reshape(3, 2).T  # (2, 3), Fortran order
    assert not x.flags.c_contiguous
    y, _ = program(x, np.float32(1.0))
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (np.zeros((3, 2), np.float32), np.float32(1)),
            r"'scale' input 0 \('x'\) has shape \(3,2\), expected \(2,3\)",
        ),
        (
            (np.zeros((2, 3), np.float32), np.zeros(1, np.float32)),
            r"'scale' input 1 \('s'\) has shape \(1\), expected \(\)",
        ),
        (
            (np.zeros((2, 3), np.float64), np.float32(1)),
            r"'scale' input 0 \('x'\) has dtype float64, expected float32",
        ),
        ((np.zeros((2, 3), np.float32),), r"'scale' takes 2 inputs, got 1"),
    ],
)
def test_executable_rejects_bad_inputs(program: Executable, args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        program(*args)


def test_executable_needs_a_known_entry() -> None:
    with pytest.raises(ValueError, match="no entry function 'nope'.*scale"):
        Executable(load_source(SOURCE), "nope")


def test_executable_repr(program: Executable) -> None:
    assert repr(program) == (
        "<Executable scale(x: (2,3) float32, s: () float32) -> ((2,3) float32, (3) float32)>"
    )


# A host calling a parallel kernel, as codegen emits it (kernel uncached, host cached).
PARALLEL_SOURCE = textwrap.dedent(
    """
    import numpy as np
    from numba import njit, prange

    TESSC_SIGNATURES = {
        "host": {
            "inputs": [((64, 32), "float64")],
            "outputs": [((64, 32), "float64")],
        },
    }


    @njit(parallel=True, error_model="numpy")
    def host_kernel_0(x, y):
        for i in prange(64):
            for j in range(32):
                y[i, j] = x[i, j] * 2.0 + 1.0


    @njit(cache=True, error_model="numpy")
    def host(x, y):
        host_kernel_0(x, y)
    """
)

# Step "kernel" compiles only the kernel; step "host" runs the program.
PARALLEL_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from tessc.runtime import Executable, load_source
    module = load_source(sys.stdin.read())
    x = np.arange(64 * 32, dtype=np.float64).reshape(64, 32)
    if sys.argv[1] == "kernel":
        module.host_kernel_0(x, np.empty_like(x))
    else:
        (y,) = Executable(module, "host")(x)
        assert np.array_equal(y, x * 2 + 1)
    print(Executable(module, "host").compile_stats().compiled)
    """
)


def test_cached_host_with_a_parallel_kernel_reloads_in_every_order(tmp_path: Path) -> None:
    # With the kernel cached too, a host compiled in a process that loaded the kernel from
    # disk is cached broken and the next process segfaults (Numba 0.68): codegen never
    # caches callees. Each step is a fresh process.
    env = dict(os.environ, TESSC_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    compiled = []
    for step in ("kernel", "host", "host", "kernel", "host"):
        result = subprocess.run(
            [sys.executable, "-c", PARALLEL_CHILD, step],
            input=PARALLEL_SOURCE,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert result.returncode == 0, (step, result.stderr[-2000:])
        compiled.append(int(result.stdout.split()[-1]))
    assert compiled[2] == compiled[4] == 0  # the host came from the disk cache


@pytest.mark.parametrize("size", [100, 1 << 21, (5 << 20) + 64])
def test_workspace_buffer_alignment(size: int) -> None:
    """A workspace is 64-byte aligned; from 2 MiB on it starts on a 2 MiB boundary (where
    `tess-hoist-scratch` puts a kernel's 2 MiB panels at 2 MiB multiples), writable, and
    lives as long as the array: codegen and the runtime agree on the huge page size."""
    from tessc.runtime.abi import HUGE_PAGE
    from tessc.runtime.executor import workspace_buffer

    buffer = workspace_buffer(size)
    assert buffer.nbytes == size and buffer.dtype == np.uint8 and buffer.flags.writeable
    assert buffer.ctypes.data % (HUGE_PAGE if size >= HUGE_PAGE else 64) == 0
    buffer[:] = 7
    view = buffer[size - 8 :]
    del buffer
    assert int(view.sum()) == 56
