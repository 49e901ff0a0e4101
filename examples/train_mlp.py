"""
Train a two-layer MLP on scikit-learn's 8x8 digits with tessc, as one would in JAX: the
whole training set is passed to one jitted train step with an index array, and the step
gathers its minibatch, computes the softmax cross-entropy on integer labels
(`ts.nn.cross_entropy`), its gradients (`ts.value_and_grad`, i.e. the `tess-autodiff`
pass) and the optimizer update (`ts.optim.SGD` with momentum, or `ts.optim.Adam`), all
compiled once into fused kernels; parameters and optimizer state are donated, so they
are updated in place.

    python examples/train_mlp.py [--epochs 20] [--optimizer sgd|adam]
                                 [--target cpu|cpu-unfused|cuda|reference] [--plot FILE]
    torchrun --standalone --nproc_per_node=2 examples/train_mlp.py --data-parallel

With `--target cuda` the parameters and the data are copied to the GPU once and stay
there: every step takes and returns device arrays (only the loss is read back). Without a
GPU, `NUMBA_ENABLE_CUDASIM=1` runs it in Numba's CUDA simulator (slowly: use e.g.
`--epochs 1 --hidden 16`).

Shows a progress bar (tqdm), then the loss and test accuracy per epoch next to the same
training written by hand in NumPy (forward, backward, momentum SGD or Adam, the same
minibatches from the same weights: the two should reach the same loss), and writes the
curves to a PNG (matplotlib).

With `--data-parallel`, under torchrun (`tessc.distributed`, `pip install -e
'.[distributed]'`), each of N processes computes the gradients of its N-th of every batch;
one all-reduce per step averages them (and the loss) and every rank runs the same
optimizer step. Rank 0 prints, compares with NumPy on the whole batch, and plots: the
curve is the single-process one, to float rounding.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

import tessc as ts


def load_digits_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Train and test splits: float32 images in [0, 1], int64 labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return x[:split], y[:split], x[split:], y[split:]


def init_params(hidden: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((64, hidden)) * np.sqrt(2 / 64)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, 10)) * np.sqrt(1 / hidden)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }


def make_optimizer(name: str, lr: float | None) -> ts.optim.Optimizer:
    if name == "adam":
        return ts.optim.Adam(lr=lr or 3e-3)
    return ts.optim.SGD(lr=lr or 0.05, momentum=0.9)


# ---------------------------------------------------------------------------------------
# tessc
# ---------------------------------------------------------------------------------------


def logits(params, x):
    h = (x @ params["w1"] + params["b1"]).relu()
    return h @ params["w2"] + params["b2"]


def loss_fn(params, x, y):
    return ts.nn.cross_entropy(logits(params, x), y)


def make_train_step(optimizer: ts.optim.Optimizer, target: str):
    @ts.jit(target=target, donate_argnums=(0, 1))
    def train_step(params, opt_state, x_all, y_all, idx):
        x, y = x_all[idx], y_all[idx]  # the minibatch, gathered inside the step
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = optimizer.step(params, grads, opt_state)
        return params, opt_state, loss

    return train_step


def make_data_parallel_step(optimizer: ts.optim.Optimizer, target: str):
    """The same step over the ranks: each computes the loss and gradients of its shard of
    the batch, into the reducer's flat buffer (`grad_buffers`, donated and never read:
    the compiled step writes each gradient there); the reducer averages both across ranks
    with one all-reduce over that buffer; every rank applies the optimizer's own fused
    step, which reads the buffer as its gradient arena, to its (identical) parameters."""

    @ts.jit(target=target, donate_argnums=(1,))
    def grad_step(params, grad_buffers, x_all, y_all, idx):
        x, y = x_all[idx], y_all[idx]
        return ts.value_and_grad(loss_fn)(params, x, y)

    reducer = ts.distributed.GradientReducer()

    def train_step(params, opt_state, x_all, y_all, idx):
        buffers = reducer.gradient_buffers(params, scalars=1)
        loss, grads = grad_step(params, buffers, x_all, y_all, ts.distributed.shard(idx))
        grads, loss = reducer(grads, loss)
        params, opt_state = optimizer.step(params, grads, opt_state)
        return params, opt_state, loss

    train_step.reducer = reducer  # its `copied` count: 0 when the gradients land in place
    return train_step


def make_evaluate(target: str):
    @ts.jit(target=target)
    def evaluate(params, x, y):
        """The accuracy on (x, y)."""
        return (logits(params, x).argmax(dim=1) == y).astype(np.float32).mean()

    return evaluate


# ---------------------------------------------------------------------------------------
# the same in NumPy, by hand
# ---------------------------------------------------------------------------------------


def numpy_train_step(params, x_all, y_all, idx):
    """Loss and gradients of one minibatch, forward and backward by hand."""
    x, y = x_all[idx], y_all[idx]
    pre = x @ params["w1"] + params["b1"]
    h = np.maximum(pre, 0)
    z = h @ params["w2"] + params["b2"]
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y]).mean()
    dz = p
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    dh = (dz @ params["w2"].T) * (pre > 0)
    grads = {"w2": h.T @ dz, "b2": dz.sum(0), "w1": x.T @ dh, "b1": dh.sum(0)}
    return loss, grads


class NumpyOptimizer:
    """torch.optim.SGD(momentum) / Adam, per tensor, as a NumPy user would write them."""

    def __init__(self, optimizer: ts.optim.Optimizer, params: dict[str, np.ndarray]):
        self.opt = optimizer
        self.t = 0
        self.state = {k: [np.zeros_like(p), np.zeros_like(p)] for k, p in params.items()}

    def step(self, params, grads):
        self.t += 1
        opt, new = self.opt, {}
        for k, p in params.items():
            g, (a, b) = grads[k], self.state[k]
            if isinstance(opt, ts.optim.Adam):
                b1, b2 = opt.betas
                a[...] = b1 * a + (1 - b1) * g
                b[...] = b2 * b + (1 - b2) * g * g
                denom = np.sqrt(b) / np.sqrt(1 - b2**self.t) + opt.eps
                new[k] = p - opt.lr / (1 - b1**self.t) * a / denom
            else:
                a[...] = g if self.t == 1 else opt.momentum * a + g
                new[k] = p - opt.lr * a
        return new


def numpy_accuracy(params, x, y) -> float:
    h = np.maximum(x @ params["w1"] + params["b1"], 0)
    return float(((h @ params["w2"] + params["b2"]).argmax(1) == y).mean())


# ---------------------------------------------------------------------------------------
# devices, plot, main
# ---------------------------------------------------------------------------------------


def on_target(tree, target: str):
    """`tree`'s arrays on the device for the cuda target (copied once, kept there), else as
    they are."""
    if target != "cuda":
        return tree
    from numba import cuda

    if isinstance(tree, dict):
        return {k: on_target(v, target) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(on_target(v, target) for v in tree)
    return cuda.to_device(tree)


def on_host(tree):
    """`tree`'s arrays as NumPy arrays (device arrays copied back)."""
    if isinstance(tree, dict):
        return {k: on_host(v) for k, v in tree.items()}
    return tree.copy_to_host() if hasattr(tree, "copy_to_host") else np.asarray(tree)


