"""Launch configuration and per-call costs of the cuda target, counted (not timed) in the
simulator: grids follow the device's limits (`tessc.runtime.cuda_launch`), launches per MLP
training step, device allocations per call."""

from __future__ import annotations

from collections.abc import Iterator

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
    x = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
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
