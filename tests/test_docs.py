"""
The documentation names what exists: every path in ARCHITECTURE.md and the lowering READMEs
resolves, every lowering module is named in its level's README, every registered pass has a
FileCheck test named after it in its level's folder, and lowering module docstrings stay
short (the essays live in the READMEs).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tessc.passes import TESS_PASSES

REPOSITORY = Path(__file__).resolve().parent.parent
LOWERING = REPOSITORY / "lowering"
LEVELS = sorted(p.name for p in LOWERING.iterdir() if (p / "__init__.py").exists())
LEVEL_READMES = [LOWERING / level / "README.md" for level in LEVELS]
DOCUMENTS = [REPOSITORY / "ARCHITECTURE.md", LOWERING / "README.md", *LEVEL_READMES]
TOP_FOLDERS = ("tessc", "dialects", "lowering", "runtime", "tests", "bench", "examples")
SOURCE_FOLDERS = ("tessc", "dialects", "lowering", "runtime")
MAX_DOCSTRING_LINES = 20
"""A lowering module's docstring: what it does and why (~15 lines); algorithms go in the
level README."""

CODE_SPAN = re.compile(r"`([^`\s]+)`")


def code_spans(document: Path) -> list[str]:
    return CODE_SPAN.findall(document.read_text())


def resolves(pattern: str, base: Path) -> bool:
    """Whether `pattern` (a path, possibly with a `*`) names something under `base`."""
    if "*" in pattern:
        return any(base.glob(pattern))
    return (base / pattern).exists()


def named_paths(document: Path) -> list[tuple[str, Path]]:
    """The paths a document names in code spans, each with the folder it is relative to:
    the repository for `lowering/...`, `tests/...` and the other top-level folders; in
    `lowering/README.md` also `<level>/<module>.py`, relative to `lowering/`. Templates
    (`<level>`) are not paths."""
    found = []
    for span in code_spans(document):
        path = span.split("::")[0].rstrip(".,:;")
        if "<" in path or "/" not in path or path.startswith(("http", "/")):
            continue
        head = path.split("/")[0]
        if head in TOP_FOLDERS:
            found.append((path, REPOSITORY))
        elif document.parent == LOWERING and head in LEVELS:
            found.append((path, LOWERING))
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_named_path_exists(document: Path) -> None:
    assert document.exists(), f"{document} is missing"
    missing = [path for path, base in named_paths(document) if not resolves(path, base)]
    assert not missing, (
        f"{document.relative_to(REPOSITORY)} names paths that do not exist: {missing}"
    )


@pytest.mark.parametrize("readme", LEVEL_READMES, ids=lambda p: p.parent.name)
def test_every_named_module_exists(readme: Path) -> None:
    """A bare `module.py` in a level README is a module of some source folder."""
    known = {p.name for folder in SOURCE_FOLDERS for p in (REPOSITORY / folder).rglob("*.py")}
    modules = {span for span in code_spans(readme) if re.fullmatch(r"[a-z_]+\.py", span)}
    assert not modules - known, f"{readme.relative_to(REPOSITORY)} names unknown modules"


@pytest.mark.parametrize("level", LEVELS)
def test_every_lowering_module_is_in_its_readme(level: str) -> None:
    readme = LOWERING / level / "README.md"
    assert readme.exists(), f"lowering/{level}/ has no README.md"
    spans = set(code_spans(readme))
    modules = sorted(p.name for p in (LOWERING / level).glob("*.py") if p.name != "__init__.py")
    unnamed = [m for m in modules if m not in spans]
    assert not unnamed, f"lowering/{level}/README.md does not name {unnamed}"


@pytest.mark.parametrize("name", sorted(TESS_PASSES))
def test_every_pass_is_documented_and_filechecked(name: str) -> None:
    """A pass's module sits in a level folder; lowering/README.md names the pass and its
    module; `tests/filecheck/<level>/<pass-name>*.mlir` tests it."""
    module = TESS_PASSES[name].split(":")[0]
    parts = module.split(".")
    assert parts[:2] == ["tessc", "lowering"] and len(parts) == 4, module
    level, stem = parts[2], parts[3]
    index = (LOWERING / "README.md").read_text()
    assert f"`{name}" in index, f"lowering/README.md has no row for {name}"
    assert f"`{level}/{stem}.py`" in index, f"lowering/README.md does not name {level}/{stem}.py"
    filecheck = REPOSITORY / "tests" / "filecheck" / level
    assert any(filecheck.glob(f"{name}*.mlir")), f"no tests/filecheck/{level}/{name}*.mlir"


def test_lowering_docstrings_are_short() -> None:
    long = {}
    for path in sorted(LOWERING.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if len(docstring.splitlines()) > MAX_DOCSTRING_LINES:
            long[str(path.relative_to(REPOSITORY))] = len(docstring.splitlines())
    assert not long, (
        f"module docstrings over {MAX_DOCSTRING_LINES} lines (move the essay to the level "
        f"README): {long}"
    )
