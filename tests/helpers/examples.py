"""The example scripts (`examples/*.py`) as modules: they are scripts, not a package, so a
test loads one by its path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).parents[2] / "examples"


def load_example(script: str) -> ModuleType:
    """`examples/<script>.py` loaded as a new module `<script>_example` (each call loads
    it afresh; nothing is added to `sys.modules`)."""
    spec = importlib.util.spec_from_file_location(f"{script}_example", EXAMPLES / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


__all__ = ["EXAMPLES", "load_example"]
