"""
The on-disk kernel cache: generated Python source, stored under the hash of its content,
and Numba's compiled code for it, trusted only through tessc's own checksums.

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

Numba's own cache files (`<module>.<function>-<line>.pyXY.nbi`, the index of a function's
compiled signatures, and `....<n>.nbc`, pickled machine code) are not checked by Numba: one
flipped bit gives a wrong answer or a crash on every later run. So tessc keeps its own
index of them, `tessc_<hash>.sums` beside the source file: a JSON map from each Numba cache
file of the module to its SHA-256. Each cached dispatcher's `FunctionCache` is wrapped
(`_guard_numba_cache`):

- before Numba loads a function from disk, every one of its cache files on disk must be
  in the index with its checksum; if one is not (corrupt, truncated, written by a process
  that died before indexing it, or an unexpected directory) all of that function's files
  are deleted and Numba compiles it again — corruption costs a compilation, never a wrong
  answer. If they cannot be deleted, caching is switched off for that function;
- after Numba saves a function (it writes each file atomically), the checksums of its
  files replace the function's entries in the index, written atomically in turn.

Cache directory faults — a read-only or unwritable directory, a file where the directory
should be, a directory where a cache file should be — never stop a program: the module is
executed from memory with Numba's disk caching off, after one `CacheWarning` naming the
directory. A populated read-only cache is still used (its files verify; nothing is written).

Within one process a source is loaded once; the same module object comes back on every
later call. `STATS` counts what happened (files written, reused, repaired; modules
imported; Numba functions discarded; in-memory fallbacks), and `numba_compile_stats(module)`
reports the Numba compilations and disk-cache hits of a module's functions, so tests can
observe that nothing was compiled.

Every jitted function of a loaded module compiles with tessc's Numba pipeline
(`tessc.runtime.numba_pipeline`: the same code for about a quarter less compile time). A
module's kernels called by name (`tessc.runtime.external`) are compiled, or loaded, when it
is loaded, partly by a compile worker process writing the same disk cache: the index of
checksums is then updated under a file lock (`flock`), and a worker loads a module through
`execute_file`.

The runtime never reads IR: this module depends on the standard library only (Numba's
dispatchers are looked at and wrapped, not imported; the pipeline module imports Numba when
a module that uses it is loaded).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KERNEL_COMPILERS: list[Callable[..., None]] = []
"""Called on every module executed (`compile_kernels(module, guard, path, is_cached)`,
the last three only for a module on disk): `tessc.runtime.external` registers its own when
imported, which a module with kernels called by name does first."""

HEADER_PREFIX = "# tessc-sha256: "
MODULE_PREFIX = "tessc_"
SUMS_SUFFIX = ".sums"


class CacheWarning(UserWarning):
    """The kernel cache directory cannot be used; programs are compiled in memory."""


@dataclass
class CacheStats:
    """Counters of `load_source` in this process."""

    written: int = 0  # files created because none existed
    repaired: int = 0  # files rewritten because they failed verification
    reused: int = 0  # verified files used as they were
    imported: int = 0  # modules executed (at most once per source per process)
    discarded: int = 0  # Numba cache entries (one function's files) failing their checksums
    in_memory: int = 0  # modules executed without a disk cache (directory faults)


@dataclass(frozen=True)
class CompileStats:
    """Numba's view of a module: signatures compiled now, and loaded from its disk cache."""

    compiled: int
    cache_hits: int


STATS = CacheStats()
_loaded: dict[str, types.ModuleType] = {}
_lock = threading.RLock()
_warned: set[str] = set()


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


