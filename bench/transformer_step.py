"""
The character-level GPT's whole train step (examples/train_transformer.py: embeddings, the
blocks with dropout, final layer norm, head, cross-entropy, gradients and the AdamW update)
for bench/bench_transformer.py, one contender at a time: tessc (the example's own
`make_functions`, `init_params`, `encode`, `load_text`, `batch_of`: one model definition),
PyTorch eager, `torch.compile` (the model and the optimizer step compiled) and `jax.jit`.

All start from the example's initial values and train on one fixed batch of the example's
text. A step is donated (tessc, JAX) or updates in place (PyTorch), so each timed call
feeds back what the last one returned, as a training loop does, and draws a new dropout
mask. The first two steps' losses with dropout 0 check that the contenders compute the
same thing (step 2's loss depends on step 1's gradients and AdamW update).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import tessc as ts

Run = Callable[[], None]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_transformer.py"
LR, WEIGHT_DECAY, BETAS, EPS = 3e-3, 0.01, (0.9, 0.999), 1e-8
RATE = 0.1
"""The example's dropout rate and AdamW settings (`torch.optim.AdamW`'s betas and eps)."""


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_transformer_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class StepSetup:
    example: ModuleType
    config: argparse.Namespace  # the example's options (layers, d_model, heads, ...)
    tokens: np.ndarray  # (B, T) int64, the same batch every step
    targets: np.ndarray
    params: dict[str, Any]  # the example's initial values (numpy)


def step_setup(spec: str) -> StepSetup:
    """The step `B,T,D,H,layers` (batch, context, d_model, heads, layers) on the example's text."""
    batch, context, d_model, heads, layers = (int(n) for n in spec.split(","))
    example = load_example()
    config = argparse.Namespace(
        batch=batch, context=context, d_model=d_model, heads=heads, layers=layers,
        dropout=RATE, lr=LR, target="cpu",
    )  # fmt: skip
    data, alphabet = example.encode(example.load_text())
    starts = np.random.default_rng(1).integers(0, len(data) - context - 1, size=batch)
    tokens, targets = example.batch_of(data, starts, context)
    params = example.init_params(len(alphabet), config)
    return StepSetup(example, config, np.ascontiguousarray(tokens),
                     np.ascontiguousarray(targets), params)  # fmt: skip


def planned_bytes(ir: str) -> int:
    """The largest planned peak plus kernel scratch of a compiled program's hosts."""
    peaks = [int(v) for v in re.findall(r"tess\.peak_bytes = (\d+)", ir)]
    scratch = [int(v) for v in re.findall(r"tess\.workspace_bytes = (\d+)", ir)]
    return max(peaks, default=0) + max(scratch, default=0)


def copied(tree: Any) -> Any:
    """A fresh copy of a pytree of arrays (a donated step consumes its input)."""
    return ts.tree_util.tree_map(np.array, tree)


# ---------------------------------------------------------------------------------------
# tessc: the example's step
# ---------------------------------------------------------------------------------------


def tessc_losses(setup: StepSetup) -> list[float]:
    """The first two losses of the example's train step with dropout 0."""
    example, tokens, targets = setup.example, setup.tokens, setup.targets
    optimizer = ts.optim.AdamW(lr=LR, weight_decay=WEIGHT_DECAY)
    check_config = argparse.Namespace(**{**vars(setup.config), "dropout": 0.0})
    check = example.make_functions(optimizer, check_config)[0]
    params, state = copied(setup.params), optimizer.init(copied(setup.params))
    losses = []
    for _ in range(2):
        params, state, loss = check(params, state, tokens, targets, ts.random.key(0))
        losses.append(float(loss))
    return losses


def tessc_step(setup: StepSetup) -> tuple[Run, list[float], str]:
    """(a step feeding back its params and state, the first two losses with dropout 0, notes)."""
    example, tokens, targets = setup.example, setup.tokens, setup.targets
    optimizer = ts.optim.AdamW(lr=LR, weight_decay=WEIGHT_DECAY)
    losses = tessc_losses(setup)
    train_step = example.make_functions(optimizer, setup.config)[0]
    base_key = ts.random.key(0)
    params = copied(setup.params)
    live = {"params": params, "state": optimizer.init(params), "step": 0}

    def run() -> None:
        live["step"] += 1
        key = ts.random.fold_in(base_key, live["step"])  # as the example: no retrace
        live["params"], live["state"], _ = train_step(
            live["params"], live["state"], tokens, targets, key
        )

    run()
    run()
    traced = train_step.trace_count

    def checked() -> None:
        run()
        if train_step.trace_count != traced:
            raise RuntimeError("the tessc train step traced again")

    ir = train_step.ir(live["params"], live["state"], tokens, targets, base_key, stage="loops")
    kernels = len(re.findall(r"func\.func private @\w+_kernel_\d+\(", ir))
    return checked, losses, f"planned peak {planned_bytes(ir) / 2**20:.2f} MiB, {kernels} kernels"


