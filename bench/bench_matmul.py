"""
Matmul: tessc against NumPy's BLAS and PyTorch, one thread and two threads, in one run.

`tess.matmul` of (N, K) and (K, M) at N = K = M (default 512, 1024, 2048 in float32 and
512 in float64; `--transposed` adds `a @ b.T` with b stored (M, K), `nn.Linear`'s layout)
through the `cpu` pipeline, compiled by Numba and called through `tessc.runtime.Executable`
like a user's call, in two builds:

- `tessc`: the `cpu` pipeline as it is: `tess-pack-matmul` packs A and B into panels and
  runs the `micro.mma` register tile (vector width of this machine) above 128^3;
- `tessc tile-only`: the same without `tess-pack-matmul` (`tess-tile`'s i-k-j kernel, what
  tessc ran before).

Every tessc result is checked against np.matmul first. The thread count is switched in
the process (`numba.set_num_threads`, `threadpoolctl` for OpenBLAS, `torch.set_num_threads`),
so the one-thread and two-thread tables come from one run. Timing: the minimum over
`--rounds` rounds of the best of `--repeat` calls, rounds interleaving all variants (a noisy
machine hurts every variant alike) in an order rotated each round, each variant timed
after a pause (`--settle`, 0.2 s): threads that spin after a call slow whichever variant
runs next, and a rotation keeps every variant after the same one. OpenBLAS's workers spin
for ~0.1 s after a call (its thread timeout, 2^28 cycles): at 1024 f32 on two threads,
tessc's `a @ b`, always right after `np a @ b.T`, ran at 0.57x of np.matmul without the
pause, 0.97x with it (or with OPENBLAS_THREAD_TIMEOUT=4 and no pause). With one thread
the process CPU time per call is measured too (`cpu ms`): on a machine shared with other
jobs it is the steadier figure;
"x np" / "x np cpu" are np.matmul's time over the variant's (higher is better: 1.0 = BLAS).
The two-thread np.matmul time is the least reliable on a loaded machine: Numba's and
PyTorch's OpenMP threads spin after their calls and take the cores from OpenBLAS's next
one (1024 f32: 60 ms spinning, 22 ms with OMP_WAIT_POLICY=PASSIVE, same load; 6 ms when
it got both cores). Passive waits slow tessc's short two-thread calls instead (512 f32:
0.75 -> 1.43 ms), so the script leaves the default; read two-thread ratios from a quiet
run.

Run: python bench/bench_matmul.py [--sizes 512,1024,2048] [--f64-sizes 512] [--threads 1,2]
     [--repeat 5] [--rounds 5] [--settle 0.2] [--transposed] [--no-before]

Earlier measurements (tess-tile only: the `cpu+tile` and seed variants of this script then;
their "x np" is time / np.matmul's, lower is better, the inverse of the ratio printed now):

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
import sys
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.pipelines import get_pipeline, run_passes
from tessc.runtime import Executable, load_source


def matmul_program(n: int, k: int, m: int, dtype: str = "f32") -> str:
    def t(*shape: int) -> str:
        return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"

    return f"""
func.func @matmul(%a: {t(n, k)}, %b: {t(k, m)}) -> {t(n, m)} {{
  %c = tess.matmul %a, %b : {t(n, k)}, {t(k, m)} -> {t(n, m)}
  func.return %c : {t(n, m)}
}}
"""


def matmul_t_program(n: int, k: int, m: int, dtype: str = "f32") -> str:
    """`a @ b.T` with b of shape (M, K)."""

    def t(*shape: int) -> str:
        return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"

    return f"""
func.func @matmul_t(%a: {t(n, k)}, %b: {t(m, k)}) -> {t(n, m)} {{
  %t = tess.permute %b dims = [1, 0] : {t(m, k)} -> {t(k, m)}
  %c = tess.matmul %a, %t : {t(n, k)}, {t(k, m)} -> {t(n, m)}
  func.return %c : {t(n, m)}
}}
"""


SPECS = {
    "tessc": get_pipeline("cpu").spec,
    "tessc tile-only": get_pipeline("cpu").spec.replace("tess-pack-matmul,", ""),
}


def compile_program(text: str, entry: str, spec: str) -> tuple[Executable, float]:
    """The executable and its compile time (passes, codegen, Numba; the disk cache may
    hold it from an earlier run)."""
    start = time.perf_counter()
    module: ModuleOp = Parser(make_context(), text).parse_module()
    run_passes(module, spec)
    module.verify()
    program = Executable(load_source(emit_numba(module)), entry)
    return program, time.perf_counter() - start


def best_time(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of the fastest of `repeat` calls, each its own minimum."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu


def set_threads(count: int, torch: Any) -> Any:
    """Use `count` threads in Numba, OpenBLAS and PyTorch; returns threadpoolctl's limiter."""
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    if torch is not None:
        torch.set_num_threads(count)
    return threadpool_limits(count)


