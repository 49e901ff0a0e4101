"""
Convolutions and the digits CNN train step, side by side in one run (issue 20).

Part 1: `conv2d` forward, and forward + backward (the value of `sum(conv(x, w) * g)` and
its gradients in x and w), at LeNet's shapes (examples/train_cnn.py, batch 64) and a
ResNet layer's (N=8, 64->64 channels, 56x56, 3x3, pad 1), on one and on two threads:
tessc (`cpu`), PyTorch eager (oneDNN), `torch.compile` and `jax.jit` (JAX picks its own
threads). Part 2: the CNN train step of examples/train_cnn.py (batch 64: gather,
forward, cross-entropy, gradients, momentum SGD; tessc's step jitted and donated) against
the same step in PyTorch eager, `torch.compile` (forward and backward compiled, the
optimizer's step eager) and `jax.jit`. Times are medians over rounds, contenders
alternating; `it / tessc` is the other's time over tessc's (above 1: tessc is faster).

    python bench/bench_cnn.py [--rounds 7] [--threads 1,2] [--skip torch.compile,jax]
        [--shapes lenet1,lenet2,resnet] [--no-step]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from machine import describe_machine

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import train_cnn  # noqa: E402

import tessc as ts  # noqa: E402

SHAPES: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    # name: (x NCHW, w OIHW, padding)
    "lenet1": ((64, 1, 8, 8), (16, 1, 3, 3), 1),
    "lenet2": ((64, 16, 4, 4), (32, 16, 3, 3), 1),
    "resnet": ((8, 64, 56, 56), (64, 64, 3, 3), 1),
}

Runner = Callable[[], Any]


def conv_flops(x_shape: tuple[int, ...], w_shape: tuple[int, ...], pad: int) -> int:
    n, _, h, w = x_shape
    f, c, kh, kw = w_shape
    return 2 * n * f * c * kh * kw * (h + 2 * pad - kh + 1) * (w + 2 * pad - kw + 1)


def tessc_conv(x: np.ndarray, w: np.ndarray, g: np.ndarray, pad: int, backward: bool) -> Runner:
    def conv(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, padding=pad)

    if backward:
        fn = ts.jit(ts.value_and_grad(lambda x, w, g: (conv(x, w) * g).sum(), argnums=(0, 1)))
        return lambda: fn(x, w, g)
    forward = ts.jit(conv)
    return lambda: forward(x, w)


def torch_conv(
    x: np.ndarray, w: np.ndarray, g: np.ndarray, pad: int, backward: bool, compiled: bool
) -> Runner | None:
    try:
        import torch
    except ImportError:
        return None
    F = torch.nn.functional
    xt, wt, gt = (torch.tensor(a) for a in (x, w, g))

    def forward(x: Any, w: Any) -> Any:
        return F.conv2d(x, w, padding=pad)

    def both(x: Any, w: Any, g: Any) -> Any:
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        value = (F.conv2d(x, w, padding=pad) * g).sum()
        return value, torch.autograd.grad(value, (x, w))

    if not backward:
        fn = torch.compile(forward) if compiled else forward
        return lambda: fn(xt, wt)
    if compiled:
        inner = torch.compile(lambda x, w, g: (F.conv2d(x, w, padding=pad) * g).sum())

        def both(x: Any, w: Any, g: Any) -> Any:  # noqa: F811
            x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
            value = inner(x, w, g)
            return value, torch.autograd.grad(value, (x, w))

    return lambda: both(xt, wt, gt)


def jax_conv(
    x: np.ndarray, w: np.ndarray, g: np.ndarray, pad: int, backward: bool
) -> Runner | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def conv(x: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(x, w, (1, 1), [(pad, pad)] * 2)

    if backward:
        fn = jax.jit(jax.value_and_grad(lambda x, w, g: (conv(x, w) * g).sum(), argnums=(0, 1)))
    else:
        fn = jax.jit(conv)
    args = [jnp.asarray(a) for a in ((x, w, g) if backward else (x, w))]
    return lambda: jax.block_until_ready(fn(*args))


# -- the train step ---------------------------------------------------------------------


def tessc_step(data: tuple[np.ndarray, ...], batches: list[np.ndarray]) -> Runner:
    x_all, y_all = data
    optimizer = ts.optim.SGD(lr=0.05, momentum=0.9)
    step = train_cnn.make_train_step(optimizer, "cpu")
    params = train_cnn.init_params()
    state = [params, optimizer.init(params)]

    def run() -> None:
        for idx in batches:
            state[0], state[1], _ = step(state[0], state[1], x_all, y_all, idx)

    return run


def torch_step(
    data: tuple[np.ndarray, ...], batches: list[np.ndarray], compiled: bool
) -> Runner | None:
    try:
        import torch
    except ImportError:
        return None
    x_all, y_all = (torch.tensor(a) for a in data)
    twin = train_cnn.TorchTwin(train_cnn.init_params(), ts.optim.SGD(lr=0.05, momentum=0.9))
    F = torch.nn.functional

    def loss_fn(x: Any, y: Any) -> Any:
        return F.cross_entropy(twin.logits(x), y)

    loss = torch.compile(loss_fn) if compiled else loss_fn
    indices = [torch.tensor(idx) for idx in batches]

    def run() -> None:
        for idx in indices:
            twin.opt.zero_grad()
            loss(x_all[idx], y_all[idx]).backward()
            twin.opt.step()

    return run


def jax_step(data: tuple[np.ndarray, ...], batches: list[np.ndarray]) -> Runner | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def block(h: Any, w: Any, b: Any) -> Any:
        h = jax.lax.conv_general_dilated(h, w, (1, 1), [(1, 1)] * 2) + b[:, None, None]
        h = jnp.maximum(h, 0)
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
        h = block(block(x, p["w1"], p["b1"]), p["w2"], p["b2"])
        z = h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]
        return -jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], axis=1).mean()

    @jax.jit
    def step(p: Any, v: Any, x_all: Any, y_all: Any, idx: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(p, x_all[idx], y_all[idx])
        v = {k: 0.9 * v[k] + grads[k] for k in p}
        return {k: p[k] - 0.05 * v[k] for k in p}, v, loss

    params = {k: jnp.asarray(a) for k, a in train_cnn.init_params().items()}
    state = [params, {k: jnp.zeros_like(a) for k, a in params.items()}]
    x_all, y_all = (jnp.asarray(a) for a in data)
    indices = [jnp.asarray(idx) for idx in batches]

    def run() -> None:
        loss = None
        for idx in indices:
            state[0], state[1], loss = step(state[0], state[1], x_all, y_all, idx)
        jax.block_until_ready(loss)

    return run


# -- timing -----------------------------------------------------------------------------


def set_threads(count: int) -> None:
    import numba

    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        import torch

        torch.set_num_threads(count)
    except ImportError:
        pass


def race(runs: dict[str, Runner], rounds: int, reps: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds per call of each runner, the order rotating by round
    (a contender's threads still spinning after its turn slow whoever runs next)."""
    for fn in runs.values():
        fn()  # compile, warm caches
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs.items())
    for round_ in range(rounds):
        shift = round_ % len(order)
        for name, fn in order[shift:] + order[:shift]:
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(reps):
                fn()
            wall[name].append((time.perf_counter() - start) / reps)
            cpu[name].append((time.process_time() - cpu_start) / reps)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in runs}


