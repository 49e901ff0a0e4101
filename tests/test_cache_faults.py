"""Kernel cache faults: corrupted Numba files recompile, unusable directories compile in
memory with one warning, a populated read-only cache is still used (issue 10, items 1, 5).

Every case runs in a fresh process, as a user's next run would."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.test_runtime import EXPECTED_COL, EXPECTED_Y, SOURCE

# Like test_runtime's child, and also reports the warnings and the discarded entries.
CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np
    from tessc.runtime import Executable, cache, load_source
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = Executable(load_source(sys.stdin.read()), "scale")
        y, col = program(np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(2.0))
    stats = program.compile_stats()
    print(json.dumps({
        "compiled": stats.compiled, "hits": stats.cache_hits,
        "written": cache.STATS.written, "reused": cache.STATS.reused,
        "discarded": cache.STATS.discarded, "in_memory": cache.STATS.in_memory,
        "warnings": [str(w.message) for w in caught], "y": y.tolist(), "col": col.tolist(),
    }))
    """
)


def run_child(
    cache_dir: Path, numba_dir: Path | None = None, read_only: Sequence[Path] = ()
) -> dict:
    """CHILD's report, run with `read_only` directories mounted read-only (as root, who
    may write anywhere, in a private mount namespace) or made read-only by mode."""
    env = dict(os.environ, TESSC_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)
    if numba_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_dir)
    command = [sys.executable, "-c", CHILD]
    if read_only and os.geteuid() == 0:
        mounts = " && ".join(
            f"mount --bind {d} {d} && mount -o remount,bind,ro {d} {d}" for d in read_only
        )
        command = ["unshare", "-rm", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]
        if shutil.which("unshare") is None:
            pytest.skip("no unshare to mount a read-only directory as root")
    modes = {p: p.stat().st_mode for d in read_only for p in [d, *d.rglob("*")] if p.is_dir()}
    if os.geteuid() != 0:
        for path in modes:
            path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        result = subprocess.run(
            command,
            input=SOURCE,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    if "unshare" in command and "mount" in result.stderr:
        pytest.skip(f"cannot mount read-only: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["y"] == EXPECTED_Y and report["col"] == EXPECTED_COL
    return report


def numba_files(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / "__pycache__").iterdir() if p.suffix in (".nbi", ".nbc"))


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Path, bytes]]:
    """A cache directory after one run, and the bytes of every file in it."""
    directory = tmp_path_factory.mktemp("cache")
    first = run_child(directory)
    assert first["written"] == 1 and first["compiled"] >= 1 and not first["warnings"]
    files = {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    assert any(p.suffix == ".sums" for p in files)
    assert {p.suffix for p in numba_files(directory)} == {".nbi", ".nbc"}
    return directory, files


def restore(directory: Path, files: dict[Path, bytes]) -> None:
    for path in numba_files(directory):
        if path not in files:
            path.unlink()
    for path, data in files.items():
        path.write_bytes(data)


def test_an_intact_cache_compiles_nothing(populated) -> None:
    directory, files = populated
    restore(directory, files)
    report = run_child(directory)
    assert report["compiled"] == 0 and report["hits"] >= 1 and report["discarded"] == 0


@pytest.mark.parametrize("suffix", [".nbc", ".nbi"])
@pytest.mark.parametrize("where", [0.1, 0.6])
def test_a_flipped_bit_recompiles(populated, suffix: str, where: float) -> None:
    directory, files = populated
    restore(directory, files)
    for path in numba_files(directory):
        if path.suffix == suffix:
            data = bytearray(path.read_bytes())
            data[int(len(data) * where)] ^= 0x10
            path.write_bytes(bytes(data))
    report = run_child(directory)
    assert report["discarded"] >= 1 and report["compiled"] >= 1
    # The recompiled files are indexed again: the next run loads them.
    again = run_child(directory)
    assert again["compiled"] == 0 and again["discarded"] == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: [p.write_bytes(p.read_bytes()[:10]) for p in numba_files(d)],
        lambda d: [p.unlink() for p in d.glob("*.sums")],
        lambda d: [p.write_text("{not json") for p in d.glob("*.sums")],
    ],
    ids=["truncated", "index-lost", "index-corrupt"],
)
def test_unverifiable_numba_files_recompile(populated, damage) -> None:
    directory, files = populated
    restore(directory, files)
    damage(directory)
    report = run_child(directory)
    assert report["discarded"] >= 1 and report["compiled"] >= 1


def test_a_directory_in_place_of_a_numba_file(tmp_path: Path) -> None:
    run_child(tmp_path)
    nbi = next(p for p in numba_files(tmp_path) if p.suffix == ".nbi")
    nbi.unlink()
    nbi.mkdir()
    report = run_child(tmp_path)
    assert report["compiled"] >= 1 and report["discarded"] >= 1


def warned_once(report: dict, directory: Path) -> None:
    assert len(report["warnings"]) == 1, report["warnings"]
    assert str(directory) in report["warnings"][0]


def test_a_file_where_the_directory_should_be(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    report = run_child(blocker)
    assert report["in_memory"] == 1 and report["compiled"] >= 1
    warned_once(report, blocker)


def test_a_directory_where_the_source_file_should_be(tmp_path: Path) -> None:
    from tessc.runtime import cache

    cache.cache_path(SOURCE, tmp_path).mkdir(parents=True)
    report = run_child(tmp_path)
    assert report["in_memory"] == 1
    warned_once(report, tmp_path)


def test_an_unwritable_directory_compiles_in_memory(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    report = run_child(directory, read_only=[directory])
    assert report["in_memory"] == 1
    warned_once(report, directory)


def test_a_populated_read_only_cache_is_used(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    numba_dir = tmp_path / "numba"
    run_child(directory, numba_dir)
    report = run_child(directory, numba_dir, read_only=[directory, numba_dir])
    # The verified source is used as it is; Numba's locators refuse a cache directory
    # they cannot write, so Numba compiles, and that is the one warning.
    assert report["reused"] == 1 and report["in_memory"] == 0 and report["written"] == 0
    warned_once(report, directory)


def test_tessc_run_with_a_file_for_a_cache_directory(tmp_path: Path) -> None:
    # The warm-start index (runtime/program_cache.py) lives in the same directory.
    program = tmp_path / "double.mlir"
    program.write_text(
        "func.func @double(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = tess.add %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>\n"
        "  func.return %0 : tensor<3xf32>\n}\n"
    )
    blocker = tmp_path / "cache"
    blocker.write_text("")
    env = dict(os.environ, TESSC_CACHE_DIR=str(blocker))
    result = subprocess.run(
        [sys.executable, "-m", "tessc.cli.run", str(program)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("output 0 (3) float32")
    assert result.stderr.count("CacheWarning") == 1 and str(blocker) in result.stderr
