"""`tessc.distributed`: data-parallel gradients summed by one all-reduce over a flat buffer
(torch.distributed, gloo on loopback), checked with two real processes:

- the mean over ranks of known gradients and losses, ONE all-reduce per step (several with
  tiny buckets), torch's tensor and the gradients the reducer returns sharing one NumPy
  buffer laid out as `tessc.arena` lays out the optimizer's gradient arena;
- a parameter whose shape differs across ranks: both raise, naming it and the shapes;
- a rank that dies, or hangs past the timeout: the other raises `RankFailure` naming it;
- examples/train_mlp.py --data-parallel under torchrun: the single-process loss curve.

The layout checks run without torch; the rest skips cleanly without it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tessc.distributed_failures import RankFailure, guarded
from tessc.distributed_layout import (
    FlatBuffer,
    LeafSpec,
    describe_mismatch,
    leaf_names,
    plan_buckets,
)
from tessc.frontend.pytree import flatten_tree

from helpers.examples import load_example

REPOSITORY = Path(__file__).resolve().parents[1]
WORKER = REPOSITORY / "tests" / "helpers" / "distributed_worker.py"
EXAMPLE = REPOSITORY / "examples" / "train_mlp.py"


def needs_gloo() -> None:
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **extra}
    if any(name == "lo" for _, name in socket.if_nameindex()):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback, whatever the hostname resolves to
    return env


def launch(
    scenario: str, out: Path, timeout: float = 180, stop_after_rank_0: bool = False
) -> tuple[dict[int, dict], list[int]]:
    """Two ranks of tests/helpers/distributed_worker.py; their reports and exit codes.
    `stop_after_rank_0`: kill rank 1 once rank 0 has ended."""
    port = str(free_port())
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), scenario, str(out)],
            env=worker_env(
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE="2",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
            ),  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for r in range(2)
    ]
    deadline = time.monotonic() + timeout
    codes = []
    for r, process in enumerate(processes):
        if r and stop_after_rank_0:  # rank 1 hangs on purpose: rank 0 has reported
            process.kill()
        try:
            codes.append(process.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for p in processes:
                p.kill()
            pytest.fail(f"the ranks of `{scenario}` did not end within {timeout} s (a hang)")
    reports = {
        r: json.loads((out / f"rank{r}.json").read_text())
        for r in range(2)
        if (out / f"rank{r}.json").exists()
    }
    return reports, codes


# ---------------------------------------------------------------------------------------
# the layout, without torch
# ---------------------------------------------------------------------------------------


def test_leaf_names_spell_the_path() -> None:
    tree = {"w1": np.zeros(2), "layers": [np.zeros(1), (np.zeros(3),)]}
    structure, _ = flatten_tree(tree, lambda x: isinstance(x, np.ndarray), "grads")
    assert leaf_names(structure, "grads") == [
        "grads['layers'][0]",
        "grads['layers'][1][0]",
        "grads['w1']",
    ]


def test_mismatch_names_the_leaf_and_every_rank_shape() -> None:
    same = [LeafSpec("grads['b']", (4,), "float32"), LeafSpec("grads['w']", (3, 4), "float32")]
    other = [same[0], LeafSpec("grads['w']", (4, 3), "float32")]
    assert describe_mismatch([same, same, same], "gradients") is None
    message = describe_mismatch([same, other, same], "gradients")
    assert message is not None
    assert "`grads['w']` is (3, 4) float32 on ranks 0, 2 but (4, 3) float32 on rank 1" in message
    missing = describe_mismatch([same, same[:1]], "gradients")
    assert missing is not None and "`grads['w']` is on rank 0 but not on rank 1" in missing


def test_buckets_cover_the_buffer() -> None:
    assert plan_buckets(1000, 4, 25 * 2**20) == [(0, 1000)]
    assert plan_buckets(10, 4, 16) == [(0, 4), (4, 8), (8, 10)]
    with pytest.raises(ValueError, match="smaller than one element"):
        plan_buckets(10, 8, 4)


class FakeStore:
    """The two calls of torch's Store the roll call makes; `answering` ranks have set
    their key already; `down` raises as a store whose host died."""

    def __init__(self, answering: set[int], down: bool = False):
        self.keys = {f"rollcall/3/{r}" for r in answering}
        self.down = down

    def set(self, key: str, value: str) -> None:
        if self.down:
            raise RuntimeError("Connection refused")
        self.keys.add(key)

    def check(self, keys: list[str]) -> bool:
        return all(k in self.keys for k in keys)


@pytest.mark.parametrize(
    ("store", "ranks", "says"),
    [
        (FakeStore({0, 2}), [1, 3], "ranks 1, 3 did not answer within 0.2 s"),
        (FakeStore({0, 1, 2, 3}), [], "with every rank alive: RuntimeError: boom"),
        (FakeStore(set(), down=True), [0], "rank 0 (which hosts it"),
    ],
)
def test_a_failed_collective_names_the_silent_ranks(
    store: FakeStore, ranks: list[int], says: str
) -> None:
    with pytest.raises(RankFailure, match="the all-reduce failed on rank 2 of 4") as caught:
        with guarded("the all-reduce", store, rank=2, world=4, sequence=3, answer_s=0.2):
            raise RuntimeError("boom\nsecond line")
    assert caught.value.ranks == ranks
    assert says in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_shares_the_flat_buffer(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    buffer = FlatBuffer(np.dtype(dtype), [(2, 3), (4,)], 1, False, torch)
    buffer.pack([np.ones((2, 3), dtype), np.full(4, 2, dtype)], [np.float32(0.5)])
    assert buffer.tensor.data_ptr() == buffer.array.ctypes.data
    assert buffer.array.ctypes.data % 64 == 0
    buffer.tensor.mul_(2)  # torch writes what tessc's views read
    assert buffer.tensor.tolist() == [2.0] * 6 + [4.0] * 4 + [1.0]
    assert buffer.views[1].tolist() == [4.0] * 4
    assert [float(x) for x in buffer.extras_on_host()] == [1.0]


def test_without_init_one_process_holds_the_whole_batch() -> None:
    import tessc as ts

    assert (ts.distributed.rank(), ts.distributed.world_size(), ts.distributed.is_main()) == (
        0,
        1,
        True,
    )
    np.testing.assert_array_equal(ts.distributed.shard(np.arange(6)), np.arange(6))


# ---------------------------------------------------------------------------------------
# two processes on loopback
# ---------------------------------------------------------------------------------------


def test_gradients_computed_in_the_buffer_are_not_copied() -> None:
    """`gradient_buffers`, donated to the jitted gradient step, is where the compiled step
    writes the gradients: the reducer copies nothing (one process, world of 1)."""
    needs_gloo()
    import tessc as ts

    rng = np.random.default_rng(5)
    params = {"w": rng.standard_normal((6, 3)).astype(np.float32), "b": np.zeros(3, np.float32)}
    x, y = rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8)

    def loss_fn(p, x, y):
        return ts.nn.cross_entropy(x @ p["w"] + p["b"], y)

    @ts.jit(donate_argnums=(1,))
    def grad_step(p, grad_buffers, x, y):
        return ts.value_and_grad(loss_fn)(p, x, y)

    want_loss, want = ts.jit(ts.value_and_grad(loss_fn))(params, x, y)
    ts.distributed.init()
    try:
        reducer = ts.distributed.GradientReducer()
        for _ in range(2):
            buffers = reducer.gradient_buffers(params, scalars=1)
            loss, grads = grad_step(params, buffers, x, y)
            assert all(grads[k] is buffers[k] for k in grads)
            reduced, reduced_loss = reducer(grads, loss)
            assert reducer.copied == 0
            assert all(np.shares_memory(reduced[k], reducer.buffers[0].array) for k in reduced)
            for k in want:
                np.testing.assert_array_equal(reduced[k], want[k])
            assert float(reduced_loss) == float(want_loss)
        reducer({k: v.copy() for k, v in want.items()}, want_loss)  # computed elsewhere
        assert reducer.copied == 2
        with pytest.raises(ValueError, match="changed since the first call"):
            reducer({"w": want["w"]}, want_loss)
    finally:
        ts.distributed.shutdown()


def expected_mean(step: int) -> dict[str, np.ndarray]:
    """The mean over ranks 0 and 1 of the worker's gradients at `step`."""
    base = (1 + step + 2 + step) / 2
    return {
        "w": base + np.arange(12.0).reshape(3, 4),
        "b0": np.full(4, 2 * base),
        "b1": np.full((2, 2), -base),
        "loss": np.float64((0 + step + 1 + step) / 2),
    }


