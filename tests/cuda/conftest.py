"""
The CUDA target's tests, run in Numba's CUDA simulator in a pytest process of their own.

`NUMBA_ENABLE_CUDASIM=1` must be set before Numba is imported, so these tests cannot share
a process with the rest of the suite, which imports Numba's CPU target. A plain
`python -m pytest` collects this folder but skips its files unless the simulator is on
(or `TESSC_CUDA_HARDWARE=1` says a real GPU is there); `tests/test_cuda_suite.py` runs
`python -m pytest tests/cuda` in a subprocess with the variable set and fails with its
report when any test here fails.

The simulator runs every CUDA thread as a Python thread: shapes stay small, blocks too.
"""

from __future__ import annotations

import os

from tessc.runtime.numba_cuda_compat import restore_numpy_row_stack, wake_simulator_on_barriers

restore_numpy_row_stack()  # before any test module's `from numba import cuda`: NumPy >= 2.5

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
ENABLED = SIMULATOR or os.environ.get("TESSC_CUDA_HARDWARE") == "1"
if SIMULATOR:
    wake_simulator_on_barriers()  # also for the tests that launch numba.cuda kernels directly

collect_ignore_glob = [] if ENABLED else ["test_*.py"]
