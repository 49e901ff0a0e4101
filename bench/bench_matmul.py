"""
Contractions: tessc's matmul and the seed's zip+reduce against np.matmul (and PyTorch).

Two tess programs over float32 at N = K = M (default 256 and 512):

- `matmul`: `tess.matmul` of (N,K) and (K,M);
- `seed`: `tess.mul` of (N,K,1) and (1,K,M), then `tess.sum` over dim 1, which `tess-fuse`
  turns into one generic: a matmul in disguise that never builds the (N,K,M) product.

Each runs through the `cpu` pipeline without `tess-tile` ("cpu"), and with `tess-tile` after
`tess-linalg-to-loops` ("cpu+tile", options from --tile-sizes/--register-tile), compiled by
Numba and called through `tessc.runtime.Executable` (inputs checked, outputs allocated,
like a user's call). The references: `np.matmul` on the same (N,K) and (K,M) data, NumPy's
broadcast+sum for the seed (`(a * b).sum(axis=1)`, which does build the product), and
`torch.matmul` when torch imports. Every tessc result is checked against np.matmul first.

Timing: the minimum over `--rounds` rounds of the best of `--repeat` calls, rounds
interleaving all variants, so a noisy machine (other processes on 2 cores) hurts every
variant alike. GFLOP/s counts 2*N*K*M flops; "x np" is time / np.matmul's time (lower is
better; the goal is <= 2). Set NUMBA_NUM_THREADS / OPENBLAS_NUM_THREADS to compare one
core with one core.

Run: python bench/bench_matmul.py [--sizes 256,512] [--repeat 20] [--rounds 5]
     [--tile-sizes 64,128,256] [--register-tile 4,6] [--no-untiled] [--transposed]
     [--dtype float64]

`--transposed` adds, with b stored (M, K) (`nn.Linear`'s layout), `a @ b.T` (a transpose
copy, then the tiled matmul) and the same product as a zip+reduce over the last dim
(`tess-tile-dot`'s register-tiled dot products), against NumPy's `a @ b.T`.

Measured (2-core AMD EPYC with AVX-512, shared with other jobs; GFLOP/s, "x np" in
parentheses; `--sizes 256,512,1024 --repeat 10 --rounds 5`):

    threads  N     np.matmul   tessc cpu      cpu+tile       seed cpu+tile  torch
    2        256   189         109 (1.73)     218 (0.87)     215 (0.88)     195
    2        512   204          90 (2.28)     204 (1.00)     201 (1.02)     195
    2        1024   68          23 (2.92)      45 (1.51)      45 (1.52)      63
    1        256   104          57 (1.83)     112 (0.93)     112 (0.93)     102
    1        512   105          43 (2.45)     106 (1.00)     100 (1.06)     102
    1        1024  104          35 (2.95)     104 (1.00)     104 (1.00)      94

(1 thread: NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1.) NumPy's
broadcast+sum for the seed runs at 2.5 GFLOP/s. At 1024 with 2 threads every variant
varied with the machine's load; on one core the tiled kernel matches OpenBLAS there too.
Tile sizes around the defaults (TI 32-128, TK 64-256, TJ 128-512; R x U of 4x4, 2x8, 4x8)
were within noise of each other; 4x2, 8x2 and R x U = 1 were clearly slower.

Later (2-core Intel Xeon, AVX-512 (avx512f, LLVM host cpu 'rocketlake'), load 12-25 from
other jobs; `--sizes 512,1024 --transposed --no-untiled --repeat 5 --rounds 5`, one
thread): GFLOP/s (time / np.matmul's)

    N     np.matmul  np a @ b.T  matmul       seed         matmul_t     dot
    512   174        185         106 (1.63)   106 (1.64)   93 (1.87)    108 (1.62)
    1024   61 *       62          25 (2.44)    26 (2.31)   22 (2.79)     31 (1.97)

(* the machine's load at that moment.) `dot` before `tess-tile-dot`: 17.7 GFLOP/s at 512.
Measured by thread CPU time instead (one thread: less hurt by the load), tess-tile's
kernel runs at 0.45-0.52x of np.matmul at 512 and 1024 f32 and 0.43x at 512 f64, and the
variants tried do not move it beyond noise: register tiles 5x4, 6x4, 8x4, 6x2; tile sizes
(64,128,128), (64,64,128), (64,256,64), (60,128,256); 512-bit vectors (Numba with
NUMBA_CPU_FEATURES=<host>,-prefer-256-bit: zmm FMAs, same speed). The i-k-j kernel loads
and stores its output rows every U k steps and the dot kernel streams one operand from L2
per 4 FMAs: both are bound there, not by the vector width (zmm gave both nothing).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.to_numba import emit_numba
from tessc.pipelines import get_pipeline, run_passes
from tessc.runtime import Executable, load_source


def matmul_program(n: int, k: int, m: int) -> str:
    return f"""