# ---------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------


def torch_model(setup: StepSetup, rate: float) -> Any:
    """The example's GPT as an `nn.Module` holding the example's initial values."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    heads = setup.config.heads

    def linear(w: np.ndarray, b: np.ndarray | None = None) -> nn.Linear:
        layer = nn.Linear(*w.shape, bias=b is not None)
        with torch.no_grad():  # tessc's x @ w is nn.Linear's x @ weight.T
            layer.weight.copy_(torch.from_numpy(w.T.copy()))
            if b is not None:
                layer.bias.copy_(torch.from_numpy(b))
        return layer

    def layer_norm(w: np.ndarray, b: np.ndarray) -> nn.LayerNorm:
        norm = nn.LayerNorm(len(w), eps=1e-5)
        with torch.no_grad():
            norm.weight.copy_(torch.from_numpy(w))
            norm.bias.copy_(torch.from_numpy(b))
        return norm

    class Block(nn.Module):
        def __init__(self, p: dict[str, np.ndarray]):
            super().__init__()
            self.ln1, self.ln2 = (
                layer_norm(p["ln1_w"], p["ln1_b"]),
                layer_norm(p["ln2_w"], p["ln2_b"]),
            )
            self.wq, self.wk, self.wv = linear(p["wq"]), linear(p["wk"]), linear(p["wv"])
            self.wo = linear(p["wo"], p["bo"])
            self.w1, self.w2 = linear(p["w1"], p["b1"]), linear(p["w2"], p["b2"])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            h = self.ln1(x)

            def split(w: nn.Linear) -> torch.Tensor:
                return w(h).view(b, t, heads, d // heads).transpose(1, 2)

            y = F.scaled_dot_product_attention(split(self.wq), split(self.wk), split(self.wv),
                                               is_causal=True)  # fmt: skip
            h = self.wo(y.transpose(1, 2).reshape(b, t, d))
            x = x + F.dropout(h, rate, self.training)
            h = self.w2(F.gelu(self.w1(self.ln2(x))))
            return x + F.dropout(h, rate, self.training)

    class GPT(nn.Module):
        def __init__(self, params: dict[str, Any]):
            super().__init__()
            self.tokens = nn.Embedding.from_pretrained(
                torch.from_numpy(params["tokens"].copy()), freeze=False
            )
            self.positions = nn.Parameter(torch.from_numpy(params["positions"].copy()))
            self.blocks = nn.ModuleList(Block(p) for p in params["blocks"])
            self.ln = layer_norm(params["ln_w"], params["ln_b"])
            self.head = linear(params["head"])

        def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            x = self.tokens(tokens) + self.positions[: tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            out = self.head(self.ln(x))
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))

    return GPT(setup.params)


def torch_step(setup: StepSetup, compiled: bool) -> tuple[Run, list[float], str] | None:
    try:
        import torch
        from torch.optim.optimizer import _default_to_fused_or_foreach
    except ImportError:
        return None
    tokens, targets = torch.from_numpy(setup.tokens), torch.from_numpy(setup.targets)
    losses = []
    if not compiled:
        model = torch_model(setup, 0.0)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                weight_decay=WEIGHT_DECAY)  # fmt: skip
        for _ in range(2):
            opt.zero_grad()
            loss = model(tokens, targets)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    model = torch_model(setup, RATE)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)  # fmt: skip
    fused, foreach = _default_to_fused_or_foreach(list(model.parameters()), False, False)
    kind = "fused" if fused else "foreach" if foreach else "for-loop (single-tensor)"
    forward, opt_step = model, opt.step
    if compiled:
        forward = torch.compile(model)
        opt_step = torch.compile(opt.step)  # PyTorch's "compiling the optimizer" recipe

    def run() -> None:
        opt.zero_grad()
        forward(tokens, targets).backward()
        opt_step()

    for _ in range(5):  # compiles (the optimizer's graph after its state exists)
        run()
    if compiled:
        import torch._dynamo

        torch._dynamo.config.error_on_recompile = True  # none while timing
    return run, losses, f"AdamW {kind}" + (" (compiled)" if compiled else "")


# ---------------------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------------------


def jax_step(setup: StepSetup) -> tuple[Run, list[float], str] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    heads = setup.config.heads

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * w + b

    def dropout(x, rate, key):
        if not rate:
            return x
        return jnp.where(jax.random.bernoulli(key, 1.0 - rate, x.shape), x / (1.0 - rate), 0.0)

    def loss_fn(params, tokens, targets, key, rate):
        batch, length = tokens.shape
        d = params["tokens"].shape[1]
        x = params["tokens"][tokens] + params["positions"][:length]
        for layer, p in enumerate(params["blocks"]):
            h = layer_norm(x, p["ln1_w"], p["ln1_b"])
            q, k, v = (
                (h @ p[w]).reshape(batch, length, heads, d // heads) for w in ("wq", "wk", "wv")
            )
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True)  # (B, T, N, H): no transposes
            h = y.reshape(batch, length, d) @ p["wo"] + p["bo"]
            x = x + dropout(h, rate, jax.random.fold_in(key, 2 * layer))
            h = layer_norm(x, p["ln2_w"], p["ln2_b"])
            h = jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False) @ p["w2"] + p["b2"]
            x = x + dropout(h, rate, jax.random.fold_in(key, 2 * layer + 1))
        out = layer_norm(x, params["ln_w"], params["ln_b"]) @ params["head"]
        logp = jax.nn.log_softmax(out.reshape(batch * length, -1), axis=-1)
        return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=-1).mean()

    def make_step(rate: float):
        def step(params, state, tokens, targets, base_key):
            t = state["t"] + 1
            key = jax.random.fold_in(base_key, t)
            loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets, key, rate)
            b1, b2 = BETAS
            m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
            v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
            size = LR / (1 - b1**t)
            root = jnp.sqrt(1 - b2**t)

            def update(p, m, v):  # torch.optim.AdamW's single-tensor update
                return p * (1 - LR * WEIGHT_DECAY) - size * m / (jnp.sqrt(v) / root + EPS)

            params = jax.tree.map(update, params, m, v)
            return params, {"t": t, "m": m, "v": v}, loss

        return jax.jit(step, donate_argnums=(0, 1))

    def fresh() -> tuple[Any, Any]:
        params = jax.tree.map(jnp.asarray, copied(setup.params))
        m, v = (jax.tree.map(jnp.zeros_like, params) for _ in range(2))
        return params, {"t": jnp.zeros((), jnp.int32), "m": m, "v": v}

    tokens, targets = jnp.asarray(setup.tokens), jnp.asarray(setup.targets)
    base_key = jax.random.key(0)
    check, losses = make_step(0.0), []
    params, state = fresh()
    for _ in range(2):
        params, state, loss = check(params, state, tokens, targets, base_key)
        losses.append(float(loss))
    train_step = make_step(RATE)
    live = dict(zip(("params", "state"), fresh(), strict=True))

    def run() -> None:
        live["params"], live["state"], loss = train_step(live["params"], live["state"], tokens,
                                                         targets, base_key)  # fmt: skip
        loss.block_until_ready()

    run()
    run()
    compiles = train_step._cache_size()

    def checked() -> None:
        run()
        if train_step._cache_size() != compiles:
            raise RuntimeError("the JAX train step compiled again")

    return checked, losses, "AdamW written out, key folded in the step"


def step_contender(name: str, setup: StepSetup) -> tuple[Run, list[float], str] | None:
    if name == "tessc":
        return tessc_step(setup)
    if name == "JAX jit":
        return jax_step(setup)
    return torch_step(setup, compiled=name == "torch.compile")


def first_losses(losses: dict[str, list[float]]) -> str:
    """The equivalence line: each contender's first two losses with dropout 0."""
    shown = ", ".join(f"{name} {' '.join(f'{v:.6f}' for v in vs)}" for name, vs in losses.items())
    return f"steps 1 and 2 loss (dropout 0, same init and batch): {shown}"


def describe(spec: str) -> str:
    batch, context, d_model, heads, layers = (int(n) for n in spec.split(","))
    return (
        f"char-GPT train step (examples/train_transformer.py: B={batch}, T={context}, "
        f"D={d_model}, {heads} heads, {layers} layers, dropout {RATE}, AdamW lr {LR} "
        f"weight decay {WEIGHT_DECAY}): loss, gradients, update"
    )
