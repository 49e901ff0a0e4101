"""
One Lamb step over many parameters: segmented reductions (two kernels) against the
per-parameter norms (three kernels per parameter) and NumPy.

The step is `tessc.optim.Lamb`'s (You et al. 2019 with bias correction; lr 1e-3, betas
(0.9, 0.999), eps 1e-6, weight decay 0.01) over `--params` parameters (default 50) whose
sizes are log-uniform in [1e3, 2e5] floats (seeded), f32, in place. Contenders:

- `tessc`: the standalone step's program (`tessc.jit` of the step, parameters and state
  donated, the `cpu` pipeline): `tess-fuse-horizontal` makes the norms of all parameters
  segmented reductions over the arenas, so the step is two kernels (norms, then update),
  each a parallel loop over chunks of the arenas;
- `tessc per-parameter norms`: the same program with `tess-fuse-horizontal{segmented=false}`
  (what the cpu pipeline did before, and what cuda still does): per parameter a kernel
  for each norm and one for the update, 3 * params + 3 kernels;
- `numpy`: per tensor, in place (the reference transcription).

The tessc contenders are called with `tessc.arena` views (the runtime passes the arenas
without a copy and the step updates them in place). Every contender first runs one step
from the same state, checked against NumPy. Times are medians over `--rounds` rounds of
`--repeat` calls, round-robin (bench_unfused.timed_medians). Reproduce with

    python bench/bench_lamb.py [--params 50] [--repeat 10] [--rounds 5]

Measured here (x86_64, 2 cores shared with other work: load average 9-15; Numba 0.68.1;
50 parameters, 2.05M floats), medians in ms, the three in the same run:

    threads   tessc (2 kernels)   per-parameter norms (153 kernels)   numpy
    1              10.5                 41.9                           22.9
    2              27.7                 30.5                           15.1

With one thread the segmented step is 4x faster than per-parameter norms and 2.2x faster
than NumPy; with two, on this loaded machine, each parallel loop waits for a second core
that other processes hold (the same program runs 2.6x slower than on one thread), so
those figures say more about the load than about the step.
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
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.pipelines import get_pipeline, run_passes
from tessc.runtime import Executable, load_source

LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-6, 0.01
LAMB = tessc.optim.Lamb(lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


def lamb(params: list, grads: list, state: dict) -> tuple[list, dict]:
    return LAMB.step(params, grads, state)


def numpy_step(t: int, params, grads, ms, vs) -> None:
    """The step in NumPy, per tensor, in place."""
    b1, b2 = BETAS
    for p, g, m, v in zip(params, grads, ms, vs, strict=True):
        m *= np.float32(b1)
        m += np.float32(1 - b1) * g
        v *= np.float32(b2)
        v += np.float32(1 - b2) * g * g
        u = (m / np.float32(1 - b1**t)) / (np.sqrt(v / np.float32(1 - b2**t)) + np.float32(EPS))
        u += np.float32(WEIGHT_DECAY) * p
        p_norm, u_norm = np.linalg.norm(p), np.linalg.norm(u)
        ratio = p_norm / u_norm if p_norm > 0 and u_norm > 0 else 1.0
        p -= np.float32(LR * ratio) * u


def compile_step(module: Any, segmented: bool) -> Callable[..., tuple[np.ndarray, ...]]:
    default = "tess-fuse-horizontal{donated-only=true}"
    spec = get_pipeline("cpu").spec
    assert default in spec
    if not segmented:
        spec = spec.replace(default, "tess-fuse-horizontal{donated-only=true segmented=false}")
    lowered = module.clone()
    run_passes(lowered, spec)
    return Executable(load_source(emit_numba(lowered)), "lamb")


def check(name: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=1e-6, err_msg=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=10, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(describe_machine())

    rng = np.random.default_rng(0)
    sizes = np.exp(rng.uniform(np.log(1e3), np.log(2e5), args.params)).astype(int)
    total = int(sizes.sum())
    params0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    ms0 = [rng.standard_normal(n).astype(np.float32) * 0.1 for n in sizes]
    vs0 = [rng.uniform(0, 1, n).astype(np.float32) for n in sizes]
    print(f"# reproduce: python bench/bench_lamb.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"# {args.params} parameters, {total} floats ({total * 4 / 2**20:.1f} MiB per tensor)")

    expected = [[a.copy() for a in arrays] for arrays in (params0, ms0, vs0)]
    numpy_step(1, expected[0], grads0, expected[1], expected[2])

    state0 = {"exp_avg": ms0, "exp_avg_sq": vs0, "step": np.zeros((), np.float32)}
    jitted = tessc.jit(lamb, donate_argnums=(0, 2))
    module = jitted.trace(params0, grads0, state0).module
    contenders: dict[str, Callable[[], object]] = {}
    n = args.params
    for label, segmented in (("tessc", True), ("tessc per-parameter norms", False)):
        start = time.perf_counter()
        program = compile_step(module, segmented)
        arrays = [tessc.arena(a) for a in (params0, grads0, ms0, vs0)]
        step = np.zeros((), np.float32)
        outputs = program(*arrays[0], *arrays[1], *arrays[2], *arrays[3], step)
        elapsed = time.perf_counter() - start
        assert all(o is a for o, a in zip(outputs[:n], arrays[0], strict=True)), "in place"
        check(label, [*outputs[: 3 * n]], [*expected[0], *expected[1], *expected[2]])
        print(f"# {label}: lower + compile (or load) {elapsed:.1f} s")
        call_args = (*arrays[0], *arrays[1], *arrays[2], *arrays[3], step)
        contenders[label] = lambda p=program, a=call_args: p(*a)
    np_arrays = [[a.copy() for a in arrays] for arrays in (params0, ms0, vs0)]
    contenders["numpy"] = lambda: numpy_step(1, np_arrays[0], grads0, np_arrays[1], np_arrays[2])

    medians = timed_medians(contenders, args.repeat, args.rounds)
    base = medians["tessc per-parameter norms"]
    for name, ms in medians.items():
        print(f"{name:28s} {ms:8.2f} ms  {ms / base:5.2f}x of per-parameter norms")
    print("# ratio = the row's time / per-parameter norms' (median; below 1: faster)")


if __name__ == "__main__":
    main()
