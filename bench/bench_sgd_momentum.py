"""
W4 for SGD with momentum, side by side with W4's Adagrad and the bandwidth limit (issue 26 §3).

The step is torch.optim.SGD's with momentum 0.9 (no dampening, no weight decay, lr 0.01),
for each parameter p with gradient g and momentum buffer b:

    b = 0.9 * b + g;  p = p - lr * b

over `--params` parameters (default 200) whose sizes are log-uniform in [1e3, 2e5] floats
(seeded, the sizes of bench_adagrad.py). Both steps move 5 arrays per element (read p, g,
b or the Adagrad sum; write p and b/sum). Contenders, all f32 and in place on arenas:

- `tessc sgd` / `tessc adagrad`: `tessc.optim.SGD(lr, momentum)` / `tessc.optim.Adagrad`'s
  step, traced by `tessc.jit` with the parameters and states donated, compiled by the
  `cpu` pipeline (one horizontally fused kernel over three arenas);
- `tessc sgd threaded=C`: the same SGD program with codegen's other parallel form forced
  (`emit_numba(threaded_kernels=C)`): threaded kernels launched from a Python host
  (`tessc.runtime.threads`) or Numba parfors;
- `numba limit sgd` / `numba limit adagrad`: the same arithmetic as one flat Numba `prange`
  loop over the three arenas (`parallel=True`, fastmath): the bandwidth limit of 5 streams;
- `torch sgd fused=True` / `foreach=True`, `torch adagrad fused=True` (when importable).

Times are medians over `--rounds` rounds of `--repeat` calls, round-robin with a pause
before each (bench_unfused's `timed_medians`); every contender is first checked against
NumPy. Ratios are each row's median over the SGD limit's and over torch fused SGD's.

    python bench/bench_sgd_momentum.py [--params 200] [--repeat 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from bench_adagrad import (
    EPS,
    LR_DECAY,
    WEIGHT_DECAY,
    adagrad,
    numpy_step,
    print_bandwidth_table,
)
from bench_unfused import timed_medians
from machine import describe_machine
from numba import njit, prange

import tessc
from tessc.compiler import compile_module
from tessc.pipelines import get_pipeline, run_passes

LR, MOMENTUM = 0.01, 0.9
SGD = tessc.optim.SGD(lr=LR, momentum=MOMENTUM)


def sgd(step: Any, params: list, grads: list, buffers: list) -> tuple[list, list]:
    """torch.optim.SGD's momentum step: `tessc.optim.SGD`'s, traced with the step count."""
    new_params, state = SGD.step(params, grads, {"step": step - 1.0, "momentum_buffer": buffers})
    return new_params, state["momentum_buffer"]


@njit(parallel=True, fastmath=True)
def limit_sgd(p: np.ndarray, g: np.ndarray, b: np.ndarray) -> None:
    for i in prange(p.shape[0]):
        buf = np.float32(MOMENTUM) * b[i] + g[i]
        b[i] = buf
        p[i] = p[i] - np.float32(LR) * buf


@njit(parallel=True, fastmath=True)
def limit_adagrad(p: np.ndarray, g: np.ndarray, s: np.ndarray, clr: np.float32) -> None:
    for i in prange(p.shape[0]):
        grad = g[i] + np.float32(WEIGHT_DECAY) * p[i]
        total = s[i] + grad * grad
        s[i] = total
        p[i] = p[i] - clr * grad / (np.sqrt(total) + np.float32(EPS))


def numpy_sgd(params, grads, buffers) -> None:
    for p, g, b in zip(params, grads, buffers, strict=True):
        b *= np.float32(MOMENTUM)
        b += g
        p -= np.float32(LR) * b


def compile_program(module: Any, entry: str, threaded: bool | None) -> Callable[..., Any]:
    """The cpu pipeline's program; with `threaded` set, codegen's parallel form forced."""
    if threaded is None:
        return compile_module(module, entry)
    from tessc.lowering.codegen.to_numba import emit_numba
    from tessc.runtime import Executable, load_source

    lowered = module.clone()
    run_passes(lowered, get_pipeline("cpu").spec)
    return Executable(load_source(emit_numba(lowered, threaded_kernels=threaded)), entry)


def check(name: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=10, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    print(describe_machine())
    print(f"# reproduce: python bench/bench_sgd_momentum.py {' '.join(sys.argv[1:])}".rstrip())

    rng = np.random.default_rng(0)
    sizes = np.exp(rng.uniform(np.log(1e3), np.log(2e5), args.params)).astype(int)
    total = int(sizes.sum())
    params0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    states0 = [rng.uniform(0, 1, n).astype(np.float32) for n in sizes]
    print(f"# {args.params} parameters, {total} floats, {5 * total * 4 / 1e6:.0f} MB a step")
    step = np.float32(1.0).reshape(())

    want_p, want_b = [p.copy() for p in params0], [s.copy() for s in states0]
    numpy_sgd(want_p, grads0, want_b)
    sgd_expected = [*want_p, *want_b]
    want_p, want_s = [p.copy() for p in params0], [s.copy() for s in states0]
    temps = [(np.empty_like(p), np.empty_like(p)) for p in params0]
    numpy_step(1.0, want_p, grads0, want_s, temps)
    adagrad_expected = [*want_p, *want_s]

    contenders: dict[str, Callable[[], object]] = {}
    for name, function, expected in (
        ("sgd", sgd, sgd_expected),
        ("adagrad", adagrad, adagrad_expected),
    ):
        module = (
            tessc.jit(function, donate_argnums=(1, 3)).trace(step, params0, grads0, states0).module
        )
        for threaded in (None, True, False) if name == "sgd" else (None,):
            start = time.perf_counter()
            program = compile_program(module, function.__name__, threaded)
            arenas = [tessc.arena(a) for a in (params0, grads0, states0)]
            program(step, *arenas[0], *arenas[1], *arenas[2])
            elapsed = time.perf_counter() - start
            arenas = [tessc.arena(a) for a in (params0, grads0, states0)]
            program(step, *arenas[0], *arenas[1], *arenas[2])
            check(name, [*arenas[0], *arenas[2]], expected)
            label = f"tessc {name}" + ("" if threaded is None else f" threaded={threaded}")
            print(f"# {label}: lower + compile (or load) {elapsed:.1f} s")
            call_args = (step, *arenas[0], *arenas[1], *arenas[2])
            contenders[label] = lambda p=program, a=call_args: p(*a)

    flat = [np.concatenate(a) for a in (params0, grads0, states0)]
    limit_sgd(*flat)
    check(
        "numba limit sgd",
        [flat[0], flat[2]],
        [np.concatenate(sgd_expected[: args.params]), np.concatenate(sgd_expected[args.params :])],
    )
    contenders["numba limit sgd"] = lambda f=flat: limit_sgd(*f)
    flat = [np.concatenate(a) for a in (params0, grads0, states0)]
    clr = np.float32(LR / (1.0 + 0.0 * LR_DECAY))
    limit_adagrad(*flat, clr)
    check(
        "numba limit adagrad",
        [flat[0], flat[2]],
        [
            np.concatenate(adagrad_expected[: args.params]),
            np.concatenate(adagrad_expected[args.params :]),
        ],
    )
    contenders["numba limit adagrad"] = lambda f=flat: limit_adagrad(*f, clr)

    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            pass
    if torch is not None:
        for label, make, slot, expected in (
            (
                "torch sgd fused=True",
                lambda t: torch.optim.SGD(t, lr=LR, momentum=MOMENTUM, fused=True),
                "momentum_buffer",
                sgd_expected,
            ),
            (
                "torch sgd foreach=True",
                lambda t: torch.optim.SGD(t, lr=LR, momentum=MOMENTUM, foreach=True),
                "momentum_buffer",
                sgd_expected,
            ),
            (
                "torch adagrad fused=True",
                lambda t: torch.optim.Adagrad(
                    t, lr=0.01, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS, fused=True
                ),
                "sum",
                adagrad_expected,
            ),
        ):
            tensors = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params0]
            for tensor, g in zip(tensors, grads0, strict=True):
                tensor.grad = torch.from_numpy(g)
            optimizer = make(tensors)
            for tensor, s in zip(tensors, states0, strict=True):
                optimizer.state[tensor][slot] = torch.from_numpy(s.copy())
            with torch.no_grad():
                optimizer.step()
            got = [t.detach().numpy() for t in tensors] + [
                optimizer.state[t][slot].numpy() for t in tensors
            ]
            check(label, got, expected)
            contenders[label] = optimizer.step

    load_before = os.getloadavg()[0]
    medians = timed_medians(contenders, args.repeat, args.rounds)
    load_after = os.getloadavg()[0]
    moved = 5 * total * 4
    bases = [b for b in ("numba limit sgd", "torch sgd fused=True") if b in medians]
    print_bandwidth_table(medians, bases, moved)
    print(
        f"# load average (1 min) {load_before:.1f} before the timed rounds, {load_after:.1f} after"
    )
    if "tessc adagrad" in medians and "numba limit adagrad" in medians:
        ratio = medians["tessc adagrad"] / medians["numba limit adagrad"]
        print(f"# tessc adagrad / numba limit adagrad: {ratio:.2f}x")


if __name__ == "__main__":
    main()
