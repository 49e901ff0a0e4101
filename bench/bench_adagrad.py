"""
W4: one Adagrad step over many parameters — horizontal fusion against NumPy and PyTorch.

The step is torch.optim.Adagrad's with weight decay and lr decay, for each parameter p with
gradient g and state sum s (lr 0.01, lr_decay 1e-3, weight_decay 0.01, eps 1e-10):

    g = g + weight_decay * p;  clr = lr / (1 + (step - 1) * lr_decay)
    s = s + g * g;             p = p - clr * g / (sqrt(s) + eps)

over `--params` parameters (default 200) whose sizes are log-uniform in [1e3, 2e5] floats
(seeded). Contenders, all f32 and in place:

- `tessc`: `tessc.optim.Adagrad`'s step (written once per parameter), traced by
  `tessc.jit(adagrad, donate_argnums=(1, 3))` (the parameters and states donated:
  `{tess.donated}`), compiled by the `cpu` pipeline:
  `tess-fuse` makes each parameter's clauses one generic, `tess-fuse-horizontal` makes the
  200 one kernel over three arenas (the decayed learning rate is its scalar prologue).
  The arrays are `tessc.arena` views, so the runtime passes the arenas without a copy
  and the step updates them in place;
- `tessc chunk=C`: the same with `tess-fuse-horizontal{chunk-size=C}` (0: one `prange`
  over the whole arena), with `--chunk-sizes`;
- `tessc packed`: the same program called with the original separate arrays on every
  call, the worst case: the runtime packs them into arenas each time (one copy each, and
  fresh pages for the donated arenas, whose views it returns). A caller that feeds the
  returned arrays back passes them without a copy from the second call on;
- `numpy`: per tensor, in place, with preallocated temporaries (six array passes each);
- `torch foreach=False`, `foreach=True`, `fused=True`: torch.optim.Adagrad's three
  implementations (when torch is importable).

Every contender first runs one step from the same state and is checked against NumPy.
Times are medians over `--rounds` rounds of `--repeat` calls, contenders round-robin with
a pause before each (thread pools spin after a call). Ratios are tessc's time over the
other's: below 1, tessc is faster. Reproduce with

    python bench/bench_adagrad.py [--params 200] [--repeat 10] [--rounds 5] [--chunk-sizes 0 16384]

Measured here (x86_64, 2 cores, Numba 0.68.1, torch 2.13 CPU; 200 parameters, 9.29M floats,
186 MB moved per step; `--chunk-sizes 0 4096 65536`, load average 0.2):

    contender               ms  GB/s  / numpy  / torch foreach=True  / torch fused=True
    tessc                 4.48  41.4    0.21x                 0.18x               0.59x
    tessc chunk=0         4.24  43.8    0.20x                 0.17x               0.56x
    tessc chunk=4096      4.35  42.8    0.21x                 0.17x               0.57x
    tessc chunk=65536     4.40  42.3    0.21x                 0.17x               0.58x
    tessc packed         27.96   6.6    1.33x                 1.09x               3.69x
    numpy                21.04   8.8    1.00x                 0.82x               2.77x
    torch foreach=False  19.27   9.6    0.92x                 0.75x               2.54x
    torch foreach=True   25.60   7.3    1.22x                 1.00x               3.38x
    torch fused=True      7.58  24.5    0.36x                 0.30x               1.00x

The fused step is 0.5-0.8x torch's fused Adagrad over several runs (the lower end on a busy
machine); chunk sizes from 0 to 262144 stay within the run-to-run noise (about 10%).
Lowering and compiling the 200-parameter step takes 3-6 s (trace 0.3 s).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from bench_unfused import timed_medians

import tessc
from tessc.compiler import compile_module
from tessc.pipelines import get_pipeline, run_passes

LR, LR_DECAY, WEIGHT_DECAY, EPS = 0.01, 1e-3, 0.01, 1e-10


ADAGRAD = tessc.optim.Adagrad(lr=LR, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS)


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


def adagrad(step: Any, params: list, grads: list, states: list) -> tuple[list, list]:
    """torch.optim.Adagrad's step (weight decay, lr decay): `tessc.optim.Adagrad`'s, traced
    with the step count `step` (1 on the first step) and the sums `states`."""
    new_params, state = ADAGRAD.step(params, grads, {"step": step - 1.0, "sum": states})
    return new_params, state["sum"]


def numpy_step(step: float, params, grads, states, temps) -> None:
    """The same step in NumPy, per tensor, in place."""
    clr = np.float32(LR / (1.0 + (step - 1.0) * LR_DECAY))
    for p, g, s, (t1, t2) in zip(params, grads, states, temps, strict=True):
        np.multiply(p, np.float32(WEIGHT_DECAY), out=t1)
        t1 += g
        np.multiply(t1, t1, out=t2)
        s += t2
        np.sqrt(s, out=t2)
        t2 += np.float32(EPS)
        np.divide(t1, t2, out=t1)
        t1 *= clr
        p -= t1


def compile_step(module: Any, chunk_size: int | None) -> Callable[..., tuple[np.ndarray, ...]]:
    """The cpu pipeline's program, or with `tess-fuse-horizontal{chunk-size=...}`."""
    if chunk_size is None:
        return compile_module(module, "adagrad")
    from tessc.lowering.codegen.to_numba import emit_numba
    from tessc.runtime import Executable, load_source

    default = "tess-fuse-horizontal{donated-only=true}"
    spec = get_pipeline("cpu").spec
    assert default in spec
    spec = spec.replace(default, f"{default[:-1]} chunk-size={chunk_size}}}")
    lowered = module.clone()
    run_passes(lowered, spec)
    return Executable(load_source(emit_numba(lowered)), "adagrad")


