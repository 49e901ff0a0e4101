"""
Imports point down the pipeline (ARCHITECTURE.md, "What each folder holds"; lowering/README.md).

The front (`tessc/`) may import everything; `lowering/` imports xDSL, `tessc.dialects` and
the lowering modules that are shared code rather than passes; `dialects/` imports xDSL and
itself; `runtime/` imports neither xDSL nor any other part of tessc (it runs generated
Python and never reads IR). No module of the package imports a test-only library. Every
`import` statement counts, also those inside functions, so a lazy import cannot hide.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {
    "tessc": "tessc",
    "dialects": "tessc.dialects",
    "lowering": "tessc.lowering",
    "runtime": "tessc.runtime",
}
"""Each folder and the package it is (pyproject.toml's package-dir)."""

SHARED_LOWERING = frozenset(
    {
        "loops.index_values",
        "loops.trip_counts",
        "loops.row_analysis",
        "linalg.loop_nests",
        "buffers.arena_layout",
        "loops.index_emitter",
        "linalg.generic_analysis",
        "linalg.builders",
        "fusion.fuse_horizontal_groups",
        "fusion.fuse_horizontal_segments",
        "gpu.gpu_common",
        "gpu.gpu_tree",
        "codegen.numba_ops",
        "codegen.numba_source",
        "codegen.numba_function",
        "codegen.numba_micro",
        "autodiff.vjp_rules",
    }
)
"""Lowering modules that are not passes: any pass may import them (lowering/README.md,
"Shared code that is not a pass")."""

PASS_TO_PASS = frozenset(
    {
        # One pass split over two files.
        ("linalg.to_linalg", "linalg.to_linalg_index"),
        ("linalg.to_linalg_index", "linalg.to_linalg"),
        ("buffers.memory_plan", "buffers.memory_plan_accumulators"),
        ("buffers.memory_plan", "buffers.memory_plan_planner"),
        ("buffers.memory_plan_planner", "buffers.memory_plan_accumulators"),
        # One pass split over three files: the decision, the fused op's construction, and
        # the pattern and pass.
        ("fusion.fuse", "fusion.fuse_plan"),
        ("fusion.fuse", "fusion.fuse_build"),
        ("fusion.fuse_build", "fusion.fuse_plan"),
        # One pass split over two files: matching a row kernel, then tiling it.
        ("loops.tile", "loops.tile_match"),
        # One pass split over three files: the sibling merge, the arena rewrite of a
        # function, and the scalar prologue and pass.
        ("fusion.fuse_horizontal", "fusion.fuse_horizontal_siblings"),
        ("fusion.fuse_horizontal", "fusion.fuse_horizontal_arenas"),
        # Codegen's choice of parallel form (threaded kernels or parfors).
        ("codegen.to_numba", "codegen.numba_threads"),
        # and of the kernels a host calls by name (compiled on their own).
        ("codegen.to_numba", "codegen.numba_external"),
        # A packed contraction is matched as tess-tile's row kernel, or a dot nest as
        # tess-tile-dot's.
        ("loops.pack_matmul_plan", "loops.tile_match"),
        ("loops.pack_matmul_plan", "loops.tile_dot"),
        # One pass split over three files: what it packs and with which blocks, the
        # build, and the rewrite.
        ("loops.pack_matmul", "loops.pack_matmul_plan"),
        ("loops.pack_matmul", "loops.pack_matmul_build"),
        ("loops.pack_matmul_build", "loops.pack_matmul_plan"),
        # A packed kernel's row dots: their left-hand side read in place and their tile
        # sized as tess-pack-matmul's.
        ("loops.row_dots", "loops.pack_matmul_plan"),
    }
)
"""The pass modules that import another pass module, each with its reason."""

DIALECT_THIRD_PARTY = {
    "tessc.dialects.builder": {"numpy"},
    "tessc.dialects.builder_types": {"numpy"},
    "tessc.dialects.builder_index": {"numpy"},
}
"""Besides xDSL: the builder converts NumPy dtypes and numbers for the front."""

TEST_ONLY = frozenset({"hypothesis", "pytest", "_pytest", "lit", "filecheck"})


def module_name(path: Path) -> str:
    relative = path.relative_to(REPOSITORY)
    package = PACKAGE_DIRS[relative.parts[0]]
    parts = [*relative.parts[1:-1], relative.stem]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def imports(source: str, name: str, is_package: bool = False) -> Iterator[str]:
    """The absolute names of the modules `source` (module `name`) imports."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, *([module] if module else [])])
            # `from tessc.lowering import fuse` imports a module: name what comes after too.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def package_modules(directory: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((REPOSITORY / directory).rglob("*.py")):
        yield module_name(path), path


def violations(name: str, imported: str) -> str | None:
    """Why module `name` may not import `imported`, or None where it may."""
    top = imported.split(".")[0]
    if top in TEST_ONLY:
        return f"{name} imports the test-only library {top}"
    layer = name.split(".")[1] if name.count(".") >= 1 else ""
    if layer not in ("dialects", "lowering", "runtime"):
        return None  # the front may use everything
    target = imported.split(".")
    target_layer = target[1] if top == "tessc" and len(target) > 1 else None
    if layer == "runtime":
        if top == "xdsl" or (top == "tessc" and target_layer != "runtime"):
            return f"{name} (runtime stands alone) imports {imported}"
        return None
    if top == "tessc":
        if layer == "dialects" and target_layer != "dialects":
            return f"{name} (dialects) imports {imported}"
        if layer == "lowering":
            if target_layer not in ("dialects", "lowering"):
                return f"{name} (lowering) imports {imported}, above it or beside it"
            if target_layer == "lowering" and len(target) > 3:
                source, other = ".".join(name.split(".")[2:4]), ".".join(target[2:4])
                if other not in SHARED_LOWERING and (source, other) not in PASS_TO_PASS:
                    return f"pass module {name} imports pass module {imported}"
        return None
    if top == "xdsl" or top in sys.stdlib_module_names or top == "__future__":
        return None
    if layer == "dialects" and top in DIALECT_THIRD_PARTY.get(name, set()):
        return None
    return f"{name} ({layer}) imports the library {top} (only xDSL and the standard library)"


@pytest.mark.parametrize("directory", list(PACKAGE_DIRS))
def test_imports_point_down_the_pipeline(directory: str) -> None:
    problems = []
    for name, path in package_modules(directory):
        is_package = path.name == "__init__.py"
        for imported in imports(path.read_text(), name, is_package):
            problem = violations(name, imported)
            if problem:
                problems.append(f"{path.relative_to(REPOSITORY)}: {problem}")
    assert not problems, "\n".join(problems)


def test_every_package_directory_is_read() -> None:
    names = {name for directory in PACKAGE_DIRS for name, _ in package_modules(directory)}
    for expected in (
        "tessc.compiler",
        "tessc.dialects.tess",
        "tessc.lowering.loops.linalg_to_loops",
        "tessc.runtime.executor",
    ):
        assert expected in names


def test_every_subpackage_is_packaged() -> None:
    # pyproject.toml lists the packages: one left out is missing from a built wheel.
    with open(REPOSITORY / "pyproject.toml", "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {
        module_name(path)
        for directory in PACKAGE_DIRS
        for path in (REPOSITORY / directory).rglob("__init__.py")
    }
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"


@pytest.mark.parametrize(
    ("name", "source", "problem"),
    [
        ("tessc.runtime.executor", "from xdsl.ir import Operation", "runtime stands alone"),
        ("tessc.runtime.cuda", "def f():\n    import tessc.lowering.codegen.to_numba", "runtime"),
        ("tessc.dialects.tess", "from tessc.lowering import fuse", "(dialects)"),
        ("tessc.dialects.tess", "import numpy as np", "the library numpy"),
        ("tessc.lowering.fusion.fuse", "from tessc.runtime import Executable", "(lowering)"),
        ("tessc.lowering.fusion.fuse", "from tessc.pipelines import get_pipeline", "(lowering)"),
        (
            "tessc.lowering.fusion.fuse",
            "from tessc.lowering.loops.linalg_to_loops import x",
            "pass module",
        ),
        ("tessc.lowering.fusion.fuse", "from .to_loops import x", "pass module"),
        (
            "tessc.lowering.fusion.fuse",
            "from tessc.lowering.loops import linalg_to_loops",
            "pass module",
        ),
        ("tessc.lowering.fusion.fuse", "from . import to_loops", "pass module"),
        ("tessc.compiler", "import hypothesis.strategies", "test-only"),
    ],
)
def test_a_wrong_import_is_caught(name: str, source: str, problem: str) -> None:
    found = [violations(name, m) for m in imports(source, name)]
    assert any(p and problem in p for p in found), found


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("tessc.lowering.fusion.fuse", "from tessc.lowering.linalg.generic_analysis import x"),
        ("tessc.lowering.codegen.to_numba", "from tessc.lowering.codegen.numba_threads import x"),
        ("tessc.lowering.fusion.fuse", "from tessc.dialects import contract"),
        ("tessc.compiler", "from tessc.runtime import Executable"),
        ("tessc.runtime.executor", "import numpy as np\nfrom tessc.runtime import cache"),
    ],
)
def test_an_allowed_import_passes(name: str, source: str) -> None:
    assert all(violations(name, m) is None for m in imports(source, name))
