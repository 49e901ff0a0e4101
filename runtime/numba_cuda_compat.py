"""
numba-cuda against NumPy releases newer than it knows: the one patch, version-guarded.

numba-cuda 0.30.4 (the newest release, 2026-11) registers an overload for `np.row_stack`
when its CUDA target loads (`numba_cuda/numba/cuda/np/arrayobj.py`, unguarded; Numba's CPU
target guards the same line). NumPy 2.5 removed `row_stack`, an alias of `vstack` since
2.0, so under NumPy >= 2.5 the first `from numba import cuda` fails with an AttributeError
and the `cuda` target cannot start. `restore_numpy_row_stack()` gives NumPy the alias back
before numba-cuda loads, and only when both sides need it: a NumPy without `row_stack` and
a numba-cuda no newer than `LAST_AFFECTED` (re-check this when numba-cuda releases).
"""

from __future__ import annotations

import importlib.metadata
import warnings

import numpy as np

LAST_AFFECTED = (0, 30)  # numba-cuda (major, minor) releases that reference np.row_stack


def numba_cuda_version() -> tuple[int, ...] | None:
    try:
        text = importlib.metadata.version("numba-cuda")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def numpy_has_row_stack() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(np, "row_stack", None) is not None


def restore_numpy_row_stack() -> bool:
    """Alias `np.row_stack` to `np.vstack` where numba-cuda needs it; True if it did."""
    version = numba_cuda_version()
    if version is None or version > LAST_AFFECTED or numpy_has_row_stack():
        return False
    np.row_stack = np.vstack  # type: ignore[attr-defined]
    return True