def test_two_ranks_one_all_reduce_then_clear_failures(tmp_path: Path) -> None:
    needs_gloo()
    reports, codes = launch("checks", tmp_path)
    assert codes[1] == 7, "rank 1 should have died where the worker kills it"
    assert set(reports) == {0}, reports.get(1, {}).get("traceback")
    report = reports[0]
    for name, all_reduces in (("reduce", 1), ("buckets", 2)):  # 21 float32s, 16 a bucket
        for step, got in enumerate(report[name]):
            want = expected_mean(step)
            for key in ("w", "b0", "b1", "loss"):
                np.testing.assert_array_equal(np.asarray(got[key]), want[key], err_msg=key)
            assert got["all_reduces"] == all_reduces
            assert got["shares_memory"] and got["arena"]
    assert report["mismatch"] == (
        "tessc.distributed: the gradients differ across ranks: `grads['w']` is (3, 4) float32 "
        "on rank 0 but (4, 3) float32 on rank 1 (every rank must build the same model)"
    )
    assert report["broadcast"] == {"b": [0.0, 1.0, 2.0], "w": [[0.0, 0.0], [0.0, 0.0]]}
    mixed = report["mixed"]  # one flat buffer, one all-reduce, per dtype
    want = {"a": [1.5] * 3, "h": [2.5] * 2, "z": [3.5] * 2}
    assert mixed["values"] == {k: want[k] for k in mixed["values"]}
    assert mixed["dtypes"]["h"] == "float16" and mixed["all_reduces"] == len(mixed["values"])
    assert mixed["half_loss_dtype"] == "float32" and mixed["half_all_reduces"] == 2
    assert abs(mixed["half_loss"] - 5 / 6) < 1e-6  # float16 would be off by ~1e-4
    # Rank 1 exited before step 1's all-reduce: rank 0 names it, promptly.
    assert report["ok"] is False and report["type"] == "RankFailure", report.get("traceback")
    assert report["ranks"] == [1]
    assert "rank 1 did not answer" in report["error"]
    assert report["failed_after"] < 20


