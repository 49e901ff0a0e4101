"""
Issue 26 §2: the MLP train step (`mlp_step.py`) at a new batch size without a recompile.
One `jit` function is called at batch 32 (its static program), then at 17, 5, 40 (the
generic program, `?` batch dim: compiled once, at 17). Prints the compiles each size cost
and the steady step of the static and the generic program at the same batch (the generic
one forced by `dynamic=True`), as medians over alternating blocks of calls and the median
of the blocks' ratios, in one run (batch, 17 and 100: a size past the static tiles).

    python bench/bench_dynamic.py [hidden] [batch]
"""

from __future__ import annotations

import sys
import time

import numpy as np

sys.path.insert(0, "bench")
from mlp_step import init_params, load_digits_data, loss_fn  # noqa: E402

import tessc as ts  # noqa: E402


def step(p, x, y):
    loss, g = ts.value_and_grad(loss_fn)(p, x, y)
    return {k: p[k] - 0.1 * g[k] for k in p}, loss


def median_us(fn, args, rounds: int = 200) -> float:
    for _ in range(5):
        fn(*args)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def interleaved(first, second, args, blocks: int = 9) -> tuple[float, float, float]:
    """Medians of `first` and `second` in alternating blocks (a loaded machine drifts
    between blocks, not within one), and the median of the blocks' ratios."""
    a, b = [], []
    for _ in range(blocks):
        a.append(median_us(first, args))
        b.append(median_us(second, args))
    ratios = [y / x for x, y in zip(a, b, strict=True)]
    return float(np.median(a)), float(np.median(b)), float(np.median(ratios))


def main() -> None:
    hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    x, y, _, _ = load_digits_data()
    params = init_params(hidden)
    auto = ts.jit(step)
    for n in (batch, 17, 5, 40):
        before = auto.compile_count
        start = time.perf_counter()
        auto(params, x[:n], y[:n])
        print(
            f"batch {n}: {auto.compile_count - before} compiles, first call "
            f"{(time.perf_counter() - start) * 1e3:.1f} ms"
        )
    static = ts.jit(step, dynamic=False)
    generic = ts.jit(step, dynamic=True)
    for n in (batch, 17, 100):
        args = (params, x[:n], y[:n])
        s, g, ratio = interleaved(static, generic, args)
        print(
            f"hidden {hidden} batch {n}: static {s:.1f} us, dynamic {g:.1f} us, ratio {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