def table(
    title: str, results: dict[str, tuple[float, float]], flops: int | None, base: str
) -> None:
    print(f"\n{title}")
    rate = " | GFLOP/s" if flops else ""
    print(f"| contender | wall ms{rate} | it / tessc | CPU ms | it / tessc |")
    print("| --- | ---: |" + (" ---: |" if flops else "") + " ---: | ---: | ---: |")
    wall0, cpu0 = results[base]
    for name, (wall, cpu) in results.items():
        gflops = f" | {flops / wall / 1e9:.1f}" if flops else ""
        print(
            f"| {name} | {1e3 * wall:.2f}{gflops} | {wall / wall0:.2f}x | {1e3 * cpu:.2f} | "
            f"{cpu / cpu0:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--skip", default="", help="left out: torch,torch.compile,jax")
    parser.add_argument("--no-step", action="store_true", help="the convolutions only")
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_cnn.py " + " ".join(sys.argv[1:]))
    skip = set(filter(None, args.skip.split(",")))
    rng = np.random.default_rng(0)
    for count in (int(t) for t in args.threads.split(",")):
        set_threads(count)
        for name in args.shapes.split(","):
            x_shape, w_shape, pad = SHAPES[name]
            x = rng.standard_normal(x_shape).astype(np.float32)
            w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
            g = rng.standard_normal((x_shape[0], w_shape[0], *x_shape[2:])).astype(np.float32)
            flops = conv_flops(x_shape, w_shape, pad)
            reps = max(1, int(2e8 // flops))
            for backward in (False, True):
                operands = (x, w, g, pad, backward)
                makers: dict[str, Callable[[], Runner | None]] = {
                    "tessc": partial(tessc_conv, *operands),
                    "torch": partial(torch_conv, *operands, False),
                    "torch.compile": partial(torch_conv, *operands, True),
                    "jax": partial(jax_conv, *operands),
                }
                runs = {k: fn for k, make in makers.items() if k not in skip and (fn := make())}
                what = "forward + backward" if backward else "forward"
                table(
                    f"conv2d {what}, {name}: x {x_shape}, w {w_shape}, pad {pad}; "
                    f"{count} thread(s) (JAX: its own)",
                    race(runs, args.rounds, reps),
                    flops * (3 if backward else 1),
                    "tessc",
                )
        if args.no_step:
            continue
        x_train, y_train, _, _ = train_cnn.load_digits_data()
        order = np.random.default_rng(1).permutation(len(x_train))
        batches = [order[k * 64 : (k + 1) * 64] for k in range(len(x_train) // 64)]
        data = (x_train, y_train)
        makers = {
            "tessc (jit, donated)": partial(tessc_step, data, batches),
            "torch": partial(torch_step, data, batches, False),
            "torch.compile": partial(torch_step, data, batches, True),
            "jax": partial(jax_step, data, batches),
        }
        runs = {
            k: fn
            for k, make in makers.items()
            if k.split(" ")[0] not in skip and (fn := make()) is not None
        }
        results = race(runs, args.rounds, 1)
        results = {
            k: (wall / len(batches), cpu / len(batches)) for k, (wall, cpu) in results.items()
        }
        table(
            f"digits CNN train step (batch 64, {len(batches)} steps per epoch, per step); "
            f"{count} thread(s) (JAX: its own)",
            results,
            None,
            "tessc (jit, donated)",
        )


if __name__ == "__main__":
    main()
