"""
`tess-conv-tiles`' two forms side by side: the `cpu` pipeline with the pass off (the plain
nest), forced direct (`algorithm=direct`), forced im2col (`algorithm=im2col`) and its rule
(`auto`), per conv shape, for the forward conv and the conv of its input gradient (dx;
the weight gradient's conv has only the direct form).

CPU time of the calling process (all threads), the least of `--rounds` rounds, and the
noise: the spread of the rounds, (max - min) / min, of the im2col and direct columns. A
form that does not apply to a shape (the direct form needs unit column stride and 16
channels) runs the plain nest and is marked `-`.

    python bench/bench_conv_tiles.py [--threads 1] [--rounds 5] [--kinds fwd,dx]
        [--shapes resnet,rgb,1x1,s2,lenet1,lenet2,mid]
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

# name: (input shape, weight shape, stride, padding)
SHAPES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int, int]] = {
    "resnet": ((8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    "rgb": ((8, 3, 56, 56), (64, 3, 3, 3), 1, 1),
    "1x1": ((8, 64, 56, 56), (64, 64, 1, 1), 1, 0),
    "s2": ((8, 64, 56, 56), (128, 64, 3, 3), 2, 1),
    "lenet1": ((64, 1, 8, 8), (16, 1, 3, 3), 1, 1),
    "lenet2": ((64, 16, 4, 4), (32, 16, 3, 3), 1, 1),
    "mid": ((16, 32, 16, 16), (32, 32, 3, 3), 1, 1),
}
FORMS = ("plain", "direct", "im2col", "auto")


def cpu_seconds(fn: Callable[[], Any], reps: int, rounds: int) -> tuple[float, float]:
    """The least CPU seconds per call over `rounds` rounds, and the rounds' spread."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            fn()
        times.append((time.process_time() - start) / reps)
    return min(times), (max(times) - min(times)) / min(times)


def program(kind: str, stride: int, padding: int) -> Callable[..., Any]:
    def conv(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, stride=stride, padding=padding)

    if kind == "fwd":
        return ts.jit(conv)
    return ts.jit(ts.grad(lambda x, w, g: (conv(x, w) * g).sum(), argnums=0))


def pipeline_for(base: pipelines.Pipeline, form: str) -> pipelines.Pipeline:
    forced = f"tess-conv-tiles{{algorithm={form}}},"
    step = {"plain": "", "auto": "tess-conv-tiles,"}.get(form, forced)
    passes = tuple(p.replace("tess-conv-tiles,", step) for p in base.passes)
    return dataclasses.replace(base, passes=passes)


def form_of(fn: Any, operands: tuple[np.ndarray, ...]) -> str:
    """Which form the compiled program's conv took."""
    ir = fn.ir(*operands, stage="loops")
    return "im2col" if "%patch" in ir else "direct" if "micro.mma" in ir else "plain"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", default="fwd,dx")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_conv_tiles.py " + " ".join(sys.argv[1:]))
    numba.set_num_threads(args.threads)
    cpu = pipelines.PIPELINES["cpu"]
    rng = np.random.default_rng(0)
    print(f"\nCPU ms per call (least of {args.rounds}), {args.threads} thread(s); noise: spread")
    print("of the rounds (direct / im2col); GFLOP/s of the best form; auto: the rule's pick")
    print("| shape | conv | plain | direct | im2col | auto | noise | GFLOP/s |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for name in args.shapes.split(","):
        x_shape, w_shape, stride, padding = SHAPES[name]
        out = [
            (d + 2 * padding - k) // stride + 1
            for d, k in zip(x_shape[2:], w_shape[2:], strict=True)
        ]
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        g = rng.standard_normal((x_shape[0], w_shape[0], *out)).astype(np.float32)
        flops = 2 * x_shape[0] * int(np.prod(out)) * w_shape[0] * int(np.prod(w_shape[1:]))
        reps = max(1, int(3e8 // flops))
        for kind in args.kinds.split(","):
            operands = (x, w) if kind == "fwd" else (x, w, g)
            times: dict[str, tuple[float, float]] = {}
            took: dict[str, str] = {}
            for form in FORMS:
                pipelines.PIPELINES["cpu"] = pipeline_for(cpu, form)
                fn = program(kind, stride, padding)
                took[form] = form_of(fn, operands)
                if form == "auto":
                    continue
                times[form] = cpu_seconds(
                    lambda fn=fn, operands=operands: fn(*operands), reps, args.rounds
                )
            pipelines.PIPELINES["cpu"] = cpu
            cells = [
                f"{1e3 * times[f][0]:.3f}" if took[f] == f or f == "plain" else "-"
                for f in FORMS[:3]
            ]
            best = min(times[f][0] for f in FORMS[:3] if took[f] == f)
            noise = f"{times['direct'][1]:.0%} / {times['im2col'][1]:.0%}"
            print(
                f"| {name} {x_shape} w{w_shape} s{stride} | {kind} | {' | '.join(cells)} | "
                f"{took['auto']} | {noise} | {flops / best / 1e9:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