def check(name: str, params: Sequence[np.ndarray], states: Sequence[np.ndarray], expected) -> None:
    for got, want in zip([*params, *states], [*expected[0], *expected[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=name)


def print_bandwidth_table(medians: dict[str, float], bases: Sequence[str], moved: int) -> None:
    """One row per contender: its median ms, the GB/s of `moved` bytes, and its time over
    each of `bases`' (below 1: the row is faster)."""
    header = ["contender", "ms", "GB/s", *(f"/ {b}" for b in bases)]
    rows = [header]
    for name, ms in medians.items():
        ratios = [f"{ms / medians[b]:.2f}x" for b in bases]
        rows.append([name, f"{ms:.2f}", f"{moved / ms / 1e6:.1f}", *ratios])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        cells = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        print("  ".join([row[0].ljust(widths[0]), *cells]))
        if index == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=10, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk-sizes", type=int, nargs="*", default=[], help="extra variants")
    args = parser.parse_args()
    print(describe_machine())

    rng = np.random.default_rng(0)
    sizes = np.exp(rng.uniform(np.log(1e3), np.log(2e5), args.params)).astype(int)
    total = int(sizes.sum())
    params0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    states0 = [rng.uniform(0, 1, n).astype(np.float32) for n in sizes]
    print(f"# reproduce: python bench/bench_adagrad.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"# {args.params} parameters, {total} floats ({total * 4 / 2**20:.1f} MiB per tensor)")

    step = np.float32(1.0).reshape(())
    expected_p = [p.copy() for p in params0]
    expected_s = [s.copy() for s in states0]
    temps = [(np.empty_like(p), np.empty_like(p)) for p in params0]
    numpy_step(1.0, expected_p, grads0, expected_s, temps)
    expected = (expected_p, expected_s)

    start = time.perf_counter()
    jitted = tessc.jit(adagrad, donate_argnums=(1, 3))  # params, states
    module = jitted.trace(step, params0, grads0, states0).module
    traced = time.perf_counter() - start
    contenders: dict[str, Callable[[], object]] = {}
    for chunk in [None, *args.chunk_sizes]:
        start = time.perf_counter()
        program = compile_step(module, chunk)
        params, grads, states = (tessc.arena(a) for a in (params0, grads0, states0))
        program(step, *params, *grads, *states)  # compiles (or loads) the kernels
        elapsed = time.perf_counter() - start
        params, grads, states = (tessc.arena(a) for a in (params0, grads0, states0))
        outputs = program(step, *params, *grads, *states)
        assert all(o is a for o, a in zip(outputs, [*params, *states], strict=True)), "in place"
        check("tessc", params, states, expected)
        name = "tessc" if chunk is None else f"tessc chunk={chunk}"
        print(f"# {name}: trace {traced:.1f} s, lower + compile (or load) {elapsed:.1f} s")
        contenders[name] = lambda p=program, a=(step, *params, *grads, *states): p(*a)
    packed_p, packed_s = [p.copy() for p in params0], [s.copy() for s in states0]
    program = compile_step(module, None)
    outputs = program(step, *packed_p, *grads0, *packed_s)
    check("tessc packed", outputs[: args.params], outputs[args.params :], expected)
    contenders["tessc packed"] = lambda: program(step, *packed_p, *grads0, *packed_s)

    np_p, np_s = [p.copy() for p in params0], [s.copy() for s in states0]
    numpy_step(1.0, np_p, grads0, np_s, temps)
    check("numpy", np_p, np_s, expected)
    contenders["numpy"] = lambda: numpy_step(1.0, np_p, grads0, np_s, temps)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        for label, options in (
            ("torch foreach=False", {"foreach": False}),
            ("torch foreach=True", {"foreach": True}),
            ("torch fused=True", {"fused": True}),
        ):
            tensors = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params0]
            for tensor, g in zip(tensors, grads0, strict=True):
                tensor.grad = torch.from_numpy(g)
            optimizer = torch.optim.Adagrad(
                tensors, lr=LR, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS, **options
            )
            for tensor, s in zip(tensors, states0, strict=True):
                optimizer.state[tensor]["sum"].copy_(torch.from_numpy(s))
            with torch.no_grad():
                optimizer.step()
            sums = [optimizer.state[t]["sum"].numpy() for t in tensors]
            check(label, [t.detach().numpy() for t in tensors], sums, expected)
            contenders[label] = optimizer.step

    medians = timed_medians(contenders, args.repeat, args.rounds)
    moved = 5 * total * 4  # read p, g, s; write p, s
    bases = [b for b in ("numpy", "torch foreach=True", "torch fused=True") if b in medians]
    print_bandwidth_table(medians, bases, moved)
    print("# ratio = the row's time / the column's (median; below 1: the row is faster)")
    print(f"# GB/s counts the 5 arrays one step must move ({moved / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
