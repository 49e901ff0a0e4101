"""
The threaded runtime on W1 (issue 26 §1): `relu(x*w + b) * sigmoid(x) - 0.5*x`, 2^24 f32.

Every case runs in a fresh process (`NUMBA_NUM_THREADS` set per case) that makes its inputs,
calls once (compile or load from the disk caches, first touch), then times `--calls` calls;
it reports each call's wall time, minor page faults and system CPU time. Cases:

- `limit triad`: the bandwidth limit, a Numba `prange` loop with W1's streams (read x, w,
  b; write one array) and one multiply-add, into a preallocated array; `limit triad (pool)`:
  the same loop run by tessc's pool (a parfor's OpenMP workers spin-wait, which on a
  machine busy with other work costs them far more than the loop); `limit copyto`:
  `np.copyto` (one stream in, one out; NumPy, one thread): its GB/s, for scale;
- `jit drop`: `ts.jit(w1)` called as users do, the result freed by every call;
  `jit drop no cache`: the same with `TESSC_OUTPUT_CACHE_BYTES=0` (`runtime/output_cache`);
  `jit donated`: `jit(w1, donate_argnums=2)`, `b = w1(x, w, b)`: computed in place;
- `pool ...` / `parfor ...`: the same compiled program (`compile_module`) with its kernel
  threaded by tessc's pool (`runtime/threads.py`) or as a Numba parfor
  (`threaded_kernels=False`): `drop` (the `Executable`, a result per call) and `prealloc`
  (the host function into one preallocated array); `A/B pool` / `A/B parfor`: both
  preallocated forms in one process, their calls alternating (`same process`);
- `cold ...`: the first call with empty tessc and Numba caches (trace, passes, compile,
  run), through `jit` (pool) and through `compile_module` as a parfor;
- with `--hold`: `jit hold` and `numpy hold` keep every result (fresh memory each call).

Printed per case: the first call, the median, max/min over the timed calls, median / limit,
CPU ms, page faults and system ms per call (see the legend the script prints). With
`--rounds R` every case runs in R fresh processes, the rounds interleaved, so that load
from other work spreads over all cases alike.

    python bench/bench_threads.py [--threads 2] [--calls 10] [--rounds 1] [--hold] [--no-cold]
                                  [--log2 24] [--cases "limit triad,same process"]

The environment passes to the cases (`OMP_WAIT_POLICY=passive`, `NUMBA_THREADING_LAYER=...`
change the parfor cases).
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
N = 1 << int(os.environ.get("BENCH_THREADS_LOG2", "24"))
"""W1's length (`--log2`, passed to the cases' processes in the environment)."""

CASES = [
    "limit triad",
    "limit triad (pool)",
    "limit copyto",
    "jit drop",
    "jit drop no cache",
    "jit donated",
    "pool drop",
    "parfor drop",
    "pool prealloc",
    "parfor prealloc",
    "same process",
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
    if case == "limit triad (pool)":
        import numba

        from tessc.runtime.threads import parallel_for

        @numba.njit(nogil=True, fastmath=True, cache=True)
        def triad_share(lo, hi, x, w, b, out):
            for i in range(np.uint64(lo), np.uint64(hi)):  # unsigned: no wraparound check
                out[i] = x[i] * w[i] + b[i]

        return lambda: parallel_for(triad_share, x.shape[0], x, w, b, out)
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


def cpu_seconds() -> float:
    """CPU time of this process and the children it waited for (the compile worker)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def child(case: str, calls: int) -> None:
    if case.startswith("cold"):
        import numba  # noqa: F401  (imported before the clock in both cold cases)

        import tessc as ts

        x, w, b = inputs()
        cpu, start = cpu_seconds(), time.perf_counter()
        if case.startswith("cold jit"):
            ts.jit(w1_source)(x, w, b)
        else:
            program(threaded=False)(x, w, b)
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        print(json.dumps({"first_ms": wall * 1e3, "first_cpu_ms": cpu * 1e3, "calls": []}))
        return
    if case == "same process":
        print(json.dumps(same_process(calls)))
        return
    call = contender(case)
    start = time.perf_counter()
    call()
    first_ms = (time.perf_counter() - start) * 1e3
    rows = [timed(call) for _ in range(calls)]
    print(json.dumps({"first_ms": first_ms, "calls": rows}))


