"""
An SGD step over 200 small parameters (issue 24 §3): the horizontally fused step, donated
and not, against the unfused kernels, NumPy in place and torch.optim.SGD(fused=True).

`p -= lr * g` for `--params` parameters (default 200) whose sizes are log-uniform in
[16, 4096] floats (seeded): a step moves little data, so per-call overheads (a kernel
call per parameter, a packing copy per call) decide. Contenders, all f32:

- `tessc opt.step`: `tessc.optim.SGD(lr).step(params, grads, state)`, compiled once with
  the parameters donated: ONE kernel over arenas. The parameters it returns (views of
  its arena) are fed back, so no call packs them, and `jit`'s planned path takes them
  (no pytree flattened); the gradients are what a jitted function returned (views of
  one buffer, `runtime/host_memory.py`'s `carve_plan`), so no call packs them either
  (`Executable.packing_copies` is printed: it stays at the first call's count); the
  same gradient arrays every call, which the planned call checked the call before;
- `tessc opt.step, new grads`: the same with two sets of jitted gradients, alternating
  (a training loop's new gradients every step: no call sees the arrays of the call
  before, which is all any check remembers): each call checks and locates them anew, in
  one compiled call over their ids (`runtime/array_fields.py`), not per array;
- `tessc opt.step, separate grads`: the same, the gradients separate NumPy arrays (as a
  caller computing them elsewhere has them): read where they lie by the step's member
  form (`lowering/codegen/numba_members.py`), through a table of their addresses filled
  in the compiled call that checks them; no packing copy (it was one `np.concatenate`
  of 733 KB a call; the packing count printed stays at the first call's);
- `tessc program, arenas` / `separate grads`: the same update compiled once with the
  parameters donated and called directly on `tessc.arena` views (one kernel, no copy),
  or with the gradients as separate arrays (the member form): the kernel and the
  runtime without `opt.step`'s pytree front end;
- `tessc jit, not donated`: `tessc.jit` of the update without donation (the `cpu`
  pipeline packs only donated updates, `donated-only`): a kernel per parameter, new
  output arrays per call (the unfused kernels);
- `numpy`: `np.multiply(g, lr, out=t); p -= t` per parameter, in place;
- `torch fused=True`, `foreach=True` (when torch is importable).

Times are medians over `--rounds` rounds of `--repeat` calls, round-robin (bench_unfused's
`timed_medians`). On a machine shared with other jobs the figures move by tens of percent
between runs: compare within one run, and read the packing counts, not the times, as the
evidence for "packs once".

    python bench/bench_sgd_small.py [--params 200] [--repeat 50] [--rounds 5]
        [--min-size 16] [--max-size 4096] [--optimizer sgd|lamb|adam|adamw|adagrad]

`--optimizer` other than `sgd` times only that optimizer's `opt.step` (`optimizer_steps`):
gradients in one arena, separate (its member form), and separate with the member form
off (packed every call), with the bytes each packs per call. Lamb, 200 parameters
(`--optimizer lamb --repeat 20 --rounds 3`, load average ~3): 0 bytes packed per call on
separate gradients (732,928 with the member form off, as before Lamb had one); 644 us on
an arena, 716 us separate, 928 us packed (noise: tens of percent). Adam: 0 and 732,928
bytes; 244, 346 and 411 us.

`--min-size 4096 --max-size 32768` makes a large parameter set (200 parameters, about
2.8M floats): the step is then a Python host launching threaded kernels over shares of
the arena (`runtime/threads.py`), and separate gradients are read by its threaded member
form. `tessc program, packed grads` is the same program with its member form off (the
packing copy every call, as before). The bytes each separate-gradient contender copies
into an arena per call are counted with a spy on `np.concatenate` (the packing copy).

Measured (x86_64 AMD EPYC, 2 cores shared with other jobs, load average 5.8-7.1; `--repeat
30 --rounds 5`; 200 parameters, 183,232 floats; README.md has three runs):

    contender                            us  / unfused  / numpy  / torch fused
    tessc opt.step                    114.4      0.63x    0.41x          0.14x
    tessc opt.step, new grads         123.1      0.68x    0.44x          0.15x
    tessc opt.step, separate grads    160.2      0.88x    0.58x          0.20x
    tessc program, arenas              86.6      0.48x    0.31x          0.11x
    tessc program, separate grads     139.3      0.77x    0.50x          0.17x
    tessc jit, not donated            181.2      1.00x    0.65x          0.22x
    numpy in place                    277.5      1.53x    1.00x          0.34x
    torch foreach=True                241.0      1.33x    0.87x          0.29x
    torch fused=True                  821.0      4.53x    2.96x          1.00x

`opt.step` was 15 ms a call before its front end took the planned path with the
views it returned (call_checks.py); the packing count stays at 1 (its first call, the
separately allocated parameters) over 156 calls. With new gradients every call, the
200 gradients are checked (layouts, and none a donated array or a view of one) and
located in two compiled calls that read the arrays' pointers from the argument tuple
(`runtime/array_fields.py`): 0.36-0.44x of NumPy over three runs (0.43-0.65x when
their ids were first built into an int64 array, twice a call, and the overlap was a
Python set test; 0.8-1.0x when each was read in Python). The program called directly
with separate gradients checks them in the same bulk call (it was 1.4x slower than
NumPy with a `check_input` per array).

With the member form (load average 3.8-5.5, same command): separate gradients 115.3 us,
0.38x of NumPy in place (307.2 us) and 0.64x of the unfused kernels; the program on
separate gradients 87.1 us against 80.0 on arenas (0.28x and 0.26x of NumPy). Bytes
copied per call for the 200 separate gradients: 732,928 before, 0 after (a 1,600-byte
address table is written instead).

The large set (`--params 200 --min-size 4096 --max-size 32768 --repeat 20 --rounds 5`,
3,020,485 floats: a threaded host, its threaded member form), two runs at load average
5.6-6.9 (the medians move by 2-10x between runs: a launch's second share waits whenever
another job holds the other core): bytes packed per call with separate gradients 0 for
`opt.step` and the program, 12,081,940 for the packed program. The program on separate
gradients 1127.7 and 877.9 us, against 5025.5 and 1986.2 us packed (4.5x, 2.3x), 807.9
and 729.7 us on arenas; NumPy in place 6551.6 and 2334.2 us; torch fused=True 9324.6
and 1633.9 us (`opt.step` on separate gradients 1003.4 us in the first run, 7989.3 us in
the second, its other rows alike: the same noise).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_unfused import timed_medians
from machine import describe_machine

import tessc
from tessc.compiler import compile_module

LR = 0.01


def sgd_update(params: list, grads: list) -> list:
    return [p - LR * g for p, g in zip(params, grads, strict=True)]


def copied_bytes_per_call(call: Callable[[], object], calls: int = 4) -> float:
    """The bytes `call` packs per call: what `np.concatenate` (the packing copy) reads,
    after a first call (which may build lookup tables once)."""
    call()
    copied: list[int] = []
    concatenate = np.concatenate

    def spy(arrays: Any, *args: Any, **kwargs: Any) -> Any:
        copied.append(sum(np.asarray(a).nbytes for a in arrays))
        return concatenate(arrays, *args, **kwargs)

    np.concatenate = spy  # type: ignore[assignment]
    try:
        for _ in range(calls):
            call()
    finally:
        np.concatenate = concatenate  # type: ignore[assignment]
    return sum(copied) / calls


OPTIMIZERS: dict[str, Callable[[], Any]] = {
    "lamb": lambda: tessc.optim.Lamb(lr=LR, weight_decay=0.01),
    "adam": lambda: tessc.optim.Adam(lr=LR),
    "adamw": lambda: tessc.optim.AdamW(lr=LR),
    "adagrad": lambda: tessc.optim.Adagrad(lr=LR),
}


def optimizer_steps(
    name: str, params0: list[np.ndarray], grads0: list[np.ndarray], repeat: int, rounds: int
) -> None:
    """`name`'s standalone step on gradients in one arena, separate, and separate with
    its member form off (the packing copy every call): bytes packed per call and times."""
    contenders: dict[str, Callable[[], object]] = {}
    arena_grads = tessc.arena(grads0)
    for label, grads, member_form in (
        ("arena grads", arena_grads, True),
        ("separate grads", grads0, True),
        ("separate grads, packed", grads0, False),
    ):
        optimizer = OPTIMIZERS[name]()
        box: dict[str, Any] = {"p": [p.copy() for p in params0]}
        box["s"] = optimizer.init(box["p"])

        def step(box: dict[str, Any] = box, optimizer: Any = optimizer, grads: Any = grads) -> None:
            box["p"], box["s"] = optimizer.step(box["p"], grads, box["s"])

        step()
        executable = next(iter(optimizer._compiled["cpu"]._compiled.values()))
        if not member_form:
            executable.member_function = None
        else:
            print(f"# {name} member form: {executable.member_function is not None}")
        contenders[f"tessc {name} opt.step, {label}"] = step
    for label, call in contenders.items():
        print(f"# bytes packed per call, {label}: {copied_bytes_per_call(call):,.0f}")
    medians = timed_medians(contenders, repeat, rounds)
    for label, ms in medians.items():
        print(f"{label}  {ms * 1e3:7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-size", type=int, default=16, help="smallest parameter")
    parser.add_argument("--max-size", type=int, default=4096, help="largest parameter")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", *OPTIMIZERS])
    args = parser.parse_args()
    print(describe_machine())
    print(f"# reproduce: python bench/bench_sgd_small.py {' '.join(sys.argv[1:])}".rstrip())
    rng = np.random.default_rng(0)
    span = np.log(args.min_size), np.log(args.max_size)
    sizes = np.exp(rng.uniform(*span, args.params)).astype(int)
    params0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    print(f"# {args.params} parameters, {int(sizes.sum())} floats")
    if args.optimizer != "sgd":
        optimizer_steps(args.optimizer, params0, grads0, args.repeat, args.rounds)
        return
    contenders: dict[str, Callable[[], object]] = {}

    # The gradients as a jitted function returns them: views of one buffer.
    identity = tessc.jit(lambda gs: [g * 1.0 for g in gs])
    grads_jit = identity(grads0)
    optimizer = tessc.optim.SGD(lr=LR)
    box: dict[str, Any] = {"p": [p.copy() for p in params0]}
    box["s"] = optimizer.init(box["p"])

    def fused_step() -> None:
        box["p"], box["s"] = optimizer.step(box["p"], grads_jit, box["s"])

    fused_step()
    executable = next(iter(optimizer._compiled["cpu"]._compiled.values()))
    first = executable.packing_copies
    contenders["tessc opt.step"] = fused_step

    # Other gradient arrays every call (two sets, alternating), as a training loop has:
    # the planned call checks them each time instead of recognizing last call's.
    other_grads = [grads_jit, identity(grads0)]
    other = tessc.optim.SGD(lr=LR)
    box3: dict[str, Any] = {"p": [p.copy() for p in params0], "n": 0}
    box3["s"] = other.init(box3["p"])

    def other_grads_step() -> None:
        box3["n"] += 1
        box3["p"], box3["s"] = other.step(box3["p"], other_grads[box3["n"] % 2], box3["s"])

    other_grads_step()
    contenders["tessc opt.step, new grads"] = other_grads_step

    separate = tessc.optim.SGD(lr=LR)
    box2: dict[str, Any] = {"p": [p.copy() for p in params0]}
    box2["s"] = separate.init(box2["p"])

    def separate_step() -> None:
        box2["p"], box2["s"] = separate.step(box2["p"], grads0, box2["s"])

    separate_step()
    separate_executable = next(iter(separate._compiled["cpu"]._compiled.values()))
    separate_first = separate_executable.packing_copies
    contenders["tessc opt.step, separate grads"] = separate_step

    # The compiled program called directly (no pytree front end): the kernel and the
    # runtime's packing, as bench_adagrad.py measures.
    module = tessc.jit(sgd_update, donate_argnums=(0,)).trace(params0, grads0).module
    program = compile_module(module, "sgd_update")
    arena_p, arena_g = tessc.arena(params0), tessc.arena(grads0)
    outputs = program(*arena_p, *arena_g)
    assert all(o is a for o, a in zip(outputs, arena_p, strict=True)), "in place"
    contenders["tessc program, arenas"] = lambda: program(*arena_p, *arena_g)
    contenders["tessc program, separate grads"] = lambda: program(*arena_p, *grads0)
    packed = compile_module(module, "sgd_update")
    packed.member_function = None  # the packing copy every call, as before the member form
    contenders["tessc program, packed grads"] = lambda: packed(*arena_p, *grads0)

    unfused = tessc.jit(sgd_update)
    plain = [p.copy() for p in params0]
    want = plain[0] - LR * grads0[0]  # (fused multiply-subtract: atol for cancellation)
    np.testing.assert_allclose(unfused(plain, grads0)[0], want, rtol=1e-6, atol=1e-6)
    contenders["tessc jit, not donated"] = lambda: unfused(plain, grads0)

    np_p = [p.copy() for p in params0]
    temps = [np.empty_like(p) for p in params0]

    def numpy_step() -> None:
        for p, g, t in zip(np_p, grads0, temps, strict=True):
            np.multiply(g, np.float32(LR), out=t)
            p -= t

    contenders["numpy in place"] = numpy_step
    try:
        import torch
    except ImportError:
        torch = None
        print("# torch not installed: pip install torch==2.13.0")
    if torch is not None:
        for label, options in (
            ("torch foreach=True", {"foreach": True}),
            ("torch fused=True", {"fused": True}),
        ):
            tensors = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params0]
            for tensor, g in zip(tensors, grads0, strict=True):
                tensor.grad = torch.from_numpy(g)
            contenders[label] = torch.optim.SGD(tensors, lr=LR, **options).step

    threaded = program.member_function is not None and not hasattr(
        program.member_function, "py_func"
    )  # a plain Python host launching threaded kernels (runtime/threads.py)
    print(f"# threaded host: {threaded}; member form: {program.member_function is not None}")
    for name in (
        "tessc opt.step, separate grads",
        "tessc program, separate grads",
        "tessc program, packed grads",
    ):
        print(f"# bytes packed per call, {name}: {copied_bytes_per_call(contenders[name]):,.0f}")
    medians = timed_medians(contenders, args.repeat, args.rounds)
    calls = 1 + args.rounds * (args.repeat + 1)
    print(
        f"# packing copies of opt.step: {first} on its first call, "
        f"{executable.packing_copies} after {calls} calls; with separate gradients "
        f"{separate_first} and {separate_executable.packing_copies} "
        f"(member form: {separate_executable.member_function is not None})"
    )
    bases = {
        "unfused": "tessc jit, not donated",
        "numpy": "numpy in place",
        "torch fused": "torch fused=True",
    }
    bases = {short: name for short, name in bases.items() if name in medians}
    width = max(len(n) for n in medians)
    print(f"{'contender'.ljust(width)}       us  " + "  ".join(f"/ {b}" for b in bases))
    for name, ms in medians.items():
        ratios = "  ".join(
            f"{ms / medians[b]:.2f}x".rjust(len(short) + 2) for short, b in bases.items()
        )
        print(f"{name.ljust(width)}  {ms * 1e3:7.1f}  {ratios}")
    print("# ratio = the row's time / the column's (median; below 1: the row is faster)")


if __name__ == "__main__":
    main()
