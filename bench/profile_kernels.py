"""
Where a compiled `jit` step's time goes, kernel by kernel (CPU targets).

The generated host is a Numba function calling its kernels (`runtime/external.py`: C
callables taking addresses); here its Python source (`py_func`) runs instead, each kernel
called through `ctypes` inside a timer, so every call is timed alone. A `ctypes` call costs
a microsecond or two that the compiled host does not pay: the report gives the host's own
time per step next to the sum of the kernels' times.

    python bench/profile_kernels.py [--batch 8] [--length 64] [--d-model 64] [--heads 4]
        [--rounds 20] [--top 15] [--cpu-time] [--train-step 16,64,64,4,2]

profiles bench_transformer's block step (value and gradients of one transformer block), or
with `--train-step B,T,D,H,layers` its char-GPT train step (examples/train_transformer.py's,
dropout and AdamW included; the host's calls then also time the jit call around it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_transformer import block_params, tessc_block
from machine import describe_machine
from transformer_step import LR, WEIGHT_DECAY, copied, step_setup

import tessc as ts


def kernel_times(
    step: Any, args: tuple[Any, ...], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[dict[str, float], float]:
    """(median seconds per call of each kernel, median seconds of the compiled host) over
    `rounds` steps of the jitted `step` on `args` (called once before), read from `clock`
    (`time.process_time`: the CPU time of this process's threads, Numba's workers among
    them: with one thread, what a kernel costs however loaded the machine is)."""
    (executable,) = step._compiled.values()
    module, host = executable.module, executable.function
    kernels = {n: getattr(module, n) for n in dir(module) if re.search(r"_kernel_\d+$", n)}
    samples: dict[str, list[float]] = defaultdict(list)
    per_round: dict[str, float] = defaultdict(float)

    def timed(name: str, kernel: Any) -> Callable[..., None]:
        # An `ExternalKernel` through its C callable; a Numba dispatcher (a parallel
        # kernel, linked into the host) called as it is.
        function = kernel.cfunc.ctypes if hasattr(kernel, "cfunc") else kernel

        def call(*addresses: Any) -> None:
            start = clock()
            function(*addresses)
            per_round[name] += clock() - start

        return call

    real = step._fast
    captured: list[tuple[Any, ...]] = []

    def capture(*arrays: Any) -> None:
        captured.append(arrays)
        host(*arrays)

    executable.function = capture
    step._fast = None
    try:
        step(*args)
    finally:
        executable.function, step._fast = host, real
    (host_args,) = captured
    host_times = []
    for _ in range(rounds):
        start = clock()
        host(*host_args)
        host_times.append(clock() - start)
    namespace = host.py_func.__globals__
    saved = {n: namespace[n] for n in kernels}
    namespace.update({n: timed(n, k) for n, k in kernels.items()})
    try:
        for _ in range(rounds):
            per_round.clear()
            start = clock()
            host.py_func(*host_args)
            samples["(the host in Python, all of it)"].append(clock() - start)
            for name, seconds in per_round.items():
                samples[name].append(seconds)
    finally:
        namespace.update(saved)
    medians = {n: statistics.median(s) for n, s in samples.items()}
    return medians, statistics.median(host_times)


def kernel_operands(ir: str) -> dict[str, str]:
    """Each kernel's operand shapes in the loop-level IR (what identifies it in a report:
    the tess op labels are gone at that level)."""
    found = {}
    for match in re.finditer(r"func\.func private @(\w+_kernel_\d+)\((.*?)\)", ir):
        shapes = re.findall(r"memref<([^>]*?)x?f(?:32|64)", match.group(2))
        found[match.group(1)] = " ".join(shape or "()" for shape in shapes)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time by the process's CPU time, not wall time (meaningful with one thread: "
        "NUMBA_NUM_THREADS=1)",
    )
    parser.add_argument("--train-step", default="", help="B,T,D,H,layers: the char-GPT step")
    options = parser.parse_args()
    print(describe_machine())
    clock = time.process_time if options.cpu_time else time.perf_counter
    step, args = (
        train_step(options.train_step, clock) if options.train_step else block_step(options)
    )
    times, host = kernel_times(step, args, options.rounds, clock)
    kinds = kernel_operands(step.ir(*args, stage="loops"))
    python_host = times.pop("(the host in Python, all of it)")
    total = sum(times.values())
    print(f"clock: {'process CPU time' if options.cpu_time else 'wall time'}")
    print(f"{len(times)} kernels; compiled host {host * 1e3:.3f} ms/step; the kernels timed")
    print(f"one by one (through ctypes) {total * 1e3:.3f} ms, in a Python host taking")
    print(f"{python_host * 1e3:.3f} ms")
    for name, seconds in sorted(times.items(), key=lambda item: -item[1])[: options.top]:
        share = 100 * seconds / total
        operands = kinds.get(name, "?")
        print(f"  {seconds * 1e6:8.1f} us {share:5.1f}%  {name:32} {operands[:60]}")


def block_step(options: argparse.Namespace) -> tuple[Any, tuple[Any, ...]]:
    """bench_transformer's block step, called once, and its arguments."""
    rng = np.random.default_rng(0)
    d, shape = options.d_model, (options.batch, options.length, options.d_model)
    params = block_params(d)
    x = rng.standard_normal(shape).astype(np.float32)
    c = rng.standard_normal(shape).astype(np.float32)

    def loss(p, x, c):
        return (tessc_block(p, x, options.heads) * c).sum()

    step = ts.jit(ts.value_and_grad(loss, argnums=(0, 1)))
    step(params, x, c)
    return step, (params, x, c)


def train_step(spec: str, clock: Callable[[], float]) -> tuple[Any, tuple[Any, ...]]:
    """The char-GPT train step `spec` after two calls (its arguments: what the last one
    returned); prints the whole jit call's time per step next to the host's."""
    setup = step_setup(spec)
    optimizer = ts.optim.AdamW(lr=LR, weight_decay=WEIGHT_DECAY)
    step = setup.example.make_functions(optimizer, setup.config)[0]
    params, key = copied(setup.params), ts.random.key(0)
    state = optimizer.init(params)
    for _ in range(2):
        params, state, _ = step(params, state, setup.tokens, setup.targets, key)
    start, calls = clock(), 20
    for _ in range(calls):
        params, state, _ = step(params, state, setup.tokens, setup.targets, key)
    call = (clock() - start) / calls
    print(f"the jit call (arguments, donation checks, host): {call * 1e3:.3f} ms/step")
    return step, (params, state, setup.tokens, setup.targets, key)


if __name__ == "__main__":
    main()
