"""
Compile latency: the first call in a fresh process, cold (empty caches) and warm (a
second process on the same caches), side by side with JAX's jit and torch.compile.

Workloads (issue 12): W1 `relu(x*w + b) * sigmoid(x) - 0.5x` on 2^24 f32; W2 the seed's
zip+reduce at 256; the digits MLP 64-128-10 train step (value_and_grad + SGD, batch 128);
and `tessc-opt` taking a generated 1,000-op `tess` program through the `cpu` pipeline to
Numba source. The floor is the first call of one cached parallel Numba kernel in a fresh
process with Numba imported. Every measurement is its own process with its own cache
directories; each child imports its library (numba, jax, torch) before the clock starts
and reports the wall and CPU time of the first call (tracing, compiling or loading, and
running once). On a machine other work keeps busy, wall time inflates and CPU time much
less: both are printed. CPU time includes the child processes the first call waited for
(tessc's compile worker; torch.compile's compile workers outlive the call and are missed).

    python bench/bench_compile.py [--repeat 1] [--no-torch-compile] [--no-jax]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    contender, workload = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    n = 1 << 24
    if workload == "w1":
        args = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    elif workload == "w2":
        args = [rng.standard_normal((256, 256, 1)).astype(np.float32),
                rng.standard_normal((1, 256, 256)).astype(np.float32)]
    else:
        sys.path.insert(0, "bench")
        from mlp_step import init_params, load_digits_data
        xt, yt, _, _ = load_digits_data()
        params = init_params(128)
        args = [params, xt[:128], yt[:128]]

    if contender == "tessc":
        import numba  # noqa: F401  (the floor has Numba imported too)
        import tessc as ts
        if workload == "w1":
            fn = ts.jit(lambda x, w, b: (x * w + b).relu() * x.sigmoid() - 0.5 * x)
        elif workload == "w2":
            fn = ts.jit(lambda a, b: (a * b).sum(dim=1))
        else:
            from mlp_step import loss_fn
            def step(p, x, y):
                loss, g = ts.value_and_grad(loss_fn)(p, x, y)
                return {k: p[k] - 0.1 * g[k] for k in p}, loss
            fn = ts.jit(step)
        call = lambda: fn(*args)
    elif contender == "floor":
        import numba
        @numba.njit(parallel=True, cache=True)
        def kernel(x, out):
            for i in numba.prange(x.shape[0]):
                out[i] = x[i] * 2.0
        out = np.empty_like(args[0])
        call = lambda: kernel(args[0], out)
    elif contender == "jax":
        import jax, jax.numpy as jnp
        if workload == "w1":
            fn = jax.jit(lambda x, w, b: jnp.maximum(x * w + b, 0) * jax.nn.sigmoid(x) - 0.5 * x)
        elif workload == "w2":
            fn = jax.jit(lambda a, b: (a * b).sum(axis=1))
        else:
            def loss(p, x, y):
                h = jnp.maximum(x @ p["w1"] + p["b1"], 0)
                z = h @ p["w2"] + p["b2"]
                return -(jax.nn.log_softmax(z, axis=1) * y).sum() / x.shape[0]
            @jax.jit
            def fn(p, x, y):
                v, g = jax.value_and_grad(loss)(p, x, y)
                return {k: p[k] - 0.1 * g[k] for k in p}, v
        call = lambda: jax.block_until_ready(fn(*args))
    else:  # torch.compile
        import torch
        torch.set_num_threads(2)
        targs = [{k: torch.tensor(v) for k, v in a.items()} if isinstance(a, dict)
                 else torch.tensor(a) for a in args]
        if workload == "w1":
            fn = torch.compile(lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x) - 0.5 * x)
        elif workload == "w2":
            fn = torch.compile(lambda a, b: (a * b).sum(dim=1))
        else:
            def step(p, x, y):
                p = {k: v.detach().requires_grad_() for k, v in p.items()}
                h = torch.relu(x @ p["w1"] + p["b1"])
                z = h @ p["w2"] + p["b2"]
                loss = -(torch.log_softmax(z, dim=1) * y).sum() / x.shape[0]
                g = torch.autograd.grad(loss, list(p.values()))
                return {k: v - 0.1 * gk for (k, v), gk in zip(p.items(), g)}, loss
            fn = torch.compile(step)
        call = lambda: fn(*targs)
    def cpu_time():  # this process and the children it waited for (compile workers)
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    wall, cpu = time.perf_counter(), cpu_time()
    call()
    wall = time.perf_counter() - wall
    if contender == "tessc":  # its compile worker's CPU counts once it has exited
        from tessc.runtime.external import stop_worker
        stop_worker()
    print(json.dumps({"wall": wall, "cpu": cpu_time() - cpu}))
    """
)


