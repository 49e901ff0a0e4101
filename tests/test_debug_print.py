"""`ts.debug.print` (issue 22 §4), as `jax.debug.print`: runtime values printed at every
call of a compiled function, on cpu and reference (cuda: tests/cuda), through grad and
vmap, kept by DCE, and costing fusion only the printed value's store."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts

X = np.arange(3, dtype=np.float32)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_prints_runtime_values_at_every_call(target: str, capsys: pytest.CaptureFixture) -> None:
    def f(x):  # noqa: ANN001, ANN202
        y = x * 2.0
        ts.debug.print("y={y} total={} tag={tag}", y.sum(), y=y, tag="t")
        return y + 1.0

    jitted = ts.jit(f, target=target)
    np.testing.assert_array_equal(jitted(X), X * 2 + 1)
    jitted(X + 1)
    jitted(X)  # the steady-state path prints too
    assert capsys.readouterr().out.splitlines() == [
        "y=[0. 2. 4.] total=6.0 tag=t",
        "y=[2. 4. 6.] total=12.0 tag=t",
        "y=[0. 2. 4.] total=6.0 tag=t",
    ]


def test_a_print_of_an_unused_value_is_not_dead_code(capsys: pytest.CaptureFixture) -> None:
    def f(x):  # noqa: ANN001, ANN202
        ts.debug.print("max {}", (x * x).amax())  # nothing returned depends on it
        return x - 1.0

    ts.jit(f)(X)
    assert capsys.readouterr().out == "max 4.0\n"


def test_through_grad_and_vmap(capsys: pytest.CaptureFixture) -> None:
    def loss(x):  # noqa: ANN001, ANN202
        ts.debug.print("x={}", x)
        return (x**2).sum()

    np.testing.assert_array_equal(ts.grad(loss)(X), 2 * X)
    rows = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(ts.vmap(loss)(rows), (rows**2).sum(1))
    assert capsys.readouterr().out.splitlines() == ["x=[0. 1. 2.]", "x=[1. 2.]", "x=[3. 4.]"]


def test_outside_a_trace_prints_at_once(capsys: pytest.CaptureFixture) -> None:
    ts.debug.print("n={n}", n=3)
    assert capsys.readouterr().out == "n=3\n"


def test_fusion_keeps_the_unprinted_ops_together() -> None:
    def f(x, printed):  # noqa: ANN001, ANN202
        h = (x * 2.0).exp()
        if printed:
            ts.debug.print("h={}", h)
        return (h + 1.0).tanh().sum()

    x = np.ones((64, 64), np.float32)
    quiet = ts.jit(f, static_argnums=1).ir(x, False, stage="loops")
    loud = ts.jit(f, static_argnums=1).ir(x, True, stage="loops")
    kernels = quiet.count("tess.kernel")
    assert loud.count("tess.kernel") <= kernels + 1  # at most the printed value's store
