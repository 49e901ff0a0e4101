"""
Where the optional loop rewrites pay: each gated pass left out ("off"), run on every nest
or op it matches ("always", as before the gates) and with its default gate ("gated", the
`cpu` pipeline), on kernels on both sides of each threshold and on the digits MLP train
step, in one run. The last column is gated over the better of off and always (1.00x: the
gate chose right).

- `tess-tile` (`min-macs`, `short-depth`, `wide-cols`): matmuls N x K x M f32.
- `tess-tile-dot` (`min-macs`, `long-depth`, `min-macs-long`): dot nests
  `(a[:, None, :] * b[None]).sum(-1)`, N x K x M f32.
- `tess-expand-math` (`min-iterations`, `min-inner-trip`): `exp(x)` over flat and
  (rows, inner) f32/f64 arrays, and W1's `relu(x*w + b) * sigmoid(x)`.
- `tess-row-dots` (`min-cols`): `relu(x @ w1 + b1) @ w2`, x N x 64, K hidden, M columns
  (the narrow product's dots in the packed kernel's row loop), f32 and f64.
- the MLP 64-128-10 step (`bench/mlp_step.py`, batch 128): all four gates at once.

Kernels are compiled serial (`parallel_threshold` off: the gates are about the loop code,
not threads); the step as the `cpu` pipeline compiles it. Each figure is the fastest
lower quartile over alternating rounds of process CPU time per call (one thread, so CPU
time is the kernel's time and a loaded machine inflates it less than wall time), in us.
"compile s" is the process CPU time of the first call on empty caches (this script uses
fresh cache directories), after a warm-up compile, so Numba's own start-up is not in it;
a kernel's gated code is the same as off's or always's, so its compile is a cache hit.
(The step's kernels compile partly in a compile worker process, which this CPU time
misses.)

    python bench/bench_loop_gates.py [--only tile,dot,exp,rowdots,mlp] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

_CACHE = tempfile.mkdtemp(prefix="tessc-gates-")
os.environ["TESSC_CACHE_DIR"] = os.path.join(_CACHE, "kernels")
os.environ["NUMBA_CACHE_DIR"] = os.path.join(_CACHE, "numba")

import numpy as np  # noqa: E402
from machine import describe_machine  # noqa: E402

import tessc as ts  # noqa: E402
from tessc.compiler import compile_module  # noqa: E402
from tessc.pipelines import PIPELINES  # noqa: E402
from tessc.reference import parse_module  # noqa: E402

UNGATED = {
    "tess-tile": "tess-tile{min-macs=0 short-depth=0}",
    "tess-tile-dot": "tess-tile-dot{min-macs=0 min-macs-long=0}",
    "tess-expand-math": "tess-expand-math{min-iterations=0 min-inner-trip=0}",
    "tess-row-dots": "tess-row-dots{min-cols=1}",
}


def add_pipeline(name: str, passes: tuple[str, ...], *, off: bool = False) -> str:
    """`cpu` with `passes` (keys of UNGATED) ungated (or left out), registered as `name`."""
    cpu = PIPELINES["cpu"]
    loops = cpu.passes[2]
    for pass_name in passes:
        assert pass_name + "," in loops
        loops = loops.replace(pass_name + ",", "" if off else UNGATED[pass_name] + ",")
    PIPELINES[name] = replace(cpu, name=name, passes=(*cpu.passes[:2], loops))
    return name


def variants(passes: tuple[str, ...]) -> dict[str, str]:
    """The pipelines compared: the passes left out, always run, and gated (`cpu`)."""
    key = "-".join(p.removeprefix("tess-") for p in passes)
    return {
        "off": add_pipeline(f"cpu-no-{key}", passes, off=True),
        "always": add_pipeline(f"cpu-ungated-{key}", passes),
        "gated": "cpu",
    }


def tensor(shape: tuple[int, ...], dtype: str) -> str:
    return "tensor<" + "".join(f"{n}x" for n in shape) + dtype + ">"


def dot(n: int, k: int, m: int, dtype: str = "f32") -> str:
    a, b = tensor((n, 1, k), dtype), tensor((1, m, k), dtype)
    p, o = tensor((n, m, k), dtype), tensor((n, m), dtype)
    return f"""func.func @f(%a: {a}, %b: {b}) -> {o} {{
  %p = tess.mul %a, %b : {a}, {b} -> {p}
  %s = tess.sum %p dims = [2] : {p} -> {o}
  func.return %s : {o}
}}"""


def matmul(n: int, k: int, m: int) -> str:
    a, b, o = tensor((n, k), "f32"), tensor((k, m), "f32"), tensor((n, m), "f32")
    return f"""func.func @f(%a: {a}, %b: {b}) -> {o} {{
  %c = tess.matmul %a, %b : {a}, {b} -> {o}
  func.return %c : {o}
}}"""


def dense_narrow(n: int, k: int, m: int, dtype: str = "f32") -> str:
    x, w1, b1 = tensor((n, 64), dtype), tensor((64, k), dtype), tensor((k,), dtype)
    w2, h, o = tensor((k, m), dtype), tensor((n, k), dtype), tensor((n, m), dtype)
    return f"""func.func @f(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}) -> {o} {{
  %0 = tess.matmul %x, %w1 : {x}, {w1} -> {h}
  %1 = tess.add %0, %b1 : {h}, {b1} -> {h}
  %2 = tess.relu %1 : {h}
  %3 = tess.matmul %2, %w2 : {h}, {w2} -> {o}
  func.return %3 : {o}
}}"""


def exp(shape: tuple[int, ...], dtype: str = "f32") -> str:
    x = tensor(shape, dtype)
    return f"""func.func @f(%x: {x}) -> {x} {{
  %y = tess.exp %x : {x}
  func.return %y : {x}
}}"""


def w1(n: int) -> str:
    x = tensor((n,), "f32")
    return f"""func.func @f(%x: {x}, %w: {x}, %b: {x}) -> {x} {{
  %0 = tess.mul %x, %w : {x}, {x} -> {x}
  %1 = tess.add %0, %b : {x}, {x} -> {x}
  %2 = tess.relu %1 : {x}
  %3 = tess.sigmoid %x : {x}
  %4 = tess.mul %2, %3 : {x}, {x} -> {x}
  func.return %4 : {x}
}}"""


def inputs(text: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    fn = next(iter(parse_module(text).ops))
    arrays = []
    for t in fn.function_type.inputs.data:
        dtype = np.float32 if str(t.element_type) == "f32" else np.float64
        arrays.append(rng.standard_normal(tuple(t.get_shape())).astype(dtype))
    return arrays


def per_call(fn: Callable[..., Any], args: Any) -> float:
    """Lower-quartile process CPU time of one call, us (batches of >= ~20 ms)."""
    clock = time.process_time
    fn(*args)
    count = 1
    while True:
        start = clock()
        for _ in range(count):
            fn(*args)
        if (elapsed := clock() - start) > 0.02:
            break
        count *= 2
    times = []
    for _ in range(max(3, int(0.15 / elapsed))):
        start = clock()
        for _ in range(count):
            fn(*args)
        times.append((clock() - start) / count)
    times.sort()
    return times[len(times) // 4] * 1e6


def compare(builds: dict[str, Callable[[], Callable[..., Any]]], args: Any, rounds: int) -> str:
    fns, compile_s = {}, {}
    for name, build in builds.items():
        start = time.process_time()
        fns[name] = build()
        fns[name](*args)
        compile_s[name] = time.process_time() - start
    best = {name: min(per_call(fns[name], args) for _ in range(rounds)) for name in fns}
    columns = "  ".join(f"{best[name]:9.2f} {compile_s[name]:5.2f}" for name in builds)
    ratio = best["gated"] / min(best["off"], best["always"])
    return f"{columns}   {ratio:5.2f}x"


HEADER = f"{'':<28}{'off us':>9} {'cold s':>5}  {'always':>9} {'':>5}  {'gated':>9} {'':>5}"
HEADER += "   gated / best"


def kernel_row(label: str, text: str, pipelines: dict[str, str], rounds: int) -> None:
    module, args = parse_module(text), inputs(text)
    serial = {"parallel_threshold": 1 << 60}
    builds = {
        name: (lambda target=target: compile_module(module, "f", target=target, **serial))
        for name, target in pipelines.items()
    }
    print(f"{label:<28}", compare(builds, args, rounds), flush=True)


def mlp_row(rounds: int) -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from mlp_step import init_params, load_digits_data, loss_fn

    xt, yt, _, _ = load_digits_data()
    args = (init_params(128), xt[:128], yt[:128])

    def step(p: dict, x: Any, y: Any) -> Any:
        loss, g = ts.value_and_grad(loss_fn)(p, x, y)
        return {k: p[k] - 0.1 * g[k] for k in p}, loss

    builds = {
        name: (lambda target=target: ts.jit(step, target=target))
        for name, target in variants(tuple(UNGATED)).items()
    }
    print("all four gates")
    print(f"{'MLP 64-128-10 step':<28}", compare(builds, args, rounds), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--only", default="tile,dot,exp,rowdots,mlp")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_loop_gates.py " + " ".join(sys.argv[1:]))
    only = set(args.only.split(","))
    compile_module(parse_module(exp((64,))), "f")  # Numba's start-up, out of the figures
    if "tile" in only:
        print("tess-tile, matmul N x K x M f32")
        print(HEADER)
        pipelines = variants(("tess-tile",))
        for n, k, m in [
            (12, 12, 12),
            (16, 16, 16),
            (32, 32, 32),
            (128, 10, 32),
            (64, 20, 64),
            (64, 16, 64),
            (128, 10, 64),
            (32, 4, 256),
        ]:
            kernel_row(f"  matmul {n}x{k}x{m}", matmul(n, k, m), pipelines, args.rounds)
    if "dot" in only:
        print("tess-tile-dot, N x K x M f32")
        print(HEADER)
        pipelines = variants(("tess-tile-dot",))
        for n, k, m in [
            (8, 8, 8),
            (16, 16, 16),
            (32, 32, 32),
            (128, 48, 10),
            (128, 64, 10),
            (128, 128, 10),
            (128, 256, 10),
            (512, 128, 10),
        ]:
            kernel_row(f"  dot {n}x{k}x{m}", dot(n, k, m), pipelines, args.rounds)
    if "exp" in only:
        print("tess-expand-math")
        print(HEADER)
        pipelines = variants(("tess-expand-math",))
        for shape, dtype in [
            ((1024, 10), "f32"),
            ((256, 8), "f32"),
            ((256, 16), "f32"),
            ((256, 8), "f64"),
            ((256, 16), "f64"),
            ((512,), "f32"),
            ((1024,), "f32"),
            ((1 << 16,), "f32"),
            ((1 << 24,), "f32"),
        ]:
            label = f"  exp {'x'.join(map(str, shape))} {dtype}"
            kernel_row(label, exp(shape, dtype), pipelines, args.rounds)
        for n in (1 << 10, 1 << 14):
            kernel_row(f"  W1 relu*sigmoid {n}", w1(n), pipelines, args.rounds)
    if "rowdots" in only:
        print("tess-row-dots, relu(x @ w1 + b1) @ w2: N x 64 x K hidden x M columns")
        print(HEADER)
        pipelines = variants(("tess-row-dots",))
        for n, k, m, dtype in [
            (128, 128, 4, "f32"),
            (128, 128, 8, "f32"),
            (128, 128, 10, "f32"),
            (128, 128, 15, "f32"),
            (128, 32, 10, "f32"),
            (128, 256, 10, "f32"),
            (128, 128, 3, "f64"),
            (128, 128, 4, "f64"),
            (128, 128, 10, "f64"),
        ]:
            label = f"  {n}x64x{k}x{m} {dtype}"
            kernel_row(label, dense_narrow(n, k, m, dtype), pipelines, args.rounds)
    if "mlp" in only:
        mlp_row(args.rounds)


if __name__ == "__main__":
    main()