func.func @matmul(%a: tensor<{n}x{k}xf32>, %b: tensor<{k}x{m}xf32>) -> tensor<{n}x{m}xf32> {{
  %c = tess.matmul %a, %b : tensor<{n}x{k}xf32>, tensor<{k}x{m}xf32> -> tensor<{n}x{m}xf32>
  func.return %c : tensor<{n}x{m}xf32>
}}
"""


def dot_program(n: int, k: int, m: int) -> str:
    """`(a[:, None, :] * b[None]).sum(-1)`, b of shape (M, K): the dot-product nest
    `tess-tile-dot` register-tiles."""
    return f"""
func.func @dot(%a: tensor<{n}x{k}xf32>, %b: tensor<{m}x{k}xf32>) -> tensor<{n}x{m}xf32> {{
  %a3 = tess.reshape %a : tensor<{n}x{k}xf32> -> tensor<{n}x1x{k}xf32>
  %b3 = tess.reshape %b : tensor<{m}x{k}xf32> -> tensor<1x{m}x{k}xf32>
  %p = tess.mul %a3, %b3 : tensor<{n}x1x{k}xf32>, tensor<1x{m}x{k}xf32> -> tensor<{n}x{m}x{k}xf32>
  %s = tess.sum %p dims = [2] : tensor<{n}x{m}x{k}xf32> -> tensor<{n}x{m}xf32>
  func.return %s : tensor<{n}x{m}xf32>
}}
"""


def matmul_t_program(n: int, k: int, m: int) -> str:
    """`a @ b.T` with b of shape (M, K): `tess-fuse` keeps the transpose a packed copy."""
    return f"""
func.func @matmul_t(%a: tensor<{n}x{k}xf32>, %b: tensor<{m}x{k}xf32>) -> tensor<{n}x{m}xf32> {{
  %t = tess.permute %b dims = [1, 0] : tensor<{m}x{k}xf32> -> tensor<{k}x{m}xf32>
  %c = tess.matmul %a, %t : tensor<{n}x{k}xf32>, tensor<{k}x{m}xf32> -> tensor<{n}x{m}xf32>
  func.return %c : tensor<{n}x{m}xf32>
}}
"""


def seed_program(n: int, k: int, m: int) -> str:
    return f"""
