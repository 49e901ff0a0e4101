"""
The char-GPT train step, one transformer block forward + backward, and attention alone,
side by side in one run.

The train step (`step`) is examples/train_transformer.py's whole step, its own model
(bench/transformer_step.py): token and position embeddings, pre-norm blocks with dropout,
final layer norm, head, cross-entropy, gradients and the AdamW update, one fixed batch,
params and optimizer state fed back call after call, a new dropout key each call. The
block (`block`) is the example's block alone: pre-norm causal multi-head attention and a
GELU MLP with residuals, `x` `(B, T, D)`; a step is the loss `sum(block(x) * c)` and its
gradients for every parameter and `x`. Attention alone (`attention`) is
`scaled_dot_product_attention(q, k, v, is_causal=True)` `(B, H, L, E)` forward + backward.
Contenders: tessc (`jit` of `value_and_grad`; attention: the fused flash kernels), PyTorch
eager and `torch.compile` (train step: the model and the optimizer step compiled), and
`jax.jit` (each where installed). Times are medians over rounds; ratios are the other's
time over tessc's (above 1: tessc is faster). Memory: tessc's planned peak
(`tess.peak_bytes` of the compiled program, plus the kernels' scratch) next to the
`(L, L)` scores a materialising attention builds. The train step's first two losses with
dropout 0 are printed for every contender: they agree when the models do.
Each contender runs in a process of its own, one after the other (`--one-process`: all
in this one, alternating each round). In one process the contenders' thread pools (Numba's
OpenMP, PyTorch's, XLA's) slow each other down: on one thread torch.compile took 5.2 ms
there and 3.3 ms alone, and on two threads torch's time depended on whose OpenMP runtime
started first (2.6-3.9 or 5.4-7.3 ms).

    python bench/bench_transformer.py [--sections step,block,attention] [--step 16,64,64,4,2]
        [--batch 8] [--length 64] [--d-model 64] [--heads 4] [--attention 4,4,1024,64]
        [--rounds 5] [--repeats 3] [--step-repeats 10] [--skip torch,compile,jax]
        [--one-process]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from machine import describe_machine
from transformer_step import describe as describe_step
from transformer_step import first_losses, planned_bytes, step_contender, step_setup

import tessc as ts

Run = Callable[[], None]


def block_params(d: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones, zeros = np.ones(d, np.float32), np.zeros(d, np.float32)
    return {
        "ln1_w": ones, "ln1_b": zeros, "wq": normal(d, d), "wk": normal(d, d),
        "wv": normal(d, d), "wo": normal(d, d), "bo": zeros, "ln2_w": ones, "ln2_b": zeros,
        "w1": normal(d, 4 * d), "b1": np.zeros(4 * d, np.float32), "w2": normal(4 * d, d),
        "b2": zeros,
    }  # fmt: skip


# ---------------------------------------------------------------------------------------
# tessc
# ---------------------------------------------------------------------------------------


def tessc_block(p, x, heads: int):
    b, t, d = x.shape

    def split(w):
        return (h @ w).reshape((b, t, heads, d // heads)).transpose(1, 2)

    h = ts.nn.layer_norm(x, d, p["ln1_w"], p["ln1_b"])
    y = ts.nn.scaled_dot_product_attention(split(p["wq"]), split(p["wk"]), split(p["wv"]),
                                           is_causal=True)  # fmt: skip
    x = x + y.transpose(1, 2).reshape((b, t, d)) @ p["wo"] + p["bo"]
    h = ts.nn.layer_norm(x, d, p["ln2_w"], p["ln2_b"])
    return x + ts.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def tessc_block_run(params, x, c, heads: int) -> tuple[Run, int]:
    def loss(p, x, c):
        return (tessc_block(p, x, heads) * c).sum()

    step = ts.jit(ts.value_and_grad(loss, argnums=(0, 1)))
    step(params, x, c)
    return lambda: step(params, x, c), planned_bytes(step.ir(params, x, c, stage="loops"))


def tessc_attention_run(q, k, v, c) -> tuple[Run, int]:
    def loss(q, k, v, c):
        return (ts.nn.scaled_dot_product_attention(q, k, v, is_causal=True) * c).sum()

    step = ts.jit(ts.value_and_grad(loss, argnums=(0, 1, 2)))
    step(q, k, v, c)
    return lambda: step(q, k, v, c), planned_bytes(step.ir(q, k, v, c, stage="loops"))


# ---------------------------------------------------------------------------------------
# PyTorch (eager, torch.compile) and JAX
# ---------------------------------------------------------------------------------------


def torch_runs(params, x, c, heads, q, k, v, ca, compiled: bool) -> tuple[Run, Run] | None:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    p = {name: torch.tensor(a, requires_grad=True) for name, a in params.items()}
    xt, ct = torch.tensor(x, requires_grad=True), torch.tensor(c)

    def block(p, x):
        b, t, d = x.shape

        def split(w):
            return (h @ w).reshape(b, t, heads, d // heads).transpose(1, 2)

        h = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
        y = F.scaled_dot_product_attention(split(p["wq"]), split(p["wk"]), split(p["wv"]),
                                           is_causal=True)  # fmt: skip
        x = x + y.transpose(1, 2).reshape(b, t, d) @ p["wo"] + p["bo"]
        h = F.layer_norm(x, (d,), p["ln2_w"], p["ln2_b"])
        return x + F.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def block_step(p, x, c):
        loss = (block(p, x) * c).sum()
        return loss, torch.autograd.grad(loss, [*p.values(), x])

    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    cat = torch.tensor(ca)

    def attention_step(q, k, v, c):
        loss = (F.scaled_dot_product_attention(q, k, v, is_causal=True) * c).sum()
        return loss, torch.autograd.grad(loss, [q, k, v])

    if compiled:
        block_step, attention_step = torch.compile(block_step), torch.compile(attention_step)
    block_step(p, xt, ct)
    attention_step(qt, kt, vt, cat)
    return lambda: block_step(p, xt, ct), lambda: attention_step(qt, kt, vt, cat)


def jax_runs(params, x, c, heads, q, k, v, ca) -> tuple[Run, Run] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * w + b

    def attention(q, k, v):
        length = q.shape[-2]
        s = q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
        s = jnp.where(jnp.tril(jnp.ones((length, length), bool)), s, -jnp.inf)
        return jax.nn.softmax(s, axis=-1) @ v

    def block(p, x):
        b, t, d = x.shape

        def split(w):
            return jnp.swapaxes((h @ w).reshape(b, t, heads, d // heads), 1, 2)

        h = layer_norm(x, p["ln1_w"], p["ln1_b"])
        y = attention(split(p["wq"]), split(p["wk"]), split(p["wv"]))
        x = x + jnp.swapaxes(y, 1, 2).reshape(b, t, d) @ p["wo"] + p["bo"]
        h = layer_norm(x, p["ln2_w"], p["ln2_b"])
        return x + jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False) @ p["w2"] + p["b2"]

    block_step = jax.jit(jax.value_and_grad(lambda p, x, c: (block(p, x) * c).sum(), (0, 1)))
    attention_step = jax.jit(
        jax.value_and_grad(lambda q, k, v, c: (attention(q, k, v) * c).sum(), (0, 1, 2))
    )
    pj, xj, cj = {n: jnp.asarray(a) for n, a in params.items()}, jnp.asarray(x), jnp.asarray(c)
    qj, kj, vj, caj = (jnp.asarray(a) for a in (q, k, v, ca))
    jax.block_until_ready(block_step(pj, xj, cj))
    jax.block_until_ready(attention_step(qj, kj, vj, caj))
    return (
        lambda: jax.block_until_ready(block_step(pj, xj, cj)),
        lambda: jax.block_until_ready(attention_step(qj, kj, vj, caj)),
    )


# ---------------------------------------------------------------------------------------
# timing, main
# ---------------------------------------------------------------------------------------


def measure(runs: dict[str, Run], rounds: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall, process CPU) seconds per call; the order rotates every round."""
    wall: dict[str, list[float]] = {n: [] for n in runs}
    cpu: dict[str, list[float]] = {n: [] for n in runs}
    order = list(runs.items())
    for round_ in range(rounds):
        shift = round_ % len(order)
        for name, run in order[shift:] + order[:shift]:
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(repeats):
                run()
            wall[name].append((time.perf_counter() - start) / repeats)
            cpu[name].append((time.process_time() - cpu_start) / repeats)
    return {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in runs}


