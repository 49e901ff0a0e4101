"""
tessc's runtime: runs the Python/Numba source that codegen produced, reading no IR.

- `cache.load_source(source)`: the module for a generated source, through a content-hashed,
  verified, atomically written file cache (`$TESSC_CACHE_DIR`, default `~/.cache/tessc`)
  that Numba's own `cache=True` sits beside;
- `program_cache.lookup(key)`/`record(key, source)`: the warm-start index, from a key the
  front computes for a program to the generated source it compiled to;
- `executor.Executable(module, entry)`: the entry function, called on NumPy arrays,
  checked against the module's `TESSC_SIGNATURES`, returning a tuple of outputs;
  `host_memory`: its buffers (aligned, the workspace, arenas found in the caller's arrays,
  outputs carved from one buffer per dtype);
- `cuda.CudaExecutable(module, entry)`: the same for a CUDA module (`TESSC_TARGET = "cuda"`),
  on host or device arrays (imported only for such a module: Numba's CUDA target is an
  optional extra);
- `cuda_launch`: each CUDA launch's grid from the device's limits, and the launch counter;
  `cuda_memory`: the pool a CUDA program's outputs come from, strided device copies;
- `executable(module, entry)`: whichever of the two the module's target needs;
- `arena.arena(arrays)`: arrays as views of one contiguous buffer, the layout a
  horizontally fused program reads without a copy (`tessc.arena`).
"""

import importlib
from types import ModuleType
from typing import Any

from tessc.runtime import abi

_EXPORTS = {"Executable": "tessc.runtime.executor", "load_source": "tessc.runtime.cache"}
"""Imported on first use: `tessc.lowering` imports `tessc.runtime.abi`, which must not
load NumPy and the cache into `tessc-opt`."""


def __getattr__(name: str) -> Any:
    if name == "program_cache":
        return importlib.import_module("tessc.runtime.program_cache")
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tessc.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def executable(module: ModuleType, entry: str) -> Any:
    """The callable for host function `entry` of a loaded module, for its target."""
    if getattr(module, abi.TARGET, abi.CPU_TARGET) == abi.CUDA_TARGET:
        from tessc.runtime.cuda import CudaExecutable

        return CudaExecutable(module, entry)
    from tessc.runtime.executor import Executable

    return Executable(module, entry)


__all__ = ["Executable", "executable", "load_source", "program_cache"]
