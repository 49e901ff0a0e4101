"""
The MLP train step the latency benchmarks measure (issue 12's figures): a 64-H-10 MLP on
scikit-learn's digits with one-hot labels, softmax cross-entropy written from tess ops,
plain SGD; and the same step by hand in NumPy. Kept here, apart from
`examples/train_mlp.py` (which grew optimizers and integer labels), so the figures stay
comparable across versions.
"""

from __future__ import annotations

import numpy as np


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
    z = z - z.amax(dim=1, keepdim=True)  # log-sum-exp stays a composite of tess ops
    log_probs = z - z.exp().sum(dim=1, keepdim=True).log()
    return -(log_probs * y).sum() / x.shape[0]


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