def report(title: str, results: dict[str, tuple[float, float]], memory: dict[str, str]) -> None:
    base_wall, base_cpu = results["tessc"]
    print(f"\n{title}")
    print("| contender | wall ms | it / tessc | CPU ms | it / tessc | memory |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, (wall, cpu) in results.items():
        print(
            f"| {name} | {1e3 * wall:.2f} | {wall / base_wall:.2f}x | {1e3 * cpu:.2f} | "
            f"{cpu / base_cpu:.2f}x | {memory.get(name, '')} |"
        )


CONTENDERS = {"tessc": "", "PyTorch eager": "torch", "torch.compile": "compile", "JAX jit": "jax"}
"""Each contender and the `--skip` word that leaves it out."""


class Made(NamedTuple):
    """A contender's runs and notes by section, and its train step's check losses."""

    runs: dict[str, Run]
    notes: dict[str, str]
    losses: list[float]


def contender_runs(name: str, args: argparse.Namespace) -> Made | None:
    """`name`'s runs of `args.sections`, or None where not installed."""
    sections = wanted_sections(args)
    made = Made({}, {}, [])
    if "step" in sections:
        step = step_contender(name, step_setup(args.step))
        if step is None:
            return None
        made.runs["step"], losses, made.notes["step"] = step
        made.losses.extend(losses)
    if not {"block", "attention"} & set(sections):
        return made
    rng = np.random.default_rng(0)
    d = args.d_model
    params = block_params(d)
    x = rng.standard_normal((args.batch, args.length, d)).astype(np.float32)
    c = rng.standard_normal(x.shape).astype(np.float32)
    b, h, length, e = (int(n) for n in args.attention.split(","))
    q, k, v, ca = (rng.standard_normal((b, h, length, e)).astype(np.float32) for _ in range(4))
    if name == "tessc":
        if "block" in sections:
            made.runs["block"], block_bytes = tessc_block_run(params, x, c, args.heads)
            made.notes["block"] = f"planned peak {block_bytes / 2**20:.2f} MiB"
        if "attention" in sections:
            made.runs["attention"], attention_bytes = tessc_attention_run(q, k, v, ca)
            made.notes["attention"] = f"planned peak {attention_bytes / 2**20:.2f} MiB"
        return made
    if name == "JAX jit":
        pair = jax_runs(params, x, c, args.heads, q, k, v, ca)
    else:
        compiled = name == "torch.compile"
        pair = torch_runs(params, x, c, args.heads, q, k, v, ca, compiled=compiled)
    if not pair:
        return None
    made.runs.update(
        (s, run) for s, run in zip(("block", "attention"), pair, strict=True) if s in sections
    )
    if name == "PyTorch eager":
        made.notes["attention"] = (
            f"(the (L, L) scores alone: {b * h * length**2 * 4 / 2**20:.2f} MiB)"
        )
    return made


SECTIONS = ("step", "block", "attention")
"""The sections `--sections` picks from, in the order they are reported."""


def wanted_sections(args: argparse.Namespace) -> list[str]:
    words = [w for w in args.sections.split(",") if w]
    unknown = set(words) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"--sections: unknown {sorted(unknown)}, expected some of {SECTIONS}")
    return [s for s in SECTIONS if s in words]


