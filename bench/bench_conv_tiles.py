"""
`tess-conv-tiles` on and off: the `cpu` pipeline with and without the pass, per conv shape,
for the forward conv and the convs of its input (dx) and weight (dw) gradients.

CPU time of the calling process (all threads), the least of 5 rounds: on a loaded machine
it grows much less than wall time. Shapes: LeNet's two layers at batch 64
(examples/train_cnn.py), a middle one, and a ResNet layer (8 x 64 -> 64, 56x56, 3x3).

    python bench/bench_conv_tiles.py [--threads 1] [--shapes lenet1,lenet2,mid,resnet]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from machine import describe_machine

import tessc as ts
from tessc import pipelines

SHAPES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "lenet1": ((64, 1, 8, 8), (16, 1, 3, 3)),
    "lenet2": ((64, 16, 4, 4), (32, 16, 3, 3)),
    "mid": ((16, 32, 16, 16), (32, 32, 3, 3)),
    "resnet": ((8, 64, 56, 56), (64, 64, 3, 3)),
}


def cpu_seconds(fn: Callable[[], Any], reps: int, rounds: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - start) / reps)
    return best


def program(kind: str) -> Callable[..., Any]:
    def conv(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, padding=1)

    if kind == "fwd":
        return ts.jit(conv)
    argnum = 0 if kind == "dx" else 1
    return ts.jit(ts.grad(lambda x, w, g: (conv(x, w) * g).sum(), argnums=argnum))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_conv_tiles.py " + " ".join(sys.argv[1:]))
    numba.set_num_threads(args.threads)
    tiled = pipelines.PIPELINES["cpu"]
    plain_passes = tuple(p.replace("tess-conv-tiles,", "") for p in tiled.passes)
    plain = dataclasses.replace(tiled, passes=plain_passes)
    rng = np.random.default_rng(0)
    print(f"\nCPU ms per call, {args.threads} thread(s); GFLOP/s of the tiled form")
    print("| shape | conv | without | with | without / with | GFLOP/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name in args.shapes.split(","):
        x_shape, w_shape = SHAPES[name]
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        g = rng.standard_normal((x_shape[0], w_shape[0], *x_shape[2:])).astype(np.float32)
        flops = 2 * int(np.prod(x_shape)) // x_shape[1] * w_shape[0] * int(np.prod(w_shape[1:]))
        reps = max(1, int(3e8 // flops))
        for kind in ("fwd", "dx", "dw"):
            times = []
            for pipeline in (plain, tiled):
                pipelines.PIPELINES["cpu"] = pipeline
                fn = program(kind)
                operands = (x, w) if kind == "fwd" else (x, w, g)
                times.append(cpu_seconds(lambda fn=fn, operands=operands: fn(*operands), reps))
            pipelines.PIPELINES["cpu"] = tiled
            without, with_ = times
            print(
                f"| {name} {x_shape} | {kind} | {1e3 * without:.3f} | {1e3 * with_:.3f} | "
                f"{without / with_:.2f}x | {flops / with_ / 1e9:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