def test_a_hung_rank_is_named_after_the_timeout(tmp_path: Path) -> None:
    needs_gloo()
    reports, _ = launch("hang", tmp_path, stop_after_rank_0=True)
    report = reports[0]
    assert report["type"] == "RankFailure", report.get("traceback")
    assert report["ranks"] == [1] and "rank 1 did not answer" in report["error"]
    assert report["failed_after"] < 30  # the 4 s timeout, then at most 2 s of roll call


def test_train_mlp_data_parallel_matches_one_process(tmp_path: Path) -> None:
    needs_gloo()
    pytest.importorskip("sklearn")
    # The example's default width and optimizer, as tests/test_train_mlp_example.py runs
    # it: the one-process run's train step and rank 0's evaluation are then the programs
    # that test compiles, loaded from the kernel cache by whichever of the two runs later.
    args = ["--epochs", "2", "--plot", "", "--no-progress"]
    # Rank 1 waits in the first all-reduce while rank 0 compiles its evaluation: on a busy
    # CI machine that took over the default 60 s (a RankFailure, no hang to report).
    args += ["--timeout", "600"]
    history = tmp_path / "history.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", str(EXAMPLE), "--data-parallel", *args]
    result = subprocess.run(
        [*command, "--history", str(history)],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("data-parallel over 2 processes") == 1  # rank 0 alone prints
    two = json.loads(history.read_text())
    # Rank 0's NumPy twin trains on the whole global batch, in one process.
    np.testing.assert_allclose(two["loss"], two["numpy_loss"], rtol=1e-5)
    np.testing.assert_allclose(two["accuracy"], two["numpy_accuracy"], atol=0.01)
    assert two["loss"][1] < two["loss"][0]
    # And tessc in one process, its fused train step on the whole batch.
    one = load_example("train_mlp").main(args)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)