func.func @seed(%a: tensor<{n}x{k}x1xf32>, %b: tensor<1x{k}x{m}xf32>) -> tensor<{n}x{m}xf32> {{
  %z = tess.mul %a, %b : tensor<{n}x{k}x1xf32>, tensor<1x{k}x{m}xf32> -> tensor<{n}x{k}x{m}xf32>
  %s = tess.sum %z dims = [1] : tensor<{n}x{k}x{m}xf32> -> tensor<{n}x{m}xf32>
  func.return %s : tensor<{n}x{m}xf32>
}}
"""


def pipeline_spec(tile: str | None) -> str:
    """The `cpu` pipeline's passes without its own `tess-tile`, with `tile` (a
    `tess-tile{...}` spec) right after `tess-linalg-to-loops`."""
    spec = re.sub(r",tess-tile(?!-)(\{[^}]*\})?", "", get_pipeline("cpu").spec)
    if tile is None:
        return spec
    return spec.replace("tess-linalg-to-loops", f"tess-linalg-to-loops,{tile}")


def compile_program(text: str, entry: str, spec: str) -> Executable:
    module: ModuleOp = Parser(make_context(), text).parse_module()
    run_passes(module, spec)
    module.verify()
    return Executable(load_source(emit_numba(module)), entry)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="256,512")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tile-sizes", default=None, help="TI,TK,TJ (default: the pass's)")
    parser.add_argument("--register-tile", default=None, help="R,U (default: the pass's)")
    parser.add_argument("--no-untiled", action="store_true", help="skip the cpu pipeline")
    parser.add_argument("--transposed", action="store_true", help="also a @ b.T vs NumPy's")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = parser.parse_args(argv)

    options = []
    if args.tile_sizes:
        options.append(f"tile-sizes={args.tile_sizes}")
    if args.register_tile:
        options.append(f"register-tile={args.register_tile}")
    tile = "tess-tile" + ("{" + " ".join(options) + "}" if options else "")
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        torch = None

    print(f"# {' '.join([sys.executable, *sys.argv])}")
    threads = {
        v: os.environ.get(v, "default") for v in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    }
    print(
        f"# {platform.machine()}, {os.cpu_count()} cpus, "
        + ", ".join(f"{k}={v}" for k, v in threads.items())
    )
    print(f"# cpu+tile: {pipeline_spec(tile)}")
    print(f"{'N=K=M':>6} {'variant':<22} {'ms':>9} {'GFLOP/s':>9} {'x np':>7}")
    specs = {"cpu+tile": pipeline_spec(tile)}
    if not args.no_untiled:
        specs = {"cpu": pipeline_spec(None), **specs}
    for n in (int(s) for s in args.sizes.split(",")):
        times = measure(n, specs, args.repeat, args.rounds, torch, args.transposed, args.dtype)
        flops = 2.0 * n**3
        for name, seconds in times.items():
            ratio = seconds / times["np.matmul"]
            rate = flops / seconds / 1e9
            print(f"{n:>6} {name:<22} {seconds * 1e3:>9.3f} {rate:>9.1f} {ratio:>7.2f}")


def measure(
    n: int,
    specs: dict[str, str],
    repeat: int,
    rounds: int,
    torch: Any,
    transposed: bool = False,
    dtype: str = "float32",
) -> dict[str, float]:
    """Seconds per call of every variant at N = K = M = n (checked against np.matmul)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    a3, b3 = a.reshape(n, n, 1), b.reshape(1, n, n)
    bt = np.ascontiguousarray(b.T)
    expected = a @ b
    variants: dict[str, Callable[[], object]] = {"np.matmul": lambda: np.matmul(a, b)}
    if transposed:
        variants["np a @ b.T"] = lambda: np.matmul(a, bt.T)
    programs = [
        ("matmul", matmul_program(n, n, n), (a, b)),
        ("seed", seed_program(n, n, n), (a3, b3)),
    ]
    if transposed:
        programs.append(("matmul_t", matmul_t_program(n, n, n), (a, bt)))
        programs.append(("dot", dot_program(n, n, n), (a, bt)))
    for label, spec in specs.items():
        for name, text, inputs in programs:
            text = text.replace("xf32>", "xf64>") if dtype == "float64" else text
            program = compile_program(text, name, spec)
            (result,) = program(*inputs)
            scale = float(np.abs(expected).max())
            np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4 * scale)
            variants[f"tessc {name} {label}"] = lambda p=program, x=inputs: p(*x)
    if n <= 512:  # NumPy's broadcast+sum builds the (N,K,M) product
        variants["np broadcast+sum seed"] = lambda: (a3 * b3).sum(axis=1)
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        variants["torch.matmul"] = lambda: torch.matmul(ta, tb)
    times = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, fn in variants.items():
            times[name] = min(times[name], best_time(fn, repeat))
    return times


if __name__ == "__main__":
    main()