def verified_body(path: Path, digest: str) -> bytes | None:
    """The body of cache file `path` if it holds the header for `digest` and a body with
    that hash (also what `tessc.runtime.program_cache` reads), else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _body_of(data, digest)


def checked_body(path: Path) -> bytes | None:
    """The body of a file `write_checked` wrote if it still has the hash its header holds
    (found by another key than its hash: a module's machine code), else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header = data.partition(b"\n")[0].decode("utf-8", "replace")
    return _body_of(data, header.removeprefix(HEADER_PREFIX))


def _body_of(data: bytes, digest: str) -> bytes | None:
    header, newline, body = data.partition(b"\n")
    if not newline or header.decode("utf-8", "replace") != HEADER_PREFIX + digest:
        return None
    return body if hashlib.sha256(body).hexdigest() == digest else None


def write_checked(path: Path, body: bytes) -> None:
    """`body` into `path` by rename behind the header of its hash (`checked_body`), not
    synced: a file lost in a crash only makes the next process compile again."""
    header = f"{HEADER_PREFIX}{hashlib.sha256(body).hexdigest()}\n".encode()
    _write_atomically(path, header + body, durable=False)


def _write_atomically(path: Path, data: str | bytes, *, durable: bool = True) -> None:
    """`data` into `path` by rename; `durable` syncs it to disk first (not needed for the
    index of checksums, rewritten after every function Numba saves: a file lost in a
    crash only makes the next process compile again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        if isinstance(data, bytes):
            handle = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _warn_once(directory: Path, error: BaseException, consequence: str) -> None:
    key = str(directory)
    if key in _warned:
        return
    _warned.add(key)
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    warnings.warn(
        f"tessc: cannot use the kernel cache directory '{directory}' ({reason}); {consequence}",
        CacheWarning,
        stacklevel=4,
    )


def store_source(source: str, cache_dir: Path | None = None) -> Path:
    """Make sure the verified file for `source` exists; return its path (OSError when the
    directory cannot hold it)."""
    digest = source_hash(source)
    path = cache_path(source, cache_dir)
    if verified_body(path, digest) is not None:
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
    """The module for `source`, stored in (or reused from) the content-hashed disk cache,
    or executed from memory when the cache directory cannot be used."""
    path = cache_path(source, cache_dir)
    key = str(path.absolute())
    with _lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        try:
            path = store_source(source, cache_dir)
        except OSError as error:
            _warn_once(path.parent, error, "compiling in memory")
            module = _execute(source, path, on_disk=False)
        else:
            module = _execute(source, path, on_disk=True)
        _loaded[key] = module
        return module


def _execute(
    source: str, path: Path, *, on_disk: bool, compile_kernels: bool = True
) -> types.ModuleType:
    module_name = path.stem
    module = types.ModuleType(module_name)
    if on_disk:
        module.__file__ = str(path)
    else:
        # Numba cannot cache a function without a source file (it raises at decoration):
        # the module's own `from numba import njit` gets an njit that never caches.
        module.__dict__["__builtins__"] = dict(vars(builtins), __import__=_uncached_import)
        STATS.in_memory += 1
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
    _tune_numba(module)
    if on_disk:
        sums = path.with_suffix(SUMS_SUFFIX)
        for value in vars(module).values():
            _guard_numba_cache(value, sums)
    for compile_external in KERNEL_COMPILERS if compile_kernels else ():
        # Kernels called by name (`tessc.runtime.external`): compiled (concurrently where
        # it pays) and their symbols registered before anything calls the host.
        if on_disk:
            compile_external(module, guard_for(path), path, lambda c: _is_cached(c, sums))
        else:
            compile_external(module)
    STATS.imported += 1
    return module


def execute_file(path: Path) -> types.ModuleType | None:
    """The module of cache file `path` if it verifies (its name is its hash), executed
    without compiling its kernels: what a compile worker (`tessc.runtime.external`) loads."""
    digest = path.stem.removeprefix(MODULE_PREFIX)
    body = verified_body(path, digest)
    if body is None:
        return None
    return _execute(body.decode("utf-8"), path, on_disk=True, compile_kernels=False)


def guard_for(path: Path) -> Any:
    """`_guard_numba_cache` for a function of the module in cache file `path`."""
    sums = path.with_suffix(SUMS_SUFFIX)
    return lambda compiled: _guard_numba_cache(compiled, sums)


def _is_cached(compiled: Any, sums: Path) -> bool:
    """Whether Numba's disk cache holds verified files of `compiled` (guarded)."""
    files = _function_files(compiled._cache)
    with _lock:
        return bool(files) and _files_verify(files, _read_sums(sums))


@contextmanager
def _file_lock(sums: Path) -> Iterator[None]:
    """An exclusive lock for updating the index `sums`, between processes (a compile
    worker updates it too; readers need none: it is replaced atomically), where the
    platform has `flock`."""
    try:
        import fcntl

        handle = open(sums.with_suffix(".lock"), "a")  # noqa: SIM115 - closed below
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()


# ---------------------------------------------------------------------------------------
# Numba's cache files, checked against tessc's index
# ---------------------------------------------------------------------------------------


def _tune_numba(module: types.ModuleType) -> None:
    """Have the module's jitted functions compile with tessc's Numba pipeline
    (`tessc.runtime.numba_pipeline`), if the module uses Numba (a CPU module)."""
    if not any(hasattr(v, "_compiler") and hasattr(v, "py_func") for v in vars(module).values()):
        return
    from tessc.runtime.numba_pipeline import tune

    for value in vars(module).values():
        if hasattr(value, "_compiler") and hasattr(value, "py_func"):
            tune(value)


def _uncached_import(name: str, *args: Any, **kwargs: Any) -> Any:
    module = builtins.__import__(name, *args, **kwargs)
    return _UncachedNumba(module) if name == "numba" else module


class _UncachedNumba:
    """`numba` as seen by a module executed from memory: `njit`/`jit` never cache."""

    def __init__(self, numba: types.ModuleType):
        self._numba = numba

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._numba, name)
        if name not in ("njit", "jit"):
            return value

        def uncached(*args: Any, **options: Any) -> Any:
            options["cache"] = False
            return value(*args, **options)

        return uncached


