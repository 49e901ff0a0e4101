"""
The warm-start index: a program's key -> the generated module the compiler made for it.

The kernel cache (`tessc.runtime.cache`) is keyed on the generated source, so finding a
program there means running the whole compiler first (tracing, every pass, codegen: ~0.3 s
for an MLP train step) only to learn that its source is already on disk. This second level
is keyed on what the caller gave instead: an opaque key the front computes (the program's
IR text, the pipeline and its options, the versions of everything that could change the
generated code; see `tessc.program_key`), mapped to the hash of the generated source. A
warm first call then costs tracing plus loading.

Layout: `<cache dir>/programs/<key>` holds one line, `<source sha256>`, written atomically
(a temporary file `os.replace`d into place). `lookup(key)` returns the source only if that
kernel-cache file exists and verifies (its header and its body's hash); an index entry
whose kernel file is gone or corrupt is a miss, and the caller recompiles and records it
again. The index never holds code, so a corrupt index entry can cost a recompile but never
run the wrong program: the source it names is checked against its own hash.

The runtime reads no IR: keys and sources are strings to this module.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tessc.runtime.cache import (
    MODULE_PREFIX,
    default_cache_dir,
    source_hash,
    store_source,
    verified_body,
)

INDEX_DIR = "programs"
_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass
class ProgramCacheStats:
    """Counters of `lookup`/`record` in this process."""

    hits: int = 0  # keys found with a verified kernel file
    misses: int = 0  # keys absent, or naming a missing or corrupt kernel file
    recorded: int = 0  # index entries written


STATS = ProgramCacheStats()


def _directory(cache_dir: Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def index_path(key: str, cache_dir: Path | None = None) -> Path:
    if not _DIGEST.fullmatch(key):
        raise ValueError(f"a program key is a sha256 hex digest, got {key!r}")
    return _directory(cache_dir) / INDEX_DIR / key


def _verified_source(digest: str, cache_dir: Path | None) -> str | None:
    """The body of the kernel-cache file for source hash `digest`, if it verifies."""
    body = verified_body(_directory(cache_dir) / f"{MODULE_PREFIX}{digest}.py", digest)
    try:
        return None if body is None else body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def lookup(key: str, cache_dir: Path | None = None) -> str | None:
    """The generated source recorded for `key`, or None (a miss)."""
    try:
        digest = index_path(key, cache_dir).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        digest = ""
    source = _verified_source(digest, cache_dir) if _DIGEST.fullmatch(digest) else None
    if source is None:
        STATS.misses += 1
        return None
    STATS.hits += 1
    return source


def record(key: str, source: str, cache_dir: Path | None = None) -> None:
    """Remember that `key` compiles to `source`, which is stored in the kernel cache too
    (again, if a module loaded earlier in this process has lost its file since)."""
    path = index_path(key, cache_dir)
    try:
        store_source(source, cache_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    except OSError:
        return  # an unusable cache directory: `load_source` warned and compiled in memory
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(source_hash(source) + "\n")
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            return
        raise
    STATS.recorded += 1


__all__ = ["STATS", "ProgramCacheStats", "index_path", "lookup", "record"]
