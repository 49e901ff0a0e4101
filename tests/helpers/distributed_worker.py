"""
One rank of tests/test_distributed.py's process groups: `python distributed_worker.py
SCENARIO OUT_DIR`, with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
set by the test. Writes `OUT_DIR/rank<r>.json`: what it computed, or the error it raised.

Rank r's gradients at step s are r + 1 + s (plus a ramp), its loss r + s, so the mean is
known. One process pair runs all of `checks` (each process costs an `import torch`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

CALL_STARTED = [0.0]
"""When the last reducer call began: a failure reports how long it took to raise."""


def gradients(rank: int, step: int, shape: tuple[int, int]) -> dict:
    base = float(rank + 1 + step)
    return {
        "w": np.full(shape, base, np.float32) + np.arange(12, dtype=np.float32).reshape(shape),
        "b": [np.full(4, 2 * base, np.float32), np.full((2, 2), -base, np.float32)],
    }


def reduce_steps(reducer, rank: int, shape: tuple[int, int], die: bool = False) -> list:
    """Three steps of `reducer` on known gradients and losses; what each returned."""
    import tessc as ts

    steps = []
    for step in range(3):
        if step == 1 and rank == 1 and die:
            os._exit(7)
        before = reducer.collectives
        CALL_STARTED[0] = time.monotonic()
        grads, loss = reducer(gradients(rank, step, shape), np.float32(rank + step))
        buffer = reducer.buffers[0]
        steps.append(
            {
                "w": grads["w"].tolist(),
                "b0": grads["b"][0].tolist(),
                "b1": grads["b"][1].tolist(),
                "loss": float(loss),
                "all_reduces": reducer.collectives - before,
                "shares_memory": buffer.tensor.data_ptr() == buffer.array.ctypes.data
                and all(np.shares_memory(v, buffer.array) for v in buffer.views),
                "arena": ts.arena_buffer([grads["b"][0], grads["b"][1], grads["w"]]) is not None,
            }
        )
    return steps


def mixed_dtypes(rank: int) -> dict:
    """One step over float32, float16 and (with ml_dtypes) bfloat16 leaves: one flat
    buffer, so one all-reduce, per dtype."""
    import tessc as ts

    grads = {"a": np.full(3, rank + 1.0, np.float32), "h": np.full(2, rank + 2.0, np.float16)}
    try:
        import ml_dtypes

        grads["z"] = np.full(2, rank + 3.0, ml_dtypes.bfloat16)
    except ImportError:
        pass
    reducer = ts.distributed.GradientReducer()
    reduced = reducer(grads)
    half = ts.distributed.GradientReducer()  # 16-bit gradients: the loss gets a float32 slot
    _, loss = half({"h": grads["h"]}, np.float32(rank + 1 / 3))
    return {
        "values": {k: [float(x) for x in v] for k, v in reduced.items()},
        "dtypes": {k: v.dtype.name for k, v in reduced.items()},
        "all_reduces": reducer.collectives,
        "half_loss": float(loss),
        "half_loss_dtype": loss.dtype.name,
        "half_all_reduces": half.collectives,
    }


def run(scenario: str, out: dict) -> None:
    """`checks`: reduce, buckets, mismatch (its ValueError recorded), then rank 1 dies.
    `hang`: rank 1 sleeps through the second step, the timeout is 4 s."""
    import tessc as ts

    group = ts.distributed.init(timeout=4.0 if scenario == "hang" else 30.0)
    rank = group.rank
    if scenario == "hang":
        reducer = ts.distributed.GradientReducer()
        reducer(gradients(rank, 0, (3, 4)), np.float32(0))
        if rank == 1:
            time.sleep(60)
        CALL_STARTED[0] = time.monotonic()
        reducer(gradients(rank, 1, (3, 4)), np.float32(0))
        return
    out["reduce"] = reduce_steps(ts.distributed.GradientReducer(), rank, (3, 4))
    tiny = ts.distributed.GradientReducer(bucket_mb=64 / 2**20)  # 16 float32s a bucket
    out["buckets"] = reduce_steps(tiny, rank, (3, 4))
    try:
        reduce_steps(ts.distributed.GradientReducer(), rank, (4, 3) if rank else (3, 4))
    except ValueError as error:
        out["mismatch"] = str(error)
    params = {"w": np.full((2, 2), float(rank), np.float32), "b": np.arange(3.0) + rank}
    out["broadcast"] = {k: v.tolist() for k, v in ts.distributed.broadcast(params).items()}
    out["mixed"] = mixed_dtypes(rank)
    out["die"] = reduce_steps(ts.distributed.GradientReducer(), rank, (3, 4), die=True)


def main() -> None:
    scenario, directory = sys.argv[1], Path(sys.argv[2])
    out: dict = {"rank": int(os.environ["RANK"])}
    start = time.monotonic()
    try:
        run(scenario, out)
        out["ok"] = True
    except Exception as error:  # noqa: BLE001 - reported to the test
        out["ok"] = False
        out["type"] = type(error).__name__
        out["error"] = str(error)
        out["ranks"] = getattr(error, "ranks", None)
        out["failed_after"] = time.monotonic() - CALL_STARTED[0]
        out["traceback"] = traceback.format_exc()
    out["elapsed"] = time.monotonic() - start
    (directory / f"rank{out['rank']}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
