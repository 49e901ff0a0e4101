"""
Split-bf16 master weights (IPEX's "BF16 Split") against fp32 masters plus a bf16 copy.

A bf16 model trained with fp32 master weights keeps, per weight, either

- `split`: the bf16 weight (the fp32 master's top half, read by forward and backward) and
  the low 16 bits in the optimizer state: 4 bytes; one step (`ts.optim.SGD(...,
  master_weights="split")`) joins the halves, updates the fp32 value and splits it back,
  one fused kernel over the parameters; or
- `fp32 + bf16 copy`: the fp32 master (4 bytes) and the bf16 copy the model reads (2
  bytes): 6 bytes; one step is the fp32 update (`ts.optim.SGD`, one fused kernel) and then
  the cast of every master to its bf16 copy (`astype`, a second pass).

Both use SGD with momentum (fp32 momentum buffer, 4 bytes a weight in either case;
`--optimizer lamb`: Lamb, two fp32 moments) over
`--params` parameters whose sizes are log-uniform in [1e3, 2e5] (seeded); the gradients are
bf16. Both keep their arrays in arenas and feed back what the step returns (no packing per
call). Before timing, the masters of both are checked equal bit for bit after one step.
Reported: bytes of weight storage (masters + copies + trails, the momentum excluded) and
the median time of a step over `--rounds` rounds of `--repeat` calls.

    python bench/bench_split_bf16.py [--params 200] [--repeat 10] [--rounds 5] [--optimizer lamb]

Timings on a shared machine are noise; the byte counts are exact (split: 4 B a weight,
fp32 + copy: 6 B, a third less).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np
from machine import describe_machine

import tessc as ts

BF16 = np.dtype(ml_dtypes.bfloat16)

OPTIMIZERS: dict[str, Callable[..., ts.optim.Optimizer]] = {
    "sgd": lambda **k: ts.optim.SGD(lr=1e-3, momentum=0.9, **k),
    "lamb": lambda **k: ts.optim.Lamb(lr=1e-3, **k),
}


def sizes(count: int, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(n) for n in np.exp(rng.uniform(np.log(1e3), np.log(2e5), count))]


def median_ms(step: Callable[[], None], repeat: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            step()
        times.append((time.perf_counter() - start) / repeat)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="sgd")
    args = parser.parse_args()
    print(describe_machine())
    print(f"# reproduce: python bench/bench_split_bf16.py {' '.join(sys.argv[1:])}".rstrip())
    rng = np.random.default_rng(1)
    counts = sizes(args.params)
    masters = {f"p{k}": rng.standard_normal(n).astype(np.float32) for k, n in enumerate(counts)}
    grads = {k: rng.standard_normal(v.shape).astype(BF16) for k, v in masters.items()}
    wide_grads = {k: g.astype(np.float32) for k, g in grads.items()}

    split_opt = OPTIMIZERS[args.optimizer](master_weights="split")
    split = {}
    split["params"], trail = ts.optim.split_params(masters)
    split["params"] = dict(
        zip(split["params"], ts.arena(list(split["params"].values())), strict=True)
    )
    split["state"] = split_opt.init(split["params"], trail=trail)

    plain_opt = OPTIMIZERS[args.optimizer]()
    plain = {
        "params": dict(zip(masters, ts.arena([m.copy() for m in masters.values()]), strict=True))
    }
    plain["state"] = plain_opt.init(plain["params"])
    to_bf16 = ts.jit(lambda p: {k: v.astype(BF16) for k, v in p.items()})

    def split_step() -> None:
        split["params"], split["state"] = split_opt.step(split["params"], grads, split["state"])

    def plain_step() -> None:
        plain["params"], plain["state"] = plain_opt.step(
            plain["params"], wide_grads, plain["state"]
        )
        plain["copy"] = to_bf16(plain["params"])

    split_step()
    plain_step()
    joined = ts.optim.master_params(split["params"], split["state"])
    assert all(
        np.array_equal(joined[k].view(np.uint32), plain["params"][k].view(np.uint32))
        for k in joined
    )
    for k, top in split["params"].items():  # the weights the model reads: the top halves
        high = (plain["params"][k].view(np.uint32) >> 16).astype(np.uint16)
        assert np.array_equal(top.view(np.uint16), high)

    weights = sum(counts)
    split_bytes = weights * (2 + 2)
    plain_bytes = weights * (4 + 2)
    split_ms = median_ms(split_step, args.repeat, args.rounds)
    plain_ms = median_ms(plain_step, args.repeat, args.rounds)
    print(
        f"{args.optimizer}, {args.params} parameters, {weights / 1e6:.2f}M weights; "
        "masters checked bit for bit"
    )
    print(f"{'contender':<20} {'weight bytes':>14} {'ms/step':>9}")
    print(f"{'split bf16':<20} {split_bytes:>14,} {split_ms:>9.2f}")
    print(f"{'fp32 + bf16 copy':<20} {plain_bytes:>14,} {plain_ms:>9.2f}")
    ratio = f"{split_bytes / plain_bytes:.2f}x bytes, {split_ms / plain_ms:.2f}x time"
    print(f"split / fp32+copy: {ratio}")


if __name__ == "__main__":
    main()
