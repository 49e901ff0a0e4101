"""
tessc's runtime: runs the Python/Numba source that codegen produced, reading no IR.

- `cache.load_source(source)`: the module for a generated source, through a content-hashed,
  verified, atomically written file cache (`$TESSC_CACHE_DIR`, default `~/.cache/tessc`)
  that Numba's own `cache=True` sits beside;
- `program_cache.lookup(key)`/`record(key, source)`: the warm-start index, from a key the
  front computes for a program to the generated source it compiled to;
- `executor.Executable(module, entry)`: the entry function, called on NumPy arrays,
  checked against the module's `TESSC_SIGNATURES`, returning a tuple of outputs.
"""

from tessc.runtime import program_cache
from tessc.runtime.cache import load_source
from tessc.runtime.executor import Executable

__all__ = ["Executable", "load_source", "program_cache"]