def plot(history: dict[str, list[float]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display needed
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(epochs, history["loss"], label="tessc")
    left.plot(epochs, history["numpy_loss"], "--", label="NumPy")
    left.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    left.legend()
    right.plot(epochs, history["accuracy"], label="tessc")
    right.plot(epochs, history["numpy_accuracy"], "--", label="NumPy")
    right.set(xlabel="epoch", ylabel="test accuracy", ylim=(min(0.8, *history["accuracy"]), 1))
    right.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--lr", type=float, default=None, help="default: 0.05 sgd, 3e-3 adam")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--plot", default="train_mlp.png", help="PNG to write ('' for none)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--data-parallel", action="store_true", help="under torchrun: shard every batch"
    )
    parser.add_argument("--history", default="", help="JSON file for the curves (rank 0)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="--data-parallel: seconds a rank waits in a collective for the others before "
        "naming the silent ones (rank 0 compiles its evaluation alone meanwhile)",
    )
    args = parser.parse_args(argv)
    from tqdm import tqdm

    lead = True  # the process that evaluates, compares with NumPy, prints and plots
    if args.data_parallel:
        ts.distributed.init(target=args.target, timeout=args.timeout)
        lead = ts.distributed.is_main()

    x_train, y_train, x_test, y_test = load_digits_data()
    steps = len(x_train) // args.batch  # whole batches only: one signature, one trace
    rng = np.random.default_rng(1)
    orders = [rng.permutation(len(x_train)) for _ in range(args.epochs)]

    optimizer = make_optimizer(args.optimizer, args.lr)
    make_step = make_data_parallel_step if args.data_parallel else make_train_step
    train_step, evaluate = make_step(optimizer, args.target), make_evaluate(args.target)
    params = init_params(args.hidden)
    # Copies: the tessc step donates its parameters (their arrays are updated in place).
    reference = {k: v.copy() for k, v in params.items()}
    numpy_opt = NumpyOptimizer(optimizer, reference)
    state = on_target(optimizer.init(params), args.target)
    params = on_target(params, args.target)
    if args.data_parallel:  # rank 0's initial values everywhere (here they agree already)
        params = ts.distributed.broadcast(params)
    data = on_target((x_train, y_train, x_test, y_test), args.target)
    start = time.perf_counter()
    # Trace and compile (or load from the kernel cache) on other arrays: the step donates.
    warm = init_params(args.hidden)
    warm_state = on_target(optimizer.init(warm), args.target)
    train_step(on_target(warm, args.target), warm_state, *data[:2], orders[0][: args.batch])
    if lead:
        evaluate(params, *data[2:])
    compile_time = time.perf_counter() - start

    history: dict[str, list[float]] = {k: [] for k in ("loss", "accuracy")}
    history |= {"numpy_loss": [], "numpy_accuracy": []}
    tessc_time = numpy_time = 0.0
    bar = tqdm(
        range(args.epochs),
        desc=f"{args.optimizer} on {args.target}",
        unit="epoch",
        disable=args.no_progress or not lead,
    )
    for epoch in bar:
        batches = [orders[epoch][k * args.batch : (k + 1) * args.batch] for k in range(steps)]
        losses, np_losses = [], []
        t0 = time.perf_counter()
        for idx in batches:
            params, state, loss = train_step(params, state, *data[:2], idx)
            losses.append(loss)
        t1 = time.perf_counter()
        history["loss"].append(float(np.mean([float(on_host(v)) for v in losses])))
        if not lead:
            continue
        for idx in batches:
            np_loss, grads = numpy_train_step(reference, x_train, y_train, idx)
            reference = numpy_opt.step(reference, grads)
            np_losses.append(np_loss)
        t2 = time.perf_counter()
        tessc_time, numpy_time = tessc_time + t1 - t0, numpy_time + t2 - t1
        history["accuracy"].append(float(on_host(evaluate(params, *data[2:]))))
        history["numpy_loss"].append(float(np.mean(np_losses)))
        history["numpy_accuracy"].append(numpy_accuracy(reference, x_test, y_test))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", acc=f"{history['accuracy'][-1]:.3f}")

    if args.data_parallel:
        world = ts.distributed.world_size()
        ts.distributed.shutdown()
        if lead:
            print(f"data-parallel over {world} processes (printed by rank 0)")
    if not lead:
        return history
    print(f"compile (or load from the kernel cache): {compile_time:.2f} s")
    print("epoch  loss (numpy)      test accuracy (numpy)")
    for k in range(args.epochs):
        print(
            f"{k + 1:5d}  {history['loss'][k]:.4f} ({history['numpy_loss'][k]:.4f})"
            f"   {history['accuracy'][k]:.3f} ({history['numpy_accuracy'][k]:.3f})"
        )
    per_step = 1e6 / (args.epochs * steps)
    print(
        f"tessc {tessc_time * per_step:.1f} µs/step, NumPy {numpy_time * per_step:.1f} µs/step "
        f"({steps} steps of {args.batch} per epoch); final test accuracy "
        f"{history['accuracy'][-1]:.3f}"
    )
    if args.plot:
        plot(history, args.plot, f"digits MLP, {args.optimizer}, target {args.target}")
        print(f"wrote {args.plot}")
    if args.history:
        Path(args.history).write_text(json.dumps(history))
    return history


if __name__ == "__main__":
    main()