def timed(call: Callable[[], object]) -> tuple[float, int, float, float]:
    """One call: wall ms, minor faults, system ms, CPU ms (all threads)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    call()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    system = after.ru_stime - before.ru_stime
    return wall * 1e3, after.ru_minflt - before.ru_minflt, system * 1e3, cpu * 1e3


def same_process(calls: int) -> dict:
    """The pool and the parfor forms of one program, preallocated, in one process: their
    calls alternate (a pause between, for OpenMP's workers to stop spinning), so that
    load from other work hits both alike."""
    forms = {"A/B pool": contender("pool prealloc"), "A/B parfor": contender("parfor prealloc")}
    rows: dict[str, list] = {name: [] for name in forms}
    firsts = {}
    for name, call in forms.items():
        start = time.perf_counter()
        call()
        firsts[name] = (time.perf_counter() - start) * 1e3
    for _ in range(calls):
        for name, call in forms.items():
            time.sleep(0.05)
            rows[name].append(timed(call))
    return {name: {"first_ms": firsts[name], "calls": rows[name]} for name in forms}


def run_case(case: str, threads: int, calls: int, log2: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), BENCH_THREADS_LOG2=str(log2))
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
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def report(case: str, runs: list[dict], limit: float | None) -> float | None:
    """One line for `case` over its rounds; returns its median (of round medians)."""
    if any("error" in run for run in runs):
        error = next(run["error"][0] for run in runs if "error" in run)
        print(f"{case:<20} failed: {error}")
        return None
    loads = f"{min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f}"
    first = statistics.median(run["first_ms"] for run in runs)
    if not runs[0]["calls"]:
        cpu = statistics.median(run["first_cpu_ms"] for run in runs)
        print(f"{case:<20} {first:8.1f} {'':>30} cpu {cpu:7.1f} ms (first call) {loads:>12}")
        return None
    medians, spreads = [], []
    for run in runs:
        walls = [row[0] for row in run["calls"]]
        medians.append(statistics.median(walls))
        spreads.append(max(walls) / min(walls))
    median = statistics.median(medians)
    spread = statistics.median(spreads)
    rows = [row for run in runs for row in run["calls"]]
    faults = statistics.median(row[1] for row in rows)
    system = statistics.median(row[2] for row in rows)
    cpu = statistics.median(row[3] for row in rows)
    ratio = f"{median / limit:6.2f}x" if limit else f"{'':>7}"
    first3 = "/".join(f"{row[0]:.0f}" for row in runs[0]["calls"][:3])
    print(
        f"{case:<20} {first:8.1f} {median:8.2f} {min(medians):7.2f} {max(medians):7.2f} "
        f"{spread:6.2f}x {ratio} {cpu:7.1f} {faults:6.0f} {system:6.1f} {first3:>12} {loads:>9}"
    )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="2", help="comma-separated thread counts")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per case")
    parser.add_argument("--hold", action="store_true", help="also the held-result cases")
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--cases", default="", help="comma-separated subset of the cases")
    parser.add_argument("--log2", type=int, default=24, help="W1 on 2^LOG2 floats")
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
    for threads in (int(t) for t in args.threads.split(",")):
        print(
            f"\nW1 2^{args.log2} f32, NUMBA_NUM_THREADS={threads}: {args.rounds} fresh "
            f"process(es) per case, rounds interleaved; {args.calls} calls timed after the first"
        )
        print(
            f"{'case':<20} {'first':>8} {'median':>8} {'lo':>7} {'hi':>7} {'max/min':>7} "
            f"{'/limit':>7} {'cpu ms':>7} {'faults':>6} {'sys ms':>6} {'calls 1-3':>12} "
            f"{'load':>9}"
        )
        runs: dict[str, list[dict]] = {}
        for _ in range(args.rounds):
            for case in cases:
                result = run_case(case, threads, args.calls, args.log2)
                if case == "same process" and "error" not in result:
                    for name in ("A/B pool", "A/B parfor"):
                        runs.setdefault(name, []).append({**result[name], "load": result["load"]})
                else:
                    runs.setdefault(case, []).append(result)
        # The limit: the best call of either triad, as STREAM reports it.
        triads = [
            row[0]
            for case, case_runs in runs.items()
            if case.startswith("limit triad")
            for run in case_runs
            for row in run.get("calls", [])
        ]
        limit = min(triads) if triads else None
        for case, case_runs in runs.items():
            median = report(case, case_runs, limit)
            if case.startswith("limit") and median:
                moved = (4 if case.startswith("limit triad") else 2) * (1 << args.log2) * 4
                print(f"{'':<20} {moved / median / 1e6:8.1f} GB/s (bytes read + written)")
    print(
        "\n# ms. first: the first call (compile or load; cold: empty caches). median: of the"
        "\n# rounds' medians (lo, hi: their range); max/min: over a round's calls (median of"
        "\n# rounds); /limit: median / the best triad call (as STREAM reports); cpu ms,"
        "\n# faults, sys ms: per call (median; cpu: all threads); calls 1-3: the first round's"
        "\n# first three timed calls; load: the 1-minute load average after each process."
    )


if __name__ == "__main__":
    main()
