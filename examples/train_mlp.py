"""
Train a two-layer MLP on scikit-learn's 8x8 digits with tessc: forward, softmax
cross-entropy, gradients by the `tess-autodiff` pass and the SGD update are one jitted
program, compiled once to fused Numba kernels and then called every step.

    python examples/train_mlp.py [--epochs 30] [--target cpu|cpu-unfused|cuda|reference]

With `--target cuda` the parameters and the batches are copied to the GPU once and stay
there: every step takes and returns device arrays (only the loss is read back). Without a
GPU, `NUMBA_ENABLE_CUDASIM=1` runs it in Numba's CUDA simulator (slowly: use e.g.
`--epochs 1 --hidden 16`).

Prints the loss and accuracy per epoch, the time per epoch, and the same training step in
NumPy for comparison (hand-written forward and backward), so the two can be checked against
each other: both start from the same weights and should reach the same loss.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tessc as ts


def load_digits_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[digits.target]
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


def logits(params, x):
    h = (x @ params["w1"] + params["b1"]).relu()
    return h @ params["w2"] + params["b2"]


def loss_fn(params, x, y):
    z = logits(params, x)
    z = z - z.max(dim=1, keepdim=True)  # log-sum-exp stays a composite of tess ops
    log_probs = z - z.exp().sum(dim=1, keepdim=True).log()
    return -(log_probs * y).sum() / x.shape[0]


def make_train_step(lr: float, target: str):
    @ts.jit(target=target)
    def train_step(params, x, y):
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        new_params = {name: params[name] - lr * grads[name] for name in params}
        return new_params, loss

    return train_step


def numpy_train_step(params, x, y, lr):
    """The same step by hand, as a NumPy user would write it."""
    pre = x @ params["w1"] + params["b1"]
    h = np.maximum(pre, 0)
    z = h @ params["w2"] + params["b2"]
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -(np.log(p) * y).sum() / len(x)
    dz = (p - y) / len(x)
    dh = (dz @ params["w2"].T) * (pre > 0)
    grads = {"w2": h.T @ dz, "b2": dz.sum(0), "w1": x.T @ dh, "b1": dh.sum(0)}
    return {k: params[k] - lr * grads[k] for k in params}, loss


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


def accuracy(params, x, y) -> float:
    h = np.maximum(x @ params["w1"] + params["b1"], 0)
    return float(((h @ params["w2"] + params["b2"]).argmax(1) == y.argmax(1)).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--target", default="cpu")
    args = parser.parse_args()

    x_train, y_train, x_test, y_test = load_digits_data()
    n_batches = len(x_train) // args.batch
    bounds = [slice(i * args.batch, (i + 1) * args.batch) for i in range(n_batches)]
    batches = [(x_train[b], y_train[b]) for b in bounds]

    step = make_train_step(args.lr, args.target)
    params = on_target(init_params(args.hidden), args.target)
    device_batches = on_target(batches, args.target)
    start = time.perf_counter()
    step(params, *device_batches[0])  # trace + compile (or load from the kernel cache)
    print(f"compile: {time.perf_counter() - start:.2f} s (target {args.target})")

    reference = on_host(params)
    tessc_time = numpy_time = 0.0
    for epoch in range(args.epochs):
        losses, np_losses = [], []
        t0 = time.perf_counter()
        for xb, yb in device_batches:
            params, loss = step(params, xb, yb)
            losses.append(float(on_host(loss)))
        t1 = time.perf_counter()
        for xb, yb in batches:
            reference, np_loss = numpy_train_step(reference, xb, yb, args.lr)
            np_losses.append(float(np_loss))
        t2 = time.perf_counter()
        tessc_time += t1 - t0
        numpy_time += t2 - t1
        print(
            f"epoch {epoch + 1:3d}  loss {np.mean(losses):.4f} (numpy {np.mean(np_losses):.4f})"
            f"  test acc {accuracy(on_host(params), x_test, y_test):.3f}"
            f"  {1e3 * (t1 - t0):.2f} ms/epoch (numpy {1e3 * (t2 - t1):.2f})"
        )
    print(
        f"tessc {1e3 * tessc_time / args.epochs:.2f} ms/epoch, "
        f"numpy {1e3 * numpy_time / args.epochs:.2f} ms/epoch, "
        f"ratio numpy/tessc = {numpy_time / tessc_time:.2f}"
    )


if __name__ == "__main__":
    main()
