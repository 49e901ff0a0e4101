"""
Train a character-level GPT with tessc on a text the repository ships (its README and
ARCHITECTURE.md: no download): token and position embeddings, pre-norm blocks of causal
multi-head attention (`ts.nn.scaled_dot_product_attention`, the fused flash-attention
kernel: no (T, T) buffer, forward or backward) and a GELU MLP with residuals and dropout
(`ts.nn.dropout`, its mask drawn inside the kernel from a `ts.random` key), a final layer
norm and a linear head. The loss (`ts.nn.cross_entropy`), its gradients
(`ts.value_and_grad`) and the AdamW update (`ts.optim.AdamW`) are one jitted, donated step.

    python examples/train_transformer.py [--steps 300] [--layers 2] [--d-model 64]
        [--heads 4] [--context 64] [--batch 16] [--target cpu] [--plot FILE]

Shows a progress bar (tqdm), the train and validation loss against the unigram baseline
(the entropy of the training text's character frequencies), writes the curves to a PNG
(matplotlib) and prints a sample generated from the trained model.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tessc as ts

REPOSITORY = Path(__file__).resolve().parents[1]


DEFAULT_TEXTS = (REPOSITORY / "README.md", REPOSITORY / "ARCHITECTURE.md")


def load_text(paths: Sequence[Path] = DEFAULT_TEXTS) -> str:
    """The training text: by default the repository's own prose, README.md and ARCHITECTURE.md."""
    return "\n".join(Path(path).read_text() for path in paths)


def encode(text: str) -> tuple[np.ndarray, list[str]]:
    """The text as int64 character ids, and the alphabet (id -> character)."""
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    return np.array([index[c] for c in text], np.int64), alphabet


def unigram_loss(train: np.ndarray, val: np.ndarray, vocab: int) -> float:
    """The validation cross-entropy of the training text's character frequencies (+1)."""
    counts = np.bincount(train, minlength=vocab) + 1.0
    return float(-np.log(counts / counts.sum())[val].mean())