def _sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _function_files(function_cache: Any) -> list[str]:
    """The Numba cache files of one function on disk: its `.nbi` and every `.nbc`."""
    directory = function_cache._cache_path
    base = function_cache._cache_file._index_name.removesuffix(".nbi")
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(
        os.path.join(directory, name)
        for name in names
        if name == base + ".nbi"
        or (name.startswith(base + ".") and name.endswith(".nbc") and ".tmp." not in name)
    )


def _read_sums(sums: Path) -> dict[str, str]:
    try:
        data = json.loads(sums.read_text(encoding="utf-8"))
        files = data["files"]
        if isinstance(files, dict) and all(isinstance(v, str) for v in files.values()):
            return files
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {}


def _files_verify(files: list[str], sums: dict[str, str]) -> bool:
    try:
        return all(sums.get(path) == _sha256(path) for path in files)
    except OSError:
        return False


def _discard(files: list[str]) -> bool:
    """Delete `files`; whether none is left."""
    for path in files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
    return True


def _guard_numba_cache(dispatcher: Any, sums: Path) -> None:
    """Wrap the disk cache of `dispatcher` (a Numba dispatcher with `cache=True`) so that it
    loads only files whose checksums are in `sums`, and records them there when it saves."""
    function_cache = getattr(dispatcher, "_cache", None)
    if not all(
        hasattr(function_cache, attribute)
        for attribute in ("load_overload", "save_overload", "disable", "_cache_path")
    ) or not hasattr(getattr(function_cache, "_cache_file", None), "_index_name"):
        return  # not a Numba disk cache (NullCache: caching is off)
    load, save = function_cache.load_overload, function_cache.save_overload

    def load_overload(sig: Any, target_context: Any) -> Any:
        with _lock:
            files = _function_files(function_cache)
            if files and not _files_verify(files, _read_sums(sums)):
                STATS.discarded += 1
                if not _discard(files):
                    function_cache.disable()
                    return None
        return load(sig, target_context)

    def save_overload(sig: Any, data: Any) -> None:
        try:
            save(sig, data)
        except OSError as error:  # the directory went away or read-only since decoration
            _warn_once(Path(function_cache._cache_path), error, "compiled kernels are not kept")
            function_cache.disable()
            return
        with _lock, _file_lock(sums):
            files = _function_files(function_cache)
            base = function_cache._cache_file._index_name.removesuffix(".nbi")
            prefix = os.path.join(function_cache._cache_path, base + ".")
            recorded = {k: v for k, v in _read_sums(sums).items() if not k.startswith(prefix)}
            try:
                recorded.update((path, _sha256(path)) for path in files)
                text = json.dumps({"files": recorded}, indent=1) + "\n"
                _write_atomically(sums, text, durable=False)
            except OSError as error:
                # Unindexed files are discarded by the next process: correct, not cached.
                _warn_once(sums.parent, error, "compiled kernels are not kept")

    function_cache.load_overload = load_overload
    function_cache.save_overload = save_overload


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
    "CacheWarning",
    "CompileStats",
    "cache_path",
    "checked_body",
    "default_cache_dir",
    "execute_file",
    "guard_for",
    "load_source",
    "numba_compile_stats",
    "source_hash",
    "store_source",
    "verified_body",
    "write_checked",
]
