"""Launch configuration and per-call costs of the cuda target, counted (not timed) in the
simulator: grids follow the device's limits (`tessc.runtime.cuda_launch`), launches per MLP
training step, device allocations per call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tessc as ts
from tessc.runtime import cuda_launch
from tessc.runtime.cuda_launch import DeviceLimits


@pytest.fixture
def grids(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int, int]]]:
    """Every grid launched while the test runs."""
    log: list[tuple[int, int, int]] = []
    monkeypatch.setattr(cuda_launch.LAUNCH, "grids", log)
    yield log


def test_grid_stride_launches_follow_the_device_limits(
    monkeypatch: pytest.MonkeyPatch, grids: list[tuple[int, int, int]]
) -> None:
    x = np.arange(5000, dtype=np.float32)
    double = ts.jit(lambda x: x * 2.0, target="cuda")  # 256 threads, 20 blocks with work
    for limits, blocks in [
        (DeviceLimits(1, 1024, 16), 4),  # 1024 // 256 blocks resident on one SM
        (DeviceLimits(3, 2048, 16), 20),  # 24 resident: every block with work
        (DeviceLimits(2, 2048, 3), 6),  # the block limit per SM binds
    ]:
        monkeypatch.setattr(cuda_launch.LAUNCH, "limits", limits)
        grids.clear()
        np.testing.assert_array_equal(double(x), x * 2.0)
        assert grids == [(blocks, 1, 1)]


def test_a_whole_tensor_sum_is_the_same_on_any_grid(
    monkeypatch: pytest.MonkeyPatch, grids: list[tuple[int, int, int]]
) -> None:
    """The first pass's blocks stride over a fixed set of partials: the grid changes how
    many blocks run, not what is summed in which order."""
    x = np.random.default_rng(0).standard_normal(1100).astype(np.float32)
    total = ts.jit(lambda x: x.sum(), target="cuda")
    results = []
    for limits in [DeviceLimits(1, 256, 1), DeviceLimits(4, 2048, 16)]:
        monkeypatch.setattr(cuda_launch.LAUNCH, "limits", limits)
        grids.clear()
        results.append(total(x))
        assert len(grids) == 2 and grids[1] == (1, 1, 1)
    assert grids[0][0] > 1  # the second device runs several first-pass blocks
    np.testing.assert_allclose(results[0], x.sum(dtype=np.float64), rtol=1e-5)
    assert results[0].tobytes() == results[1].tobytes()


def launches_per_call(fn: Any, *args: Any) -> tuple[int, Any]:
    """Launches of one call of `fn` after a first call (which compiles), and its result."""
    fn(*args)
    before = cuda_launch.LAUNCH.count
    result = fn(*args)
    return cuda_launch.LAUNCH.count - before, result


def mlp_loss(params: dict, x: Any, y: Any) -> Any:
    """bench/mlp_step.py's classifier: 64-H-10, softmax cross-entropy from tess ops."""
    h = (x @ params["w1"] + params["b1"]).relu()
    z = h @ params["w2"] + params["b2"]
    z = z - z.amax(dim=1, keepdim=True)
    log_probs = z - z.exp().sum(dim=1, keepdim=True).log()
    return -(log_probs * y).sum() / x.shape[0]


def test_launches_per_mlp_training_step() -> None:
    """18 launches before issue 25. The softmax after the second matmul is one row launch
    (split around the matmul by its reductions it was three), the loss gradient's two
    row-wise kernels join, and the bias update joins its column sum across the launches
    between them: 12. Launches with no dependency between them run side by side
    (`tess-gpu-horizontal`) and the matmul reads w2.T in place (`tess-gpu-fold-transposes`):
    7. The two forward matmuls are one block each: one launch, a barrier between: 6, issue
    25's goal. What orders them: {x @ w1; h @ w2}, softmax rows, the loss's sum (which
    reads z before the loss gradient's rows overwrite it in place), those rows, {the b2
    column sum, h.T, dz @ w2.T}, {the b1 column sum, x.T @ dh, h.T @ dz}."""
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((24, 8)).astype(np.float32),
        "b1": np.zeros(8, np.float32),
        "w2": rng.standard_normal((8, 10)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }
    # Small: the simulator runs every thread in Python.
    x = rng.random((8, 24)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]

    def step(p: dict, x: Any, y: Any) -> tuple[dict, Any]:
        loss, g = ts.value_and_grad(mlp_loss)(p, x, y)
        return {k: p[k] - 0.1 * g[k] for k in p}, loss

    cuda_step = ts.jit(step, target="cuda")
    launches, (got, loss) = launches_per_call(cuda_step, params, x, y)
    assert launches == 6
    want, want_loss = ts.jit(step, target="reference")(params, x, y)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-6)


def test_adam_without_donation_is_one_arena_launch() -> None:
    rng = np.random.default_rng(0)
    shapes = {"a": (3, 5), "b": (7,), "c": (4, 4)}
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    optimizer = ts.optim.Adam(lr=0.01)
    state = optimizer.init(params)
    step = ts.jit(optimizer.step, target="cuda")  # nothing donated
    assert '"arenas"' in step.ir(params, grads, state, stage="numba")
    # The bias corrections (scalars) and one launch over the arenas, whatever the count
    # of parameters (it was a launch per parameter); both one block here, so one launch
    # runs them with a barrier between (`tess-gpu-horizontal`).
    launches, (got, got_state) = launches_per_call(step, params, grads, state)
    assert launches == 1
    want, want_state = ts.jit(optimizer.step, target="reference")(params, grads, state)
    for k in shapes:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got_state["exp_avg"][k], want_state["exp_avg"][k], rtol=1e-5)
