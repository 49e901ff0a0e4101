"""
The on-disk kernel cache: generated Python source, stored under the hash of its content.

`load_source(source)` turns the Numba source that codegen produced into a live module:

1. the SHA-256 of the source names a file `tessc_<hash>.py` in the cache directory
   (`cache_dir`, else `$TESSC_CACHE_DIR`, else `~/.cache/tessc`);
2. the file's first line is a header holding that hash (`# tessc-sha256: <hash>`); when the
   file exists and its body hashes to the header's value, it is reused as it is, otherwise
   (missing, truncated, edited, corrupt) it is written again — to a temporary file in the
   same directory that `os.replace` then moves into place, so a reader sees the old file or
   the new one, never half of one;
3. the module is executed from the verified text with the file's path as its filename, so
   the code that runs is exactly the code that was checked, and Numba's `cache=True` finds
   its compiled functions in `__pycache__` beside the file (or `$NUMBA_CACHE_DIR`): a
   second process running the same program compiles nothing.

Within one process a source is loaded once; the same module object comes back on every
later call. `STATS` counts what happened (files written, reused, repaired; modules
imported), and `numba_compile_stats(module)` reports the Numba compilations and disk-cache
hits of a module's functions, so tests can observe that nothing was compiled.

The runtime never reads IR: this module depends on the standard library only (Numba is
looked at, not imported, by `numba_compile_stats`).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import types
from dataclasses import dataclass
from pathlib import Path

HEADER_PREFIX = "# tessc-sha256: "
MODULE_PREFIX = "tessc_"


@dataclass
class CacheStats:
    """Counters of `load_source` in this process."""

    written: int = 0  # files created because none existed
    repaired: int = 0  # files rewritten because they failed verification
    reused: int = 0  # verified files used as they were
    imported: int = 0  # modules executed (at most once per source per process)


@dataclass(frozen=True)
class CompileStats:
    """Numba's view of a module: signatures compiled now, and loaded from its disk cache."""

    compiled: int
    cache_hits: int


STATS = CacheStats()
_loaded: dict[str, types.ModuleType] = {}
_lock = threading.Lock()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def default_cache_dir() -> Path:
    """`$TESSC_CACHE_DIR` if set, else `~/.cache/tessc`."""
    configured = os.environ.get("TESSC_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tessc"


def cache_path(source: str, cache_dir: Path | None = None) -> Path:
    """Where `source` is stored: the file name is the hash of the content."""
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return directory / f"{MODULE_PREFIX}{source_hash(source)}.py"


def _file_text(source: str, digest: str) -> str:
    return f"{HEADER_PREFIX}{digest}\n{source}"


def _verified(path: Path, digest: str) -> bool:
    """Whether `path` holds the header for `digest` and a body with that hash."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    header, newline, body = data.partition(b"\n")
    if not newline or header.decode("utf-8", "replace") != HEADER_PREFIX + digest:
        return False
    return hashlib.sha256(body).hexdigest() == digest


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def store_source(source: str, cache_dir: Path | None = None) -> Path:
    """Make sure the verified file for `source` exists; return its path."""
    digest = source_hash(source)
    path = cache_path(source, cache_dir)
    if _verified(path, digest):
        STATS.reused += 1
        return path
    existed = path.exists()
    _write_atomically(path, _file_text(source, digest))
    if existed:
        STATS.repaired += 1
    else:
        STATS.written += 1
    return path


def load_source(source: str, cache_dir: Path | None = None) -> types.ModuleType:
    """The module for `source`, stored in (or reused from) the content-hashed disk cache."""
    path = cache_path(source, cache_dir)
    key = str(path.resolve())
    with _lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        path = store_source(source, cache_dir)
        module_name = path.stem
        module = types.ModuleType(module_name)
        module.__file__ = str(path)
        # Registered before executing so that Numba (and pickling) can find the module.
        sys.modules[module_name] = module
        try:
            # The header is a comment: compiling the whole file text keeps line numbers
            # (in tracebacks and Numba's messages) equal to the file's.
            text = _file_text(source, source_hash(source))
            exec(compile(text, str(path), "exec"), module.__dict__)
        except BaseException:
            del sys.modules[module_name]
            raise
        STATS.imported += 1
        _loaded[key] = module
        return module


def numba_compile_stats(module: types.ModuleType) -> CompileStats:
    """Signatures Numba compiled in this process and loaded from its disk cache, summed
    over the module's jitted functions (Numba's per-dispatcher `stats`)."""
    compiled = hits = 0
    for value in vars(module).values():
        stats = getattr(value, "stats", None)
        if stats is None or not hasattr(stats, "cache_misses"):
            continue
        compiled += sum(stats.cache_misses.values())
        hits += sum(stats.cache_hits.values())
    return CompileStats(compiled=compiled, cache_hits=hits)


__all__ = [
    "STATS",
    "CacheStats",
    "CompileStats",
    "cache_path",
    "default_cache_dir",
    "load_source",
    "numba_compile_stats",
    "source_hash",
    "store_source",
]
