"""
Train a LeNet-style CNN on scikit-learn's 8x8 digits with tessc: conv(1->16, 3x3, pad 1)
+ relu + 2x2 max pool, conv(16->32, 3x3, pad 1) + relu + 2x2 max pool, then a linear
layer to 10 classes. As in examples/train_mlp.py the whole training set is passed to one
jitted, donated train step with an index array; the step gathers its minibatch, computes
the softmax cross-entropy (`ts.nn.cross_entropy`), its gradients (`ts.value_and_grad`:
the convolutions' adjoints are convolutions themselves) and the momentum SGD update
(`ts.optim.SGD`), all compiled once into fused kernels (each conv with its bias and relu
is one kernel).

    python examples/train_cnn.py [--epochs 15] [--target cpu|cpu-unfused|cuda|reference]
                                 [--plot FILE] [--torch]

Shows a progress bar (tqdm), then the loss and test accuracy per epoch, with `--torch`
next to the same training in PyTorch (same weights, same minibatches: the two should
reach the same loss), and writes the curves to a PNG (matplotlib).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import tessc as ts


def load_digits_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Train and test splits: float32 images (N, 1, 8, 8) in [0, 1], int64 labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return x[:split], y[:split], x[split:], y[split:]


def init_params(channels: tuple[int, int] = (16, 32), seed: int = 0) -> dict[str, np.ndarray]:
    """He-initialised weights (OIHW), zero biases."""
    rng = np.random.default_rng(seed)
    c1, c2 = channels

    def normal(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)

    return {
        "w1": normal((c1, 1, 3, 3), 9),
        "b1": np.zeros(c1, np.float32),
        "w2": normal((c2, c1, 3, 3), 9 * c1),
        "b2": np.zeros(c2, np.float32),
        "w3": normal((c2 * 4, 10), c2 * 4) / np.float32(np.sqrt(2)),
        "b3": np.zeros(10, np.float32),
    }


# ---------------------------------------------------------------------------------------
# tessc
# ---------------------------------------------------------------------------------------


def logits(params, x):
    h = ts.nn.conv2d(x, params["w1"], params["b1"], padding=1).relu()
    h = ts.nn.max_pool2d(h, 2)  # (N, 16, 4, 4)
    h = ts.nn.conv2d(h, params["w2"], params["b2"], padding=1).relu()
    h = ts.nn.max_pool2d(h, 2)  # (N, 32, 2, 2)
    return h.reshape((h.shape[0], -1)) @ params["w3"] + params["b3"]


def make_train_step(optimizer: ts.optim.Optimizer, target: str):
    def loss_fn(params, x, y):
        return ts.nn.cross_entropy(logits(params, x), y)

    @ts.jit(target=target, donate_argnums=(0, 1))
    def train_step(params, opt_state, x_all, y_all, idx):
        x, y = x_all[idx], y_all[idx]  # the minibatch, gathered inside the step
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = optimizer.step(params, grads, opt_state)
        return params, opt_state, loss

    return train_step


def make_evaluate(target: str):
    @ts.jit(target=target)
    def evaluate(params, x, y):
        """The accuracy on (x, y)."""
        return (logits(params, x).argmax(dim=1) == y).astype(np.float32).mean()

    return evaluate


# ---------------------------------------------------------------------------------------
# the same in PyTorch (optional)
# ---------------------------------------------------------------------------------------


class TorchTwin:
    """The same network, loss and optimizer in PyTorch eager, from the same weights."""

    def __init__(self, params: dict[str, np.ndarray], optimizer: ts.optim.SGD):
        import torch

        self.torch = torch
        self.params = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        self.opt = torch.optim.SGD(
            self.params.values(), lr=optimizer.lr, momentum=optimizer.momentum
        )

    def logits(self, x):
        F, p = self.torch.nn.functional, self.params
        h = F.max_pool2d(F.relu(F.conv2d(x, p["w1"], p["b1"], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["w2"], p["b2"], padding=1)), 2)
        return h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        self.opt.zero_grad()
        loss = self.torch.nn.functional.cross_entropy(
            self.logits(self.torch.tensor(x)), self.torch.tensor(y)
        )
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        with self.torch.no_grad():
            return float((self.logits(self.torch.tensor(x)).argmax(1).numpy() == y).mean())


# ---------------------------------------------------------------------------------------
# plot, main
# ---------------------------------------------------------------------------------------


def plot(history: dict[str, list[float]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display needed
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(epochs, history["loss"], label="tessc")
    right.plot(epochs, history["accuracy"], label="tessc")
    if history["torch_loss"]:
        left.plot(epochs, history["torch_loss"], "--", label="PyTorch")
        right.plot(epochs, history["torch_accuracy"], "--", label="PyTorch")
    left.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    right.set(xlabel="epoch", ylabel="test accuracy", ylim=(min(0.8, *history["accuracy"]), 1))
    left.legend()
    right.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--torch", action="store_true", help="train a PyTorch twin alongside")
    parser.add_argument("--plot", default="train_cnn.png", help="PNG to write ('' for none)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    from tqdm import tqdm

    x_train, y_train, x_test, y_test = load_digits_data()
    steps = len(x_train) // args.batch  # whole batches only: one signature, one trace
    rng = np.random.default_rng(1)
    orders = [rng.permutation(len(x_train)) for _ in range(args.epochs)]

    optimizer = ts.optim.SGD(lr=args.lr, momentum=0.9)
    train_step, evaluate = make_train_step(optimizer, args.target), make_evaluate(args.target)
    params = init_params()
    twin = TorchTwin(params, optimizer) if args.torch else None
    state = optimizer.init(params)
    start = time.perf_counter()
    # Trace and compile (or load from the kernel cache) on other arrays: the step donates.
    warm = init_params()
    train_step(warm, optimizer.init(warm), x_train, y_train, orders[0][: args.batch])
    evaluate(params, x_test, y_test)
    compile_time = time.perf_counter() - start

    history: dict[str, list[float]] = {
        k: [] for k in ("loss", "accuracy", "torch_loss", "torch_accuracy")
    }
    tessc_time = 0.0
    bar = tqdm(
        range(args.epochs), desc=f"CNN on {args.target}", unit="epoch", disable=args.no_progress
    )
    for epoch in bar:
        batches = [orders[epoch][k * args.batch : (k + 1) * args.batch] for k in range(steps)]
        losses = []
        t0 = time.perf_counter()
        for idx in batches:
            params, state, loss = train_step(params, state, x_train, y_train, idx)
            losses.append(loss)
        tessc_time += time.perf_counter() - t0
        history["loss"].append(float(np.mean([float(v) for v in losses])))
        history["accuracy"].append(float(evaluate(params, x_test, y_test)))
        if twin is not None:
            torch_losses = [twin.step(x_train[idx], y_train[idx]) for idx in batches]
            history["torch_loss"].append(float(np.mean(torch_losses)))
            history["torch_accuracy"].append(twin.accuracy(x_test, y_test))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}", acc=f"{history['accuracy'][-1]:.3f}")

    print(f"compile (or load from the kernel cache): {compile_time:.2f} s")
    print(
        "epoch  loss"
        + (" (torch)" if twin else "")
        + "   test accuracy"
        + (" (torch)" if twin else "")
    )
    for k in range(args.epochs):
        theirs = twin is not None
        loss = f"{history['loss'][k]:.4f}" + (
            f" ({history['torch_loss'][k]:.4f})" if theirs else ""
        )
        acc = f"{history['accuracy'][k]:.3f}" + (
            f" ({history['torch_accuracy'][k]:.3f})" if theirs else ""
        )
        print(f"{k + 1:5d}  {loss}   {acc}")
    per_step = 1e6 / (args.epochs * steps)
    print(
        f"tessc {tessc_time * per_step:.1f} µs/step ({steps} steps of {args.batch} per "
        f"epoch); final test accuracy {history['accuracy'][-1]:.3f}"
    )
    if args.plot:
        plot(history, args.plot, f"digits CNN, momentum SGD, target {args.target}")
        print(f"wrote {args.plot}")
    return history


if __name__ == "__main__":
    main()