def child(contender: str, workload: str, caches: Path) -> dict[str, float] | None:
    # A file, not `-c`: Numba's `cache=True` (the floor's kernel) needs a source file.
    script = caches.parent / "first_call.py"
    if not script.exists():
        script.write_text(CHILD)
    env = dict(
        os.environ,
        TESSC_CACHE_DIR=str(caches / "kernels"),
        NUMBA_CACHE_DIR=str(caches / "numba"),
        TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
        JAX_PLATFORMS="cpu",
    )
    env.pop("TESSC_TIMING", None)
    done = subprocess.run(
        [sys.executable, str(script), contender, workload],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"  ({contender} {workload} failed: {done.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def thousand_op_program() -> str:
    """A `tess` program of 1,000 ops: elementwise chains with a matmul every 50 ops, on
    64x64 f32."""
    from tessc.fuzz.programs import chain_program  # here: the parent process stays light

    return chain_program(1000, 64, matmul_every=50, name="big")


def tessc_opt_1000(path: Path) -> dict[str, float]:
    from tessc.pipelines import get_pipeline

    spec = get_pipeline("cpu").passes_to("loops")
    command = [str(Path(sys.executable).parent / "tessc-opt"), str(path), "-p", spec, "-t", "numba"]
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = after.children_user + after.children_system
    cpu -= before.children_user + before.children_system
    return {"wall": wall, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--workloads", default="w1,w2,mlp")
    args = parser.parse_args()
    print(describe_machine())
    print("command: python bench/bench_compile.py " + " ".join(sys.argv[1:]))

    rows: list[tuple[str, str, dict[str, float] | None]] = []
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        floor_dir = base / "floor"
        child("floor", "w1", floor_dir)  # compiles the floor kernel into its cache
        floor = child("floor", "w1", floor_dir)
        rows.append(("floor: one cached parallel Numba kernel", "-", floor))
        for workload in args.workloads.split(","):
            caches = base / f"tessc-{workload}"
            rows.append(("tessc cold (empty caches)", workload, child("tessc", workload, caches)))
            rows.append(("tessc warm (second process)", workload, child("tessc", workload, caches)))
            if not args.no_jax:
                rows.append(("JAX jit", workload, child("jax", workload, base / f"j-{workload}")))
            if not args.no_torch_compile:
                rows.append(("torch.compile cold", workload, child("torch", workload, base / "t")))
        program = base / "big.mlir"
        program.write_text(thousand_op_program())
        rows.append(("tessc-opt, 1,000 ops -> Numba source", "-", tessc_opt_1000(program)))

    floor = rows[0][2]["wall"] if rows[0][2] else float("nan")
    print("\n| first call in a fresh process | workload | wall s | CPU s | wall / floor |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, workload, result in rows:
        if result is None:
            print(f"| {name} | {workload} | failed | | |")
            continue
        wall, cpu = result["wall"], result["cpu"]
        print(f"| {name} | {workload} | {wall:.2f} | {cpu:.2f} | {wall / floor:.1f}x |")


if __name__ == "__main__":
    main()
