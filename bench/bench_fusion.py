"""
What fusion buys, side by side with NumPy and PyTorch in one run (the fusion issue's W1, W2).

- W1: `relu(x*w + b) * sigmoid(x) - 0.5*x` on 2^24 f32: tessc fused (`cpu`), unfused
  (`cpu-unfused`, one kernel per op), NumPy, PyTorch eager and `torch.compile` (when it
  works here), and the memory-bandwidth limit measured in the same run: a Numba kernel with
  the same access pattern (read x, w, b; write one array) and trivial arithmetic.
- W2: the seed's zip+reduce, `(N,K,1) * (1,K,M)` summed over K, at N=K=M=256 and 512 f32:
  tessc (fused into one tiled contraction, no (N,K,M) intermediate) against NumPy's
  broadcast+sum and `np.matmul` on the same data. Time, and the peak extra memory: the
  static plan's `tess.peak_bytes` for tessc (outputs + arena), tracemalloc's peak for NumPy.

Times are medians of `--rounds` rounds of `--repeat` calls, contenders alternating between
rounds (`bench_unfused.timed_medians`). Ratios are tessc's time over the other's: below 1,
tessc is faster.

    python bench/bench_fusion.py [--repeat 5] [--rounds 3] [--no-torch-compile]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from collections.abc import Callable

import numba
import numpy as np
from bench_unfused import CHAIN, numpy_chain, timed_medians, torch_module

from tessc.compiler import compile_module, lower_module
from tessc.dialects import contract
from tessc.reference import parse_module

SEED_ZIP_REDUCE = """
func.func @seed(%a: tensor<{n}x{k}x1xf32>, %b: tensor<1x{k}x{m}xf32>) -> tensor<{n}x{m}xf32> {{
  %0 = tess.mul %a, %b : tensor<{n}x{k}x1xf32>, tensor<1x{k}x{m}xf32> -> tensor<{n}x{k}x{m}xf32>
  %1 = tess.sum %0 dims = [1] : tensor<{n}x{k}x{m}xf32> -> tensor<{n}x{m}xf32>
  func.return %1 : tensor<{n}x{m}xf32>
}}
"""


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


@numba.njit(parallel=True, fastmath=True, cache=True)
def bandwidth_limit(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """W1's memory traffic (three streams in, one out) with next to no arithmetic."""
    for i in numba.prange(x.shape[0]):
        out[i] = x[i] + w[i] - b[i]


def peak_bytes(module, entry: str) -> int:
    """The static peak (outputs + arena) that `tess-memory-plan` wrote on the host."""
    lowered = lower_module(module, "loops", pipeline="cpu")
    for op in lowered.ops:
        if getattr(op, "sym_name", None) is not None and op.sym_name.data == entry:
            return contract.PEAK_BYTES.get(op)
    raise KeyError(entry)


def traced_peak(function: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_w1(repeat: int, rounds: int, use_torch_compile: bool) -> dict[str, float]:
    n = 1 << 24
    module = parse_module(CHAIN.format(n=n))
    rng = np.random.default_rng(0)
    x, w, b = (rng.uniform(-2, 2, n).astype(np.float32) for _ in range(3))
    expected = numpy_chain(x, w, b)
    out = np.empty_like(x)
    contenders: dict[str, Callable[[], object]] = {
        "bandwidth limit": lambda: bandwidth_limit(x, w, b, out),
        "numpy": lambda: numpy_chain(x, w, b),
    }
    for pipeline in ("cpu", "cpu-unfused"):
        program = compile_module(module, "chain", pipeline)
        np.testing.assert_allclose(program(x, w, b)[0], expected, rtol=1e-5, atol=1e-5)
        contenders[f"tessc {pipeline}"] = lambda program=program: program(x, w, b)
    torch = torch_module()
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(v) for v in (x, w, b))

        def eager(x, w, b):
            return torch.relu(x * w + b) * torch.sigmoid(x) - 0.5 * x

        contenders["torch eager"] = lambda: eager(tx, tw, tb)
        if use_torch_compile:
            try:
                compiled = torch.compile(eager)
                compiled(tx, tw, tb)
                contenders["torch.compile"] = lambda: compiled(tx, tw, tb)
            except Exception as error:  # no compiler toolchain: report and go on
                print(f"# torch.compile unavailable: {type(error).__name__}: {error}")
    return timed_medians(contenders, repeat, rounds)


def bench_w2(size: int, repeat: int, rounds: int) -> tuple[dict[str, float], dict[str, int]]:
    module = parse_module(SEED_ZIP_REDUCE.format(n=size, k=size, m=size))
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (size, size, 1)).astype(np.float32)
    b = rng.uniform(-1, 1, (1, size, size)).astype(np.float32)
    a2, b2 = a[:, :, 0], b[0]
    program = compile_module(module, "seed", "cpu")
    np.testing.assert_allclose(program(a, b)[0], a2 @ b2, rtol=1e-4, atol=1e-3)
    contenders: dict[str, Callable[[], object]] = {
        "tessc cpu": lambda: program(a, b),
        "numpy broadcast+sum": lambda: (a * b).sum(axis=1),
        "np.matmul": lambda: a2 @ b2,
    }
    memory = {
        "tessc cpu": peak_bytes(module, "seed"),
        "numpy broadcast+sum": traced_peak(lambda: (a * b).sum(axis=1)),
        "np.matmul": traced_peak(lambda: a2 @ b2),
    }
    return timed_medians(contenders, repeat, rounds), memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    print(describe_machine())
    print(f"# reproduce: python bench/bench_fusion.py {' '.join(sys.argv[1:])}".rstrip())

    w1 = bench_w1(args.repeat, args.rounds, not args.no_torch_compile)
    fused = w1["tessc cpu"]
    print("\nW1  relu(x*w+b)*sigmoid(x)-0.5x, 2^24 f32")
    print(f"{'contender':<18} {'ms':>8} {'tessc cpu / it':>15}")
    for name, ms in w1.items():
        print(f"{name:<18} {ms:8.2f} {fused / ms:14.2f}x")

    for size in (256, 512):
        times, memory = bench_w2(size, args.repeat, args.rounds)
        tessc = times["tessc cpu"]
        print(f"\nW2  seed zip+reduce N=K=M={size} f32")
        print(f"{'contender':<20} {'ms':>8} {'tessc / it':>11} {'peak extra MiB':>15}")
        for name, ms in times.items():
            print(f"{name:<20} {ms:8.2f} {tessc / ms:10.2f}x {memory[name] / 2**20:15.2f}")
    print("\n# ratio = tessc time / contender time (median; below 1: tessc faster)")


if __name__ == "__main__":
    main()