def init_params(vocab: int, args: argparse.Namespace, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    d = args.d_model

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def block() -> dict[str, np.ndarray]:
        out_std = 0.02 / math.sqrt(2 * args.layers)  # GPT-2's scaled residual projections
        return {
            "ln1_w": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
            "wq": normal(d, d), "wk": normal(d, d), "wv": normal(d, d),
            "wo": normal(d, d, std=out_std), "bo": np.zeros(d, np.float32),
            "ln2_w": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
            "w1": normal(d, 4 * d), "b1": np.zeros(4 * d, np.float32),
            "w2": normal(4 * d, d, std=out_std), "b2": np.zeros(d, np.float32),
        }  # fmt: skip

    return {
        "tokens": normal(vocab, d),
        "positions": normal(args.context, d),
        "blocks": [block() for _ in range(args.layers)],
        "ln_w": np.ones(d, np.float32),
        "ln_b": np.zeros(d, np.float32),
        "head": normal(d, vocab),
    }


# ---------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------


def attention(p, x, heads: int):
    batch, length, d = x.shape
    dh = d // heads

    def split(w):  # (B, T, D) -> (B, H, T, D/H)
        return (x @ w).reshape((batch, length, heads, dh)).transpose(1, 2)

    y = ts.nn.scaled_dot_product_attention(split(p["wq"]), split(p["wk"]), split(p["wv"]),
                                           is_causal=True)  # fmt: skip
    return y.transpose(1, 2).reshape((batch, length, d)) @ p["wo"] + p["bo"]


def logits(params, tokens, key, heads: int, rate: float):
    """(B, T, vocab) next-character logits; dropout at `rate` from `key` (0: none)."""
    d = params["tokens"].shape[1]
    x = ts.nn.embedding(tokens, params["tokens"]) + params["positions"][: tokens.shape[1]]
    for layer, p in enumerate(params["blocks"]):
        h = ts.nn.layer_norm(x, d, p["ln1_w"], p["ln1_b"])
        h = attention(p, h, heads)
        x = x + (ts.nn.dropout(h, rate, ts.random.fold_in(key, 2 * layer)) if rate else h)
        h = ts.nn.layer_norm(x, d, p["ln2_w"], p["ln2_b"])
        h = ts.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        x = x + (ts.nn.dropout(h, rate, ts.random.fold_in(key, 2 * layer + 1)) if rate else h)
    return ts.nn.layer_norm(x, d, params["ln_w"], params["ln_b"]) @ params["head"]


def loss_fn(params, tokens, targets, key, heads: int, rate: float):
    out = logits(params, tokens, key, heads, rate)
    batch, length, vocab = out.shape
    return ts.nn.cross_entropy(out.reshape((batch * length, vocab)), targets.reshape(-1))


def make_functions(optimizer: ts.optim.Optimizer, args: argparse.Namespace):
    heads, rate = args.heads, args.dropout

    @ts.jit(target=args.target, donate_argnums=(0, 1))
    def train_step(params, opt_state, tokens, targets, key):
        loss, grads = ts.value_and_grad(loss_fn)(params, tokens, targets, key, heads, rate)
        params, opt_state = optimizer.step(params, grads, opt_state)
        return params, opt_state, loss

    @ts.jit(target=args.target)
    def evaluate(params, tokens, targets, key):
        return loss_fn(params, tokens, targets, key, heads, 0.0)

    @ts.jit(target=args.target)
    def next_logits(params, tokens, key):
        return logits(params, tokens, key, heads, 0.0)[0, -1]

    return train_step, evaluate, next_logits


# ---------------------------------------------------------------------------------------
# data, plot, main
# ---------------------------------------------------------------------------------------


def batch_of(data: np.ndarray, starts: np.ndarray, context: int) -> tuple[np.ndarray, ...]:
    """Tokens and next-character targets, (B, context) each, from the `starts`."""
    window = starts[:, None] + np.arange(context + 1)
    chunk = data[window]
    return chunk[:, :-1], chunk[:, 1:]


def plot(history: dict[str, list[float]], baseline: float, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(history["step"], history["train"], label="train")
    ax.plot(history["step"], history["val"], label="validation")
    ax.axhline(baseline, color="gray", linestyle=":", label="unigram baseline")
    ax.set(xlabel="step", ylabel="cross-entropy (nats per character)", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def generate(next_logits, params, prompt: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """`count` characters sampled one by one, each from the last `len(prompt)` ones."""
    rng = np.random.default_rng(seed)
    tokens, key = list(prompt), ts.random.key(seed)
    for _ in range(count):
        window = np.array(tokens[-len(prompt) :], np.int64)[None]
        scores = np.asarray(next_logits(params, window, key), np.float64)
        p = np.exp(scores - scores.max())
        tokens.append(int(rng.choice(len(p), p=p / p.sum())))
    return np.array(tokens[len(prompt) :])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--sample", type=int, default=200, help="characters to generate")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--plot", default="train_transformer.png", help="PNG ('' for none)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--text", type=Path, nargs="+", default=list(DEFAULT_TEXTS),
                        help="files to train on (default: README, ARCHITECTURE.md)")  # fmt: skip
    args = parser.parse_args(argv)
    from tqdm import tqdm

    data, alphabet = encode(load_text(args.text))
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    baseline = unigram_loss(train, val, len(alphabet))
    rng = np.random.default_rng(1)
    val_starts = rng.integers(0, len(val) - args.context - 1, size=(4, args.batch))

    optimizer = ts.optim.AdamW(lr=args.lr, weight_decay=0.01)
    train_step, evaluate, next_logits = make_functions(optimizer, args)
    params = init_params(len(alphabet), args)
    state = optimizer.init(params)
    base_key = ts.random.key(0)

    def val_loss(params) -> float:
        losses = [evaluate(params, *batch_of(val, s, args.context), base_key) for s in val_starts]
        return float(np.mean([float(v) for v in losses]))

    history: dict[str, list[float]] = {"step": [], "train": [], "val": []}
    start, recent = time.perf_counter(), []
    bar = tqdm(range(1, args.steps + 1), desc=f"GPT on {args.target}", unit="step",
               disable=args.no_progress)  # fmt: skip
    for step in bar:
        starts = rng.integers(0, len(train) - args.context - 1, size=args.batch)
        key = ts.random.fold_in(base_key, step)  # a new dropout mask every step, no retrace
        params, state, loss = train_step(params, state, *batch_of(train, starts, args.context), key)
        recent.append(float(loss))
        if step % args.eval_every == 0 or step == args.steps:
            history["step"].append(step)
            history["train"].append(float(np.mean(recent)))
            history["val"].append(val_loss(params))
            recent = []
            bar.set_postfix(train=f"{history['train'][-1]:.3f}", val=f"{history['val'][-1]:.3f}")
    elapsed = time.perf_counter() - start

    print(f"unigram baseline: {baseline:.3f} nats/char; {args.steps} steps in {elapsed:.1f} s")
    print(" step  train   val")
    for step, tr, va in zip(history["step"], history["train"], history["val"], strict=True):
        print(f"{step:5d}  {tr:.3f}  {va:.3f}")
    history["baseline"] = [baseline]
    if args.plot:
        plot(history, baseline, args.plot, f"char GPT, AdamW, target {args.target}")
        print(f"wrote {args.plot}")
    if args.sample:
        prompt = val[: args.context]
        sample = generate(next_logits, params, prompt, args.sample)
        print("sample:\n" + "".join(alphabet[i] for i in sample))
    return history


if __name__ == "__main__":
    main()
