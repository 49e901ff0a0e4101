"""The CNN job, examples/train_cnn.py, run for two epochs: it trains (the loss falls, the
test accuracy rises), matches its PyTorch twin step for step where torch is installed,
and writes its plot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from helpers.examples import load_example


def test_train_cnn_runs_and_matches_torch(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    compare = importlib.util.find_spec("torch") is not None
    plot = tmp_path / "curves.png"
    argv = ["--epochs", "2", "--plot", str(plot), "--no-progress"]
    history = load_example("train_cnn").main(argv + (["--torch"] if compare else []))
    if compare:
        np.testing.assert_allclose(history["loss"], history["torch_loss"], rtol=1e-3)
        np.testing.assert_allclose(history["accuracy"], history["torch_accuracy"], atol=0.01)
    assert history["loss"][-1] < history["loss"][0]
    assert history["accuracy"][-1] > 0.8
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
