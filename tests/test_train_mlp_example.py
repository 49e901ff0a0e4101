"""The main job, examples/train_mlp.py, run for a few epochs: it trains (the loss falls,
the test accuracy rises), matches its hand-written NumPy twin step for step, and writes
its plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.examples import load_example


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_train_mlp_runs_and_matches_numpy(optimizer: str, tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    plot = tmp_path / "curves.png"
    history = load_example("train_mlp").main(
        ["--epochs", "3", "--optimizer", optimizer, "--plot", str(plot), "--no-progress"]
    )
    np.testing.assert_allclose(history["loss"], history["numpy_loss"], rtol=1e-3)
    np.testing.assert_allclose(history["accuracy"], history["numpy_accuracy"], atol=0.01)
    assert history["loss"][-1] < history["loss"][0]
    assert history["accuracy"][-1] > 0.9
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
