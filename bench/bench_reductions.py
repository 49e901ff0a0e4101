"""
A reduction over the leading dim, `x.sum(dim=0)` of (4096, 512) f32: tessc (parallel over
blocks of output columns, `tess-parallel-columns`), tessc with that pass left out (one
thread), NumPy and PyTorch, in one run; medians over rounds, contenders alternating.

    python bench/bench_reductions.py [--rounds 9] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from machine import describe_machine

import tessc as ts
from tessc.pipelines import PIPELINES, Pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_reductions.py " + " ".join(sys.argv[1:]))
    cpu = PIPELINES["cpu"]
    serial = cpu.passes[2].replace("tess-parallel-columns,", "")
    PIPELINES["cpu-no-columns"] = Pipeline(
        "cpu-no-columns", (*cpu.passes[:2], serial), "numba", "cpu without tess-parallel-columns"
    )
    x = np.random.default_rng(0).standard_normal((4096, 512)).astype(np.float32)
    contenders = {
        "tessc (column blocks in parallel)": ts.jit(lambda x: x.sum(dim=0)),
        "tessc, one thread (before)": ts.jit(lambda x: x.sum(dim=0), target="cpu-no-columns"),
        "NumPy x.sum(0)": lambda x: x.sum(0),
    }
    try:
        import torch

        torch.set_num_threads(2)
        tx = torch.from_numpy(x)
        contenders["PyTorch x.sum(0)"] = lambda _: tx.sum(0)
    except ImportError:
        pass
    expected = x.sum(0, dtype=np.float64)
    for name, fn in contenders.items():
        np.testing.assert_allclose(np.asarray(fn(x)), expected, rtol=1e-3, atol=1e-2, err_msg=name)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            for _ in range(args.repeat):
                fn(x)
            times[name].append((time.perf_counter() - start) / args.repeat)
    base = statistics.median(times["tessc (column blocks in parallel)"])
    print("\n| x.sum(dim=0), (4096, 512) f32 | ms | it / tessc |\n| --- | ---: | ---: |")
    for name, samples in times.items():
        ms = statistics.median(samples)
        print(f"| {name} | {1e3 * ms:.3f} | {ms / base:.2f}x |")


if __name__ == "__main__":
    main()
