"""
The threaded runtime on W1 (issue 26 §1): `relu(x*w + b) * sigmoid(x) - 0.5*x`, 2^24 f32.

Every case runs in a fresh process (`NUMBA_NUM_THREADS` set per case) that makes its inputs,
calls once (compile or load from the disk caches, first touch), then times `--calls` calls;
it reports each call's wall time, minor page faults and system CPU time. Cases:

- `limit triad`: the bandwidth limit, a Numba `prange` loop with W1's streams (read x, w,
  b; write one array) and one multiply-add, into a preallocated array; `limit copyto`:
  `np.copyto` (one stream in, one out; NumPy, one thread): its GB/s, for scale;
- `jit drop`: `ts.jit(w1)` called as users do, the result freed by every call;
  `jit drop, no cache`: the same with `TESSC_OUTPUT_CACHE_BYTES=0` (`runtime/output_cache`);
  `jit donated`: `jit(w1, donate_argnums=2)`, `b = w1(x, w, b)`: computed in place;
- `pool ...` / `parfor ...`: the same compiled program (`compile_module`) with its kernel
  threaded by tessc's pool (`runtime/threads.py`) or as a Numba parfor
  (`threaded_kernels=False`): `drop` (the `Executable`, a result per call) and `prealloc`
  (the host function into one preallocated array);
- `cold ...`: the first call with empty tessc and Numba caches (trace, passes, compile,
  run), through `jit` (pool) and through `compile_module` as a parfor;
- with `--hold`: `jit hold` and `numpy hold` keep every result (fresh memory each call).

Printed per case: the first call, then the median, min, max and max/min over the timed
calls, median / limit, median faults and system ms per call.

    python bench/bench_threads.py [--threads 2] [--calls 10] [--hold] [--no-cold]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from machine import describe_machine

HERE = Path(__file__).resolve().parent
N = 1 << 24

CASES = [
    "limit triad",
    "limit copyto",
    "jit drop",
    "jit drop, no cache",
    "jit donated",
    "pool drop",
    "parfor drop",
    "pool prealloc",
    "parfor prealloc",
]
HOLD_CASES = ["jit hold", "numpy hold"]
COLD_CASES = ["cold jit (pool)", "cold parfor"]


def inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x, w, b = (rng.uniform(-2, 2, N).astype(np.float32) for _ in range(3))
    return x, w, b


def w1_source(x, w, b):  # the user's function (traced by `ts.jit`)
    import tessc as ts

    return (x * w + b).relu() * ts.sigmoid(x) - 0.5 * x


def program(threaded: bool):
    from bench_unfused import CHAIN

    from tessc.compiler import compile_module
    from tessc.reference import parse_module

    return compile_module(
        parse_module(CHAIN.format(n=N)), "chain", "cpu", threaded_kernels=threaded
    )


def contender(case: str) -> Callable[[], object]:
    """The call to time for `case` (its first call compiles or loads it)."""
    x, w, b = inputs()
    out = np.empty_like(x)
    if case == "limit triad":
        import numba

        @numba.njit(parallel=True, fastmath=True, cache=True)
        def triad(x, w, b, out):
            for i in numba.prange(x.shape[0]):
                out[i] = x[i] * w[i] + b[i]

        return lambda: triad(x, w, b, out)
    if case == "limit copyto":
        return lambda: np.copyto(out, x)
    if case == "numpy hold":
        held: list[np.ndarray] = []
        return lambda: held.append(x * np.float32(2) + np.float32(1))
    if case.startswith("jit"):
        import tessc as ts

        if case == "jit donated":
            fn = ts.jit(w1_source, donate_argnums=2)
            state = [b.copy()]

            def donated() -> None:
                result = fn(x, w, state[0])
                assert result is state[0], "W1 donated did not run in place"
                state[0] = result

            return donated
        fn = ts.jit(w1_source)
        if case == "jit hold":
            kept: list[np.ndarray] = []
            return lambda: kept.append(fn(x, w, b))
        return lambda: fn(x, w, b)
    if case.startswith(("pool", "parfor", "cold parfor")):
        compiled = program(threaded=case.startswith("pool"))
        if case.endswith("prealloc"):
            host = compiled.function
            return lambda: host(x, w, b, out)
        return lambda: compiled(x, w, b)
    raise ValueError(f"unknown case {case!r}")


def child(case: str, calls: int) -> None:
    if case.startswith("cold jit"):
        import tessc as ts

        x, w, b = inputs()
        start = time.perf_counter()
        ts.jit(w1_source)(x, w, b)
        print(json.dumps({"first_ms": (time.perf_counter() - start) * 1e3, "calls": []}))
        return
    if case.startswith("cold"):
        import numba  # noqa: F401  (imported before the clock, as for `jit`)

        import tessc  # noqa: F401

        x, w, b = inputs()
        start = time.perf_counter()
        program(threaded=False)(x, w, b)
        print(json.dumps({"first_ms": (time.perf_counter() - start) * 1e3, "calls": []}))
        return
    call = contender(case)
    start = time.perf_counter()
    call()
    first_ms = (time.perf_counter() - start) * 1e3
    rows = []
    for _ in range(calls):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        call()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        rows.append(
            (
                wall * 1e3,
                after.ru_minflt - before.ru_minflt,
                (after.ru_stime - before.ru_stime) * 1e3,
            )
        )
    print(json.dumps({"first_ms": first_ms, "calls": rows}))


def run_case(case: str, threads: int, calls: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as cache:
        if case.startswith("cold"):
            env.update(TESSC_CACHE_DIR=f"{cache}/tessc", NUMBA_CACHE_DIR=f"{cache}/numba")
        if case.endswith("no cache"):
            env["TESSC_OUTPUT_CACHE_BYTES"] = "0"
        done = subprocess.run(
            [sys.executable, __file__, "--child", case, "--calls", str(calls)],
            env=env,
            cwd=HERE,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["?"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="2", help="comma-separated thread counts")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--hold", action="store_true", help="also the held-result cases")
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--cases", default="", help="comma-separated subset of the cases")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls)
        return
    cases = CASES + (HOLD_CASES if args.hold else []) + ([] if args.no_cold else COLD_CASES)
    if args.cases:
        cases = [c for c in cases if c in args.cases.split(",")]
    print(describe_machine())
    print(f"# reproduce: python bench/bench_threads.py {' '.join(sys.argv[1:])}".rstrip())
    stream_bytes = 4 * N * 4  # W1: three arrays in, one out
    for threads in (int(t) for t in args.threads.split(",")):
        print(f"\nW1 2^24 f32, NUMBA_NUM_THREADS={threads}, {args.calls} calls after the first")
        header = f"{'case':<20} {'first':>8} {'median':>8} {'min':>7} {'max':>7} {'max/min':>7}"
        print(f"{header} {'/limit':>7} {'faults':>7} {'sys ms':>7}  load")
        limit = None
        for case in cases:
            result = run_case(case, threads, args.calls)
            load = f"{os.getloadavg()[0]:.1f}"
            if "error" in result:
                print(f"{case:<20} failed: {result['error'][0]}")
                continue
            if not result["calls"]:
                print(f"{case:<20} {result['first_ms']:8.1f} {'':>54}  {load}")
                continue
            walls = [row[0] for row in result["calls"]]
            median = statistics.median(walls)
            if case == "limit triad":
                limit = median
            ratio = f"{median / limit:6.2f}x" if limit else f"{'':>7}"
            faults = statistics.median(row[1] for row in result["calls"])
            system = statistics.median(row[2] for row in result["calls"])
            print(
                f"{case:<20} {result['first_ms']:8.1f} {median:8.2f} {min(walls):7.2f} "
                f"{max(walls):7.2f} {max(walls) / min(walls):6.2f}x {ratio} {faults:7.0f} "
                f"{system:7.1f}  {load}"
            )
            if case.startswith("limit"):
                moved = stream_bytes if case == "limit triad" else 2 * N * 4
                print(f"{'':<20} {moved / median / 1e6:8.1f} GB/s (streams read + written)")
    print("\n# ms; /limit = median / the triad's median; faults, sys ms: median per call;")
    print("# load: the 1-minute load average after the case")


if __name__ == "__main__":
    main()
