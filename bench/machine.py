"""The machine a benchmark ran on, printed at the top of every bench script's output."""

from __future__ import annotations

import os
import platform


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def describe_machine() -> str:
    """CPU model, vector extensions, cores and Numba's threads, load, library versions."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    flags = cpu_flags()
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    # Numba's OpenMP threads first, with tessc's passive wait policy: an OpenMP library
    # that torch loads first keeps its spinning workers, and tessc's parfors then ran on
    # them (the transformer block step on 2 threads at load ~4: 83 ms, not 3.0 ms).
    from tessc.runtime.threads import start_numba_threads

    start_numba_threads()
    versions = []
    for name in ("numpy", "numba", "torch", "jax"):
        try:
            module = __import__(name)
            versions.append(f"{name} {module.__version__}")
        except ImportError:
            versions.append(f"{name} not installed")
    try:
        import numba

        threads = f"; Numba uses {numba.config.NUMBA_NUM_THREADS} threads"
    except ImportError:
        threads = ""
    return (
        f"cpu: {model}; {vector}; {os.cpu_count()} logical cores{threads}\n"
        f"load average: {load} (other work on the machine inflates times: compare ratios)\n"
        f"{', '.join(versions)}"
    )


__all__ = ["cpu_flags", "describe_machine"]
