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

from tessc.passes import TESS_PASSES

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {
    "tessc": "tessc",
    "dialects": "tessc.dialects",
    "lowering": "tessc.lowering",
    "runtime": "tessc.runtime",
}
"""Each folder and the package it is (pyproject.toml's package-dir)."""

LEVELS = ("autodiff", "linalg", "fusion", "buffers", "loops", "gpu", "codegen")
"""`tessc.lowering`'s levels in pipeline order: a module imports its own level or earlier ones."""

PASS_MODULES = frozenset(tuple(path.split(":")[0].split(".")[2:4]) for path in TESS_PASSES.values())
"""(level, module) of every pass (tessc/passes.py). A module whose name is a pass's name
followed by `_...` in the same level is that pass's helper (`fuse_plan` of `fuse`,
`to_linalg_index` of `to_linalg`); any other lowering module is shared code."""

RUNTIME_FOR_LOWERING = "tessc.runtime.abi"
"""The one runtime module lowering imports: the constants both sides of codegen agree on."""

DIALECT_THIRD_PARTY = {
    "tessc.dialects.builder": {"numpy"},
    "tessc.dialects.builder_types": {"numpy", "ml_dtypes"},
    "tessc.dialects.builder_index": {"numpy"},
}
"""Besides xDSL: the builder converts NumPy dtypes (bfloat16 is ml_dtypes') and numbers for
the front."""

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
            module = from_module(node, name, is_package)
            # `from tessc.lowering import fuse` imports a module: name what comes after too.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def from_module(node: ast.ImportFrom, name: str, is_package: bool = False) -> str:
    """The absolute name of the module a `from ... import` in module `name` reads."""
    module = node.module or ""
    if node.level:
        base = name.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        module = ".".join([*base, *([module] if module else [])])
    return module


def package_modules(directory: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((REPOSITORY / directory).rglob("*.py")):
        yield module_name(path), path


def owning_pass(level: str, module: str) -> str | None:
    """The pass module `module` of `level` is or belongs to (by name), None for shared code."""
    if (level, module) in PASS_MODULES:
        return module
    owners = [m for lv, m in PASS_MODULES if lv == level and module.startswith(m + "_")]
    return max(owners, key=len, default=None)


def lowering_violation(name: str, imported: str) -> str | None:
    """Why lowering module `name` may not import lowering module `imported`, or None."""
    source, target = name.split(".")[2:4], imported.split(".")[2:4]
    if len(source) < 2 or len(target) < 2 or target[0] not in LEVELS:
        return None
    owner = owning_pass(*source)
    other = owning_pass(*target)
    if other is not None and other != owner:
        return f"pass module {name} imports pass module {imported} (another pass's)"
    if source[0] in LEVELS and LEVELS.index(target[0]) > LEVELS.index(source[0]):
        return f"{name} ({source[0]}) imports {imported}, of a later level ({target[0]})"
    return None


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
            if ".".join(target[:3]) == RUNTIME_FOR_LOWERING:
                return None
            if target_layer not in ("dialects", "lowering"):
                return f"{name} (lowering) imports {imported}, above it or beside it"
            if target_layer == "lowering":
                return lowering_violation(name, imported)
        return None
    if top == "xdsl" or top in sys.stdlib_module_names or top == "__future__":
        return None
    if layer == "dialects" and top in DIALECT_THIRD_PARTY.get(name, set()):
        return None
    return f"{name} ({layer}) imports the library {top} (only xDSL and the standard library)"


def type_checking_imports(tree: ast.AST) -> set[ast.AST]:
    """The import statements under `if TYPE_CHECKING:`: annotations only, never run."""
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))
    return found


