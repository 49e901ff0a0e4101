"""`python -m tessc.fuzz {programs,mutate,ci}`: see `tessc.fuzz`."""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path


def run_programs(args: argparse.Namespace) -> int:
    from tessc.fuzz.check import COMPILED_PIPELINES, check, register_forced_pipelines, save, shrink
    from tessc.fuzz.programs import generate
    from tessc.fuzz.rows import generate_rows

    pipelines = COMPILED_PIPELINES
    if args.generator == "rows":  # cpu-basic runs none of the loop passes rows is for
        pipelines = tuple(p for p in pipelines if p != "cpu-basic")
    if args.forced:
        pipelines = (*pipelines, *register_forced_pipelines())

    failures: Counter[str] = Counter()
    start = time.monotonic()
    done = grads = 0
    for index in range(args.count):
        if args.time_limit and time.monotonic() - start > args.time_limit:
            break
        seed = args.seed * 1_000_003 + index
        grad = args.grad_every > 0 and index % args.grad_every == args.grad_every - 1
        dtype = "f64" if grad else "f32"
        if args.generator == "rows":
            rng = random.Random(seed)
            dtype = "f64" if grad or rng.random() < 0.25 else "f32"
            program = generate_rows(rng, dtype=dtype, smooth=grad)
        else:
            program = generate(random.Random(seed), ops=args.ops, dtype=dtype, smooth=grad)
        failure = check(program, grad=grad, seed=seed, pipelines=pipelines)
        done += 1
        grads += grad
        if done % 50 == 0:  # a long run reports as it goes
            print(f"... {done} programs, {sum(failures.values())} failing", flush=True)
        if failure is None:
            continue
        failures[f"{failure.kind} at {failure.pipeline}"] += 1
        print(f"program {seed}: {failure.kind} at {failure.pipeline}: {failure.detail}")
        if args.save_dir is not None:
            small = program if args.no_shrink else shrink(program, failure, grad=grad, seed=seed)
            path = save(small, failure, Path(args.save_dir), grad=grad, seed=seed)
            print(f"  saved {len(small.ops)}-op reproducer: {path}")
        sys.stdout.flush()
    elapsed = time.monotonic() - start
    print(
        f"programs: {done} run ({grads} with gradients), {sum(failures.values())} failing, "
        f"{elapsed:.0f} s"
    )
    for kind, count in failures.most_common():
        print(f"  {count:6d}  {kind}")
    return 1 if failures else 0


def run_mutations(args: argparse.Namespace) -> int:
    from tessc.fuzz.mutate import run_campaign

    return run_campaign(
        count=args.count,
        seed=args.seed,
        cpu_seconds=args.cpu_seconds,
        time_limit=args.time_limit,
        save_dir=Path(args.save_dir) if args.save_dir else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessc.fuzz", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    programs = commands.add_parser("programs", help="random programs vs the reference")
    programs.add_argument("--count", type=int, default=100)
    programs.add_argument("--seed", type=int, default=0)
    programs.add_argument("--ops", type=int, default=12, help="at most this many ops")
    programs.add_argument("--grad-every", type=int, default=3, help="0: no gradients")
    programs.add_argument("--save-dir", default="tests/regressions")
    programs.add_argument("--no-shrink", action="store_true")
    programs.add_argument("--time-limit", type=float, default=0, help="seconds (0: none)")
    programs.add_argument(
        "--generator",
        choices=("mixed", "rows"),
        default="mixed",
        help="mixed: any op (tessc.fuzz.programs); rows: a matmul and a row epilogue "
        "(tessc.fuzz.rows)",
    )
    programs.add_argument(
        "--forced",
        action="store_true",
        help="also run the pipelines with the loop passes' size gates forced open "
        "(tessc.fuzz.check.FORCED_LOOPS)",
    )
    mutate = commands.add_parser("mutate", help="mutated tessc-opt inputs")
    mutate.add_argument("--count", type=int, default=200)
    mutate.add_argument("--seed", type=int, default=0)
    mutate.add_argument("--cpu-seconds", type=int, default=20, help="CPU limit per input")
    mutate.add_argument("--time-limit", type=float, default=0, help="seconds (0: none)")
    mutate.add_argument("--save-dir", default=None, help="keep the inputs that went wrong")
    ci = commands.add_parser("ci", help="the small fixed budget CI runs")
    ci.add_argument("--save-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "programs":
        return run_programs(args)
    if args.command == "mutate":
        return run_mutations(args)
    status = run_programs(
        parser.parse_args(
            ["programs", "--count", "8", "--seed", "1", "--ops", "8", "--grad-every", "4"]
            + (["--save-dir", args.save_dir] if args.save_dir else ["--no-shrink"])
        )
    )
    status |= run_mutations(
        parser.parse_args(["mutate", "--count", "60", "--seed", "1", "--cpu-seconds", "20"])
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