def repeats_of(section: str, args: argparse.Namespace) -> int:
    return {"step": args.step_repeats, "block": args.repeats, "attention": 1}[section]


def child_argv(name: str, args: argparse.Namespace) -> list[str]:
    """The command line measuring `name` alone in a process of its own: every option of
    `args` but those choosing the contenders and the processes."""
    options = {k: v for k, v in vars(args).items() if k not in ("only", "one_process", "skip")}
    return [
        sys.executable, __file__, "--only", name,
        *(part for k, v in options.items() for part in ("--" + k.replace("_", "-"), str(v))),
    ]  # fmt: skip


def measure_apart(name: str, args: argparse.Namespace) -> dict | None:
    """`name` measured in a process of its own (no other contender's threads or OpenMP
    runtime in it): {section: (wall, cpu), ..., "notes": {...}, "losses": [...]}."""
    done = subprocess.run(child_argv(name, args), capture_output=True, text=True)
    if done.returncode != 0:
        print(f"({name} failed in its process: {done.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help="some of step,block,attention"
    )
    parser.add_argument("--step", default="16,64,64,4,2",
                        help="B,T,D,H,layers of the char-GPT train step")  # fmt: skip
    parser.add_argument("--batch", type=int, default=8, help="the block's B")
    parser.add_argument("--length", type=int, default=64, help="the block's T")
    parser.add_argument("--d-model", type=int, default=64, help="the block's D")
    parser.add_argument("--heads", type=int, default=4, help="the block's heads")
    parser.add_argument("--attention", default="4,4,1024,64", help="B,H,L,E of attention")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="block calls per round")
    parser.add_argument("--step-repeats", type=int, default=10, help="train steps per round")
    parser.add_argument("--skip", default="", help="left out: torch,compile,jax")
    parser.add_argument(
        "--one-process",
        action="store_true",
        help="every contender in this process, alternating each round (their thread pools "
        "then slow each other down); by default each runs in a process of its own",
    )
    parser.add_argument("--only", default="", help=argparse.SUPPRESS)  # the child process
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    sections = wanted_sections(args)
    if args.only:
        made = contender_runs(args.only, args)
        if not made:
            sys.exit(1)
        results: dict[str, Any] = {
            s: measure({args.only: made.runs[s]}, args.rounds, repeats_of(s, args))[args.only]
            for s in sections
        }
        print(json.dumps({**results, "notes": made.notes, "losses": made.losses}))
        return
    print(describe_machine())
    print("command: python bench/bench_transformer.py " + " ".join(sys.argv[1:]))
    skip = set(filter(None, args.skip.split(",")))
    wanted = [n for n, word in CONTENDERS.items() if not word or word not in skip]

    results_of: dict[str, dict[str, tuple[float, float]]] = {s: {} for s in sections}
    notes_of: dict[str, dict[str, str]] = {s: {} for s in sections}
    losses: dict[str, list[float]] = {}
    missing = []
    if not args.one_process:
        for name in wanted:
            apart = measure_apart(name, args)
            if apart is None:
                missing.append(name)
                continue
            for s in sections:
                results_of[s][name] = tuple(apart[s])
                notes_of[s][name] = apart["notes"].get(s, "")
            if apart["losses"]:
                losses[name] = apart["losses"]
    else:
        runs_of: dict[str, dict[str, Run]] = {s: {} for s in sections}
        for name in wanted:
            made = contender_runs(name, args)
            if not made:
                missing.append(name)
                continue
            for s in sections:
                runs_of[s][name] = made.runs[s]
                notes_of[s][name] = made.notes.get(s, "")
            if made.losses:
                losses[name] = made.losses
        for s in sections:
            results_of[s] = measure(runs_of[s], args.rounds, repeats_of(s, args))

    b, h, length, e = (int(n) for n in args.attention.split(","))
    titles = {
        "step": describe_step(args.step),
        "block": f"transformer block (B={args.batch}, T={args.length}, D={args.d_model}, "
        f"{args.heads} heads), forward + backward",
        "attention": f"causal attention (B={b}, H={h}, L={length}, E={e}), forward + backward",
    }
    for s in sections:
        report(titles[s], results_of[s], notes_of[s])
        if s == "step" and losses:
            print(first_losses(losses))
    if missing:
        print(f"(not installed or left out: {', '.join(missing)})")


if __name__ == "__main__":
    main()
