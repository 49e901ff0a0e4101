"""
Session defaults for the test suite.

Compiled programs go to one on-disk kernel cache in the repository (`.tessc-cache/`,
git-ignored) unless `TESSC_CACHE_DIR` says otherwise, so a second run of the suite — and
every tool the lit tests start, which inherit the environment — compiles nothing it
compiled before. Tests about the cache itself use their own temporary directories.

Parallel kernels run on all of Numba's threads however loaded the machine is
(`TESSC_ALL_THREADS`, `tessc.runtime.threads.idle_threads`): a test's thread count is
the one it sets.
"""

from __future__ import annotations

import os
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent

os.environ.setdefault("TESSC_CACHE_DIR", str(REPOSITORY / ".tessc-cache"))
os.environ.setdefault("TESSC_ALL_THREADS", "1")
