"""
The dispatch-bound digits MLP train step, steady state, side by side in one run.

One epoch is 11 steps of a 64-H-10 MLP (softmax cross-entropy, gradients, SGD update) on
batches of 128 of scikit-learn's digits (`bench/mlp_step.py`). Contenders:
tessc (`jit`, and `jit(donate_argnums=0)` so the parameters are updated in place), the same
step by hand in NumPy, PyTorch eager (autograd + in-place SGD), and JAX's jitted step
(where JAX is installed). Times are medians over rounds, contenders alternating; ratios
are the other's time over tessc's (above 1: tessc is faster).

    python bench/bench_mlp_step.py [--hidden 128] [--rounds 15] [--epochs 20]
        [--skip torch,numpy]

`--skip` leaves contenders out of the process (tessc, numpy, torch, jax): PyTorch's
OpenMP threads keep spinning after their turn and take the second core from the next
contender (on a 2-core machine the single-threaded ones suffer most).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from machine import describe_machine
from mlp_step import init_params, load_digits_data, loss_fn, numpy_train_step

import tessc as ts

LR = 0.1


def tessc_epoch(batches, params, donate: bool) -> Callable[[], None]:
    def step(params, x, y):
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        return {k: params[k] - LR * grads[k] for k in params}, loss

    jitted = ts.jit(step, donate_argnums=0 if donate else ())
    state = {k: v.copy() for k, v in params.items()}
    state, _ = jitted(state, *batches[0])

    def run() -> None:
        nonlocal state
        for x, y in batches:
            state, _ = jitted(state, x, y)

    return run


def numpy_epoch(batches, params) -> Callable[[], None]:
    state = dict(params)

    def run() -> None:
        nonlocal state
        for x, y in batches:
            state, _ = numpy_train_step(state, x, y, LR)

    return run


def torch_epoch(batches, params) -> Callable[[], None] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    state = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    data = [(torch.tensor(x), torch.tensor(y)) for x, y in batches]

    def run() -> None:
        for x, y in data:
            h = torch.relu(x @ state["w1"] + state["b1"])
            z = h @ state["w2"] + state["b2"]
            loss = -(torch.log_softmax(z, dim=1) * y).sum() / x.shape[0]
            grads = torch.autograd.grad(loss, list(state.values()))
            with torch.no_grad():
                for p, g in zip(state.values(), grads, strict=True):
                    p -= LR * g

    return run


def jax_epoch(batches, params) -> Callable[[], None] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def loss(p, x, y):
        h = jnp.maximum(x @ p["w1"] + p["b1"], 0)
        z = h @ p["w2"] + p["b2"]
        return -(jax.nn.log_softmax(z, axis=1) * y).sum() / x.shape[0]

    @jax.jit
    def step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return {k: p[k] - LR * grads[k] for k in p}, value

    state = {k: jnp.asarray(v) for k, v in params.items()}
    data = [(jnp.asarray(x), jnp.asarray(y)) for x, y in batches]
    state, value = step(state, *data[0])
    value.block_until_ready()

    def run() -> None:
        nonlocal state
        value = None
        for x, y in data:
            state, value = step(state, x, y)
        value.block_until_ready()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--epochs", type=int, default=20, help="epochs per round")
    parser.add_argument("--skip", default="", help="contenders left out: tessc,numpy,torch,jax")
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_mlp_step.py " + " ".join(sys.argv[1:]))

    x_train, y_train, _, _ = load_digits_data()
    n = len(x_train) // args.batch
    spans = [slice(i * args.batch, (i + 1) * args.batch) for i in range(n)]
    batches = [(x_train[span], y_train[span]) for span in spans]
    params = init_params(args.hidden)
    skip = set(filter(None, args.skip.split(",")))
    makers: dict[str, tuple[str, Callable[[], Callable[[], None] | None]]] = {
        "tessc jit": ("tessc", lambda: tessc_epoch(batches, params, donate=False)),
        "tessc jit, donated params": ("tessc", lambda: tessc_epoch(batches, params, donate=True)),
        "NumPy by hand": ("numpy", lambda: numpy_epoch(batches, params)),
        "PyTorch eager": ("torch", lambda: torch_epoch(batches, params)),
        "JAX jit": ("jax", lambda: jax_epoch(batches, params)),
    }
    contenders = {name: make() for name, (key, make) in makers.items() if key not in skip}
    runs = {name: fn for name, fn in contenders.items() if fn is not None}
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs.items())
    for round_ in range(args.rounds):
        # The order rotates every round: a contender's threads still spinning after its
        # turn (PyTorch's OpenMP pool) slow whichever runs next, so no one always follows.
        shift = round_ % len(order)
        for name, fn in order[shift:] + order[:shift]:
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(args.epochs):
                fn()
            times[name].append((time.perf_counter() - start) / args.epochs)
            cpu[name].append((time.process_time() - cpu_start) / args.epochs)
    # Ratios against tessc's donated step (against the first contender if tessc is skipped).
    base = "tessc jit, donated params" if "tessc jit, donated params" in runs else next(iter(runs))
    best = statistics.median(times[base])
    best_cpu = statistics.median(cpu[base])
    print(f"\ndigits MLP 64-{args.hidden}-10, {n} steps of {args.batch} per epoch")
    print("(CPU: process CPU time, all threads: the work done, which a loaded machine does not")
    print("inflate as it does wall time; a multi-threaded contender's CPU exceeds its wall)")
    print("| contender | wall ms/epoch | it / tessc | CPU ms/epoch | it / tessc |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, samples in times.items():
        ms, cpu_ms = statistics.median(samples), statistics.median(cpu[name])
        print(
            f"| {name} | {1e3 * ms:.3f} | {ms / best:.2f}x | {1e3 * cpu_ms:.3f} | "
            f"{cpu_ms / best_cpu:.2f}x |"
        )
    skipped = [name for name, fn in contenders.items() if fn is None]
    if skipped:
        print(f"(not installed, skipped: {', '.join(skipped)})")
    if skip:
        print(f"(left out with --skip: {', '.join(sorted(skip))})")


if __name__ == "__main__":
    main()
