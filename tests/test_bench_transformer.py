"""bench/bench_transformer.py's train-step section run tiny (one layer, D=16, a context of
8): tessc's step (examples/train_transformer.py's own) and the PyTorch and JAX models it is
timed against compute the same losses from the same initial values (dropout 0, two steps:
the second depends on the first's gradients and AdamW update), PyTorch's and JAX's timed
steps run and feed themselves back, and a contender's process gets the parent's options."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
import bench_transformer  # noqa: E402  (bench/ is no package)
import transformer_step  # noqa: E402

TINY = "2,8,16,2,1"  # B, T, D, heads, layers


def test_a_contenders_process_gets_the_parents_options() -> None:
    args = bench_transformer.parse(
        ["--sections", "step", "--step", TINY, "--rounds", "2", "--skip", "jax", "--one-process"]
    )
    command = bench_transformer.child_argv("tessc", args)
    assert command[2:4] == ["--only", "tessc"]
    child = bench_transformer.parse(command[2:])
    assert child.only == "tessc" and not child.one_process
    assert {**vars(child), "only": "", "one_process": True, "skip": "jax"} == vars(args)


def test_train_step_contenders_agree() -> None:
    setup = transformer_step.step_setup(TINY)
    # tessc's losses only: its timed dropout step (a second ~20 s compile) is the
    # example's, which tests/test_train_transformer_example.py trains. tessc first: its
    # compile worker forks, which a process holding JAX's threads should not.
    losses = {"tessc": transformer_step.tessc_losses(setup)}
    for name in ("PyTorch eager", "JAX jit"):
        made = transformer_step.step_contender(name, setup)
        if made is None:  # torch or jax not installed
            continue
        run, losses[name], _ = made
        run()  # a dropout step fed back after the warm-up calls
    assert len(losses) > 1
    for name, pair in losses.items():
        np.testing.assert_allclose(pair, losses["tessc"], rtol=2e-5, err_msg=name)
    assert losses["tessc"][1] < losses["tessc"][0]  # the update lowered it


def test_sections_are_checked() -> None:
    with pytest.raises(SystemExit, match="unknown"):
        bench_transformer.wanted_sections(bench_transformer.parse(["--sections", "steps"]))