def variants(
    n: int, dtype: str, transposed: bool, before: bool, torch: Any
) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    """The callables to time at N = K = M = n, each tessc one checked against NumPy, and
    each tessc one's compile time."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    bt = np.ascontiguousarray(b.T)
    expected = a @ b
    suffix = "f32" if dtype == "float32" else "f64"
    fns: dict[str, Callable[[], object]] = {"np.matmul": lambda: np.matmul(a, b)}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        fns["torch.matmul"] = lambda: torch.matmul(ta, tb)
    programs = [("matmul", matmul_program(n, n, n, suffix), (a, b), "")]
    if transposed:
        fns["np a @ b.T"] = lambda: np.matmul(a, bt.T)
        programs.append(("matmul_t", matmul_t_program(n, n, n, suffix), (a, bt), " a@b.T"))
    compile_seconds: dict[str, float] = {}
    for label, spec in SPECS.items():
        if label != "tessc" and not before:
            continue
        for entry, text, inputs, tag in programs:
            program, seconds = compile_program(text, entry, spec)
            (result,) = program(*inputs)
            scale = float(np.abs(expected).max())
            np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4 * scale)
            fns[label + tag] = lambda p=program, x=inputs: p(*x)
            compile_seconds[label + tag] = seconds
    return fns, compile_seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="512,1024,2048", help="float32 sizes")
    parser.add_argument("--f64-sizes", default="512", help="float64 sizes ('' for none)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--settle", type=float, default=0.2, help="seconds of pause before each variant"
    )
    parser.add_argument("--transposed", action="store_true", help="also a @ b.T")
    parser.add_argument("--no-before", action="store_true", help="skip the tile-only build")
    args = parser.parse_args(argv)
    print(describe_machine())
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        torch = None

    print(f"# {' '.join([sys.executable, *sys.argv])}")
    cases = [(int(s), "float32") for s in args.sizes.split(",") if s]
    cases += [(int(s), "float64") for s in args.f64_sizes.split(",") if s]
    threads = [int(t) for t in args.threads.split(",")]
    header = f"{'N':>5} {'dtype':<7} {'variant':<22} {'ms':>8} {'GFLOP/s':>8} {'x np':>6}"
    for n, dtype in cases:
        fns, compile_seconds = variants(n, dtype, args.transposed, not args.no_before, torch)
        for label, seconds in compile_seconds.items():
            print(f"# compile {label} {n} {dtype}: {seconds:.1f} s")
        for count in threads:
            with set_threads(count, torch):
                times = dict.fromkeys(fns, (float("inf"), float("inf")))
                order = list(fns.items())
                for round_index in range(args.rounds):
                    # Rotated each round: no variant always runs first or last in a round
                    # (the pause, not the rotation, keeps off the last one's spinning threads).
                    shift = round_index % len(order)
                    for name, fn in order[shift:] + order[:shift]:
                        time.sleep(args.settle)  # the last variant's threads stop spinning
                        wall, cpu = best_time(fn, args.repeat)
                        times[name] = (min(times[name][0], wall), min(times[name][1], cpu))
            print(f"# {count} thread{'s' if count > 1 else ''}")
            print(header + (f" {'cpu ms':>8} {'x np cpu':>8}" if count == 1 else ""))
            np_wall, np_cpu = times["np.matmul"]
            for name, (wall, cpu) in times.items():
                line = (
                    f"{n:>5} {dtype:<7} {name:<22} {wall * 1e3:>8.3f} "
                    f"{2.0 * n**3 / wall / 1e9:>8.1f} {np_wall / wall:>6.2f}"
                )
                if count == 1:
                    line += f" {cpu * 1e3:>8.3f} {np_cpu / cpu:>8.2f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
