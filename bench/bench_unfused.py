"""
The unfused cpu pipeline against NumPy (and PyTorch, when importable), side by side.

Two workloads:

- the elementwise chain `relu(x * w + b) * sigmoid(x) - 0.5 * x` on f32 vectors of 2^22,
  2^23 and 2^24 elements: `cpu-unfused` runs one kernel per op (each reads and writes a
  whole array, as NumPy's and eager PyTorch's ops do); `cpu` fuses the chain;
- a matmul `(512, 1024) @ (1024, 512)` in f32: a parallel i-k-j loop nest against BLAS.

Each program is compiled (or loaded from the disk cache) and called once before timing;
the figure is the median over `--rounds` rounds of `--repeat` back-to-back calls, the
contenders alternating between rounds (see `timed_medians`). Ratios are tessc's time over
the other's: below 1 means tessc is faster. Reproduce with

    python bench/bench_unfused.py [--sizes 22 23 24] [--repeat 5] [--rounds 3]
                                  [--pipelines cpu-unfused cpu]

On a machine shared with other work, parallel kernels wait for the scheduler at every
launch (all their threads must run); prefix `NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1` for stable single-thread ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tessc.compiler import compile_module
from tessc.reference import parse_module

PAUSE_S = 0.3

CHAIN = """
func.func @chain(%x: tensor<{n}xf32>, %w: tensor<{n}xf32>, %b: tensor<{n}xf32>)
    -> tensor<{n}xf32> {{
  %0 = tess.mul %x, %w : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  %1 = tess.add %0, %b : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  %2 = tess.relu %1 : tensor<{n}xf32>
  %3 = tess.sigmoid %x : tensor<{n}xf32>
  %4 = tess.mul %2, %3 : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  %half = tess.fill 5.000000e-01 : tensor<f32>
  %5 = tess.mul %half, %x : tensor<f32>, tensor<{n}xf32> -> tensor<{n}xf32>
  %6 = tess.sub %4, %5 : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  func.return %6 : tensor<{n}xf32>
}}
"""

MATMUL = """
func.func @matmul(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = tess.matmul %a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32> -> tensor<{m}x{n}xf32>
  func.return %0 : tensor<{m}x{n}xf32>
}}
"""


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


def timed_medians(
    contenders: dict[str, Callable[[], object]], repeat: int, rounds: int
) -> dict[str, float]:
    """Median ms of each contender over `rounds` rounds of `repeat` back-to-back calls.

    Rounds alternate the contenders so that load from other processes hits all of them
    alike; within a round a contender runs alone after a pause, because the thread pools
    of OpenBLAS, PyTorch and Numba spin for a while after a call and would steal the cores
    of whoever runs next (measured: NumPy's matmul 5x slower right after PyTorch's).
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, function in contenders.items():
            time.sleep(PAUSE_S)
            function()  # warm: compile or load, fault in pages
            for _ in range(repeat):
                start = time.perf_counter()
                function()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def numpy_chain(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    sigmoid = np.float32(1) / (np.float32(1) + np.exp(-x))
    return np.maximum(x * w + b, np.float32(0)) * sigmoid - np.float32(0.5) * x


def torch_module() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def bench_chain(n: int, repeat: int, rounds: int, pipelines: list[str]) -> dict:
    module = parse_module(CHAIN.format(n=n))
    rng = np.random.default_rng(0)
    x, w, b = (rng.uniform(-2, 2, n).astype(np.float32) for _ in range(3))
    expected = numpy_chain(x, w, b)
    contenders: dict[str, Callable[[], object]] = {"numpy": lambda: numpy_chain(x, w, b)}
    for pipeline in pipelines:
        program = compile_module(module, "chain", pipeline)
        (result,) = program(x, w, b)
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
        contenders[pipeline] = lambda program=program: program(x, w, b)
    torch = torch_module()
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(v) for v in (x, w, b))
        contenders["torch"] = lambda: torch.relu(tx * tw + tb) * torch.sigmoid(tx) - 0.5 * tx
    return {
        "workload": f"chain 2^{n.bit_length() - 1}",
        **timed_medians(contenders, repeat, rounds),
    }


def bench_matmul(m: int, k: int, n: int, repeat: int, rounds: int, pipelines: list[str]) -> dict:
    module = parse_module(MATMUL.format(m=m, k=k, n=n))
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    contenders: dict[str, Callable[[], object]] = {"numpy": lambda: a @ b}
    for pipeline in pipelines:
        program = compile_module(module, "matmul", pipeline)
        (result,) = program(a, b)
        np.testing.assert_allclose(result, a @ b, rtol=1e-4, atol=1e-3)
        contenders[pipeline] = lambda program=program: program(a, b)
    torch = torch_module()
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        contenders["torch"] = lambda: torch.matmul(ta, tb)
    row = {"workload": f"matmul ({m},{k})@({k},{n})", **timed_medians(contenders, repeat, rounds)}
    row["gflops"] = {name: 2 * m * k * n / (row[name] * 1e6) for name in contenders}
    return row


def print_table(rows: list[dict], contenders: list[str]) -> None:
    """One line per workload and contender: median ms, then time / NumPy's and / PyTorch's."""
    table = [["workload", "contender", "ms", "/ numpy", "/ torch"]]
    for row in rows:
        for index, name in enumerate(c for c in contenders if c in row):
            ratios = [
                f"{row[name] / row[base]:.2f}x" if base in row else "-"
                for base in ("numpy", "torch")
            ]
            table.append([row["workload"] if index == 0 else "", name, f"{row[name]:.2f}", *ratios])
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for index, line in enumerate(table):
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [cell.rjust(width) for cell, width in zip(line[2:], widths[2:], strict=True)]
        print("  ".join(cells).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[22, 23, 24], help="log2 sizes")
    parser.add_argument("--repeat", type=int, default=5, help="calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pipelines",
        nargs="+",
        default=["cpu-unfused", "cpu"],
        help="tessc pipelines to time (default: cpu-unfused cpu)",
    )
    args = parser.parse_args()
    print(describe_machine())
    pipelines = args.pipelines

    print("# parallel kernels need every core: on a busy machine they wait for the scheduler")
    print(f"# reproduce: python bench/bench_unfused.py {' '.join(sys.argv[1:])}".rstrip())
    rows = [bench_chain(1 << log2, args.repeat, args.rounds, pipelines) for log2 in args.sizes]
    matmul = bench_matmul(512, 1024, 512, args.repeat, args.rounds, pipelines)
    rows.append(matmul)
    print_table(rows, [*pipelines, "numpy", "torch"])
    rates = ", ".join(f"{p} {g:.1f}" for p, g in matmul["gflops"].items())
    print(f"# matmul GFLOP/s: {rates}")
    print("# ratio = tessc time / baseline time (median of calls; below 1: tessc faster)")


if __name__ == "__main__":
    main()