def module_imports(
    source: str, name: str, modules: set[str], is_package: bool = False
) -> Iterator[tuple[str, str | None]]:
    """`(module, name)` for every package module `source` imports at run time (functions'
    imports included; `if TYPE_CHECKING:` ones not): `name` is the name imported from it,
    None for the module itself."""
    tree = ast.parse(source)
    skipped = type_checking_imports(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = alias.name
                while module and module not in modules:
                    module = module.rpartition(".")[0]
                if module:
                    yield module, None
        elif isinstance(node, ast.ImportFrom):
            module = from_module(node, name, is_package)
            for alias in node.names:
                if f"{module}.{alias.name}" in modules:
                    yield f"{module}.{alias.name}", None
                elif module in modules:
                    yield module, alias.name


def import_graph() -> dict[str, set[str]]:
    modules = {name: path for d in PACKAGE_DIRS for name, path in package_modules(d)}
    return {
        name: {
            m
            for m, _ in module_imports(
                path.read_text(), name, set(modules), path.name == "__init__.py"
            )
            if m != name
        }
        for name, path in modules.items()
    }


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                cycles.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def private_imports(source: str, name: str, modules: set[str]) -> list[str]:
    """`from m import _x` in module `name`, `_x` a private name of another package module."""
    return [
        f"{name} imports {imported} from {module}"
        for module, imported in module_imports(source, name, modules)
        if imported is not None and imported.startswith("_") and not imported.startswith("__")
    ]


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
        ("tessc.lowering.fusion.fuse", "from .pack_narrow import x", "pass module"),
        (
            "tessc.lowering.fusion.fuse",
            "from tessc.lowering.loops import linalg_to_loops",
            "pass module",
        ),
        ("tessc.lowering.fusion.fuse", "from . import pack_narrow", "pass module"),
        # A helper of one pass is that pass's, by name.
        ("tessc.lowering.fusion.fuse", "from .fuse_horizontal_groups import x", "pass module"),
        ("tessc.lowering.loops.row_dots", "from .pack_matmul_plan import x", "pass module"),
        # Shared code of a later level.
        ("tessc.lowering.fusion.fuse", "from tessc.lowering.loops.index_values import x", "later"),
        ("tessc.lowering.buffers.hoist_scratch", "from ..codegen.numba_source import x", "later"),
        # Of the runtime, lowering imports only its `abi`.
        ("tessc.lowering.codegen.to_numba", "from tessc.runtime import cache", "(lowering)"),
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
        ("tessc.lowering.fusion.fuse_plan", "from .fuse_build import x"),
        ("tessc.lowering.linalg.to_linalg", "from .to_linalg_index import x"),
        ("tessc.lowering.codegen.to_numba", "from tessc.lowering.loops.trip_counts import x"),
        ("tessc.lowering.buffers.hoist_scratch", "from tessc.runtime.abi import HUGE_PAGE"),
        ("tessc.lowering.codegen.to_cuda", "from tessc.runtime import abi"),
    ],
)
def test_an_allowed_import_passes(name: str, source: str) -> None:
    assert all(violations(name, m) is None for m in imports(source, name))


def test_no_import_cycle() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "\n".join(" <-> ".join(sorted(c)) for c in cycles)


def test_a_cycle_is_caught() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [frozenset({"a", "b", "c"})]
    lazy = "def f():\n    from tessc.b import g\n"
    modules = {"tessc.a", "tessc.b"}
    assert [m for m, _ in module_imports(lazy, "tessc.a", modules)] == ["tessc.b"]
    typing_only = "if TYPE_CHECKING:\n    from tessc.b import B\n"
    assert list(module_imports(typing_only, "tessc.a", modules)) == []


def test_no_private_name_is_imported() -> None:
    modules = {name: path for d in PACKAGE_DIRS for name, path in package_modules(d)}
    problems = [
        problem
        for name, path in modules.items()
        for problem in private_imports(path.read_text(), name, set(modules))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from tessc.fuzz.programs import _Builder", True),
        ("def f():\n    from .programs import _Builder", True),
        ("from tessc.fuzz.programs import Program, _helper as helper", True),
        ("from tessc.fuzz.programs import ProgramBuilder", False),
        ("from tessc.fuzz import programs", False),
        ("from typing import _SpecialForm", False),
    ],
)
def test_a_private_import_is_caught(source: str, caught: bool) -> None:
    modules = {"tessc.fuzz.programs", "tessc.fuzz.rows"}
    assert bool(private_imports(source, "tessc.fuzz.rows", modules)) == caught


def test_a_trace_needs_the_numpy_forms_registered() -> None:
    # The tracer cannot import the forms its NumPy protocol dispatches to (that was the
    # cycle): a Trace made before `function_forms` is imported is refused, not left with
    # an empty table.
    import subprocess

    code = (
        "from tessc.frontend.tracer import Trace\n"
        "try:\n    Trace()\nexcept RuntimeError as e:\n    print('refused', e)\n"
        "import tessc.frontend.function_forms\nTrace()\nprint('made')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.startswith("refused import tessc.frontend.function_forms"), result
    assert result.stdout.rstrip().endswith("made"), result
