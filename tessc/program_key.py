"""
What a compiled program depends on, as one hash: the key of the warm-start index
(`tessc.runtime.program_cache`).

The generated module is a function of

- the program: the `tess` module's printed text (its ops, types, attributes such as
  `{tess.donated}`, and the names of its functions);
- the pipeline: its name, its pass-pipeline string and the codegen options;
- the compiler: every source file of the `tessc` package (the front, `dialects`,
  `lowering`, `runtime`: a change in any pass changes the key) and the versions of the
  libraries that shape the generated code or run it (xDSL, Numba, llvmlite, NumPy), Python's
  version, and the host CPU that Numba compiles for.

The compiler part (`toolchain_stamp`) is computed once per process: hashing the ~70
source files takes a few milliseconds, far less than one pass. Hashing sources rather than
trusting a version number means an edited checkout (an editable install) never loads a
stale program; a file that does not change the output (a docstring edit) costs one
recompile, never a wrong result.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import platform
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES: tuple[str, ...] = ("tessc", "tessc.dialects", "tessc.lowering", "tessc.runtime")
"""The packages whose sources make up the compiler (`pyproject.toml` maps the repository's
top-level folders to them)."""

SOURCE_SUFFIXES: frozenset[str] = frozenset({".py", ".lark"})
LIBRARIES: tuple[str, ...] = ("xdsl", "numba", "llvmlite", "numpy")


def package_roots(packages: Iterable[str] = PACKAGES) -> list[Path]:
    """The directories the compiler's packages are loaded from."""
    roots: list[Path] = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            roots.extend(Path(p) for p in spec.submodule_search_locations)
    return roots


def source_files(roots: Iterable[Path]) -> list[Path]:
    """Every source file under `roots` (nested packages included, caches excluded), each
    once, in a stable order."""
    files: set[Path] = set()
    for root in roots:
        for path in root.rglob("*"):
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts:
                files.add(path.resolve())
    return sorted(files)


def sources_fingerprint(roots: Iterable[Path]) -> str:
    """The SHA-256 of the names (relative to their root) and contents of the files under
    `roots`."""
    digest = hashlib.sha256()
    for root in roots:
        root = root.resolve()
        for path in source_files([root]):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _host_cpu() -> str:
    """The CPU Numba compiles for (`NUMBA_CPU_NAME` wins, as in Numba)."""
    import os

    configured = os.environ.get("NUMBA_CPU_NAME")
    if configured:
        return configured + os.environ.get("NUMBA_CPU_FEATURES", "")
    from llvmlite import binding

    return binding.get_host_cpu_name() + binding.get_host_cpu_features().flatten()


@functools.cache
def toolchain_stamp() -> str:
    """The compiler's sources, the libraries' versions, Python and the host CPU, hashed."""
    parts = [f"tessc-sources={sources_fingerprint(package_roots())}"]
    for library in LIBRARIES:
        try:
            parts.append(f"{library}={metadata.version(library)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{library}=missing")
    parts.append(f"python={sys.version}")
    parts.append(f"machine={platform.machine()} cpu={_host_cpu()}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def program_key(
    module_text: str, pipeline: str, pipeline_spec: str, options: Mapping[str, Any]
) -> str:
    """The warm-start key of `module_text` compiled by `pipeline` (`pipeline_spec`: its
    passes) with codegen `options`."""
    digest = hashlib.sha256()
    for part in (
        toolchain_stamp(),
        pipeline,
        pipeline_spec,
        repr(sorted((k, repr(v)) for k, v in options.items())),
        module_text,
    ):
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()


__all__ = [
    "PACKAGES",
    "package_roots",
    "program_key",
    "source_files",
    "sources_fingerprint",
    "toolchain_stamp",
]
