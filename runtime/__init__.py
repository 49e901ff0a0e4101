"""
tessc's runtime: runs the Python/Numba source that codegen produced, reading no IR.

- `cache.load_source(source)`: the module for a generated source, through a content-hashed,
  verified, atomically written file cache (`$TESSC_CACHE_DIR`, default `~/.cache/tessc`)
  that Numba's own `cache=True` sits beside;
- `executor.Executable(module, entry)`: the entry function, called on NumPy arrays,
  checked against the module's `TESSC_SIGNATURES`, returning a tuple of outputs.
"""

from tessc.runtime.cache import load_source
from tessc.runtime.executor import Executable

__all__ = ["Executable", "load_source"]
