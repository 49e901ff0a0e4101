"""tess-autodiff against torch.autograd, op by op and on composites (skipped without torch).

The tie and kink conventions of the VJP rules are PyTorch's, so these compare exactly,
including at ties of max/min/reduce_max, at 0 for relu/abs, and at a zero base of pow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from test_autodiff import (
    POSITIVE,
    broadcast_heavy,
    draw_inputs,
    pass_gradients,
    reduction_chain,
    seeds_for,
    single_op,
)

from tessc.reference import find_func, interpret

# (op, input shapes, props, torch function, inputs that exercise ties and kinks)
TORCH_CASES: list[tuple[str, list[tuple[int, ...]], dict[str, object], Callable[..., object]]] = [
    ("neg", [(3, 4)], {}, lambda t, x: -x),
    ("exp", [(3, 4)], {}, lambda t, x: t.exp(x)),
    ("log", [(3, 4)], {}, lambda t, x: t.log(x)),
    ("relu", [(3, 4)], {}, lambda t, x: t.relu(x)),
    ("sigmoid", [(3, 4)], {}, lambda t, x: t.sigmoid(x)),
    ("tanh", [(3, 4)], {}, lambda t, x: t.tanh(x)),
    ("sqrt", [(3, 4)], {}, lambda t, x: t.sqrt(x)),
    ("reciprocal", [(3, 4)], {}, lambda t, x: t.reciprocal(x)),
    ("abs", [(3, 4)], {}, lambda t, x: t.abs(x)),
    ("add", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: a + b),
    ("sub", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: a - b),
    ("mul", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: a * b),
    ("div", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: a / b),
    ("max", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: t.maximum(a, b)),
    ("min", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: t.minimum(a, b)),
    ("pow", [(3, 1, 4), (2, 1)], {}, lambda t, a, b: t.pow(a, b)),
    ("sum", [(2, 3, 4)], {"dims": [0, 2]}, lambda t, x: x.sum(dim=(0, 2))),
    ("mean", [(2, 3, 4)], {"dims": [1], "keepdim": True}, lambda t, x: x.mean(1, keepdim=True)),
    ("reduce_max", [(2, 3, 4)], {"dims": [2]}, lambda t, x: t.amax(x, dim=2)),
    ("permute", [(2, 3, 4)], {"dims": [2, 0, 1]}, lambda t, x: x.permute(2, 0, 1)),
    ("reshape", [(2, 6)], {"shape": (3, 4)}, lambda t, x: x.reshape(3, 4)),
    ("broadcast_to", [(3, 1)], {"shape": (2, 3, 4)}, lambda t, x: x.broadcast_to((2, 3, 4))),
    ("select", [(3, 4), (4,), (3, 1)], {}, lambda t, c, a, b: t.where(c != 0, a, b)),
    ("matmul", [(2, 3, 4), (4, 5)], {}, lambda t, a, b: a @ b),
]


def torch_vjp(
    function: Callable[..., object], args: Sequence[np.ndarray], seed: np.ndarray
) -> list[np.ndarray]:
    torch = pytest.importorskip("torch")
    tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
    output = function(torch, *tensors)
    output.backward(torch.tensor(seed, dtype=torch.float64))  # type: ignore[attr-defined]
    return [
        np.zeros_like(a) if t.grad is None else t.grad.numpy()
        for a, t in zip(args, tensors, strict=True)
    ]


def compare_with_torch(
    op_name: str, shapes: list[tuple[int, ...]], props: dict[str, object],
    function: Callable[..., object], args: list[np.ndarray],
) -> None:  # fmt: skip
    module = single_op(op_name, *shapes, **props)
    outputs = interpret(module, "main", args)
    seeds = seeds_for(outputs, 5)
    _, ours = pass_gradients(module, "main", args, seeds, range(len(args)))
    wrt = list(range(len(args)))
    if op_name == "select":  # the condition has no gradient in either
        wrt = [1, 2]
    theirs = torch_vjp(function, args, seeds[0])
    for i in wrt:
        np.testing.assert_allclose(ours[i], theirs[i], rtol=1e-10, atol=1e-12, err_msg=op_name)


@pytest.mark.parametrize(
    ("op_name", "shapes", "props", "function"),
    [pytest.param(*case, id=case[0]) for case in TORCH_CASES],
)
def test_every_op_matches_torch_autograd(
    op_name: str,
    shapes: list[tuple[int, ...]],
    props: dict[str, object],
    function: Callable[..., object],
) -> None:
    pytest.importorskip("torch")
    module = single_op(op_name, *shapes, **props)
    args = draw_inputs(find_func(module, "main"), 3, positive=op_name in POSITIVE)
    compare_with_torch(op_name, shapes, props, function, args)


@pytest.mark.parametrize("op_name", ["max", "min", "relu", "abs", "reduce_max", "pow"])
def test_conventions_at_ties_and_kinks_match_torch(op_name: str) -> None:
    pytest.importorskip("torch")
    case = next(c for c in TORCH_CASES if c[0] == op_name)
    _, _, props, function = case
    if op_name in ("max", "min"):
        shapes = [(4,), (4,)]
        args = [np.array([1.0, 2.0, 3.0, 0.0]), np.array([3.0, 2.0, 1.0, 0.0])]
    elif op_name == "reduce_max":
        shapes = [(2, 3, 4)]
        args = [np.round(np.random.default_rng(0).uniform(0, 2, (2, 3, 4)))]  # many ties
    elif op_name == "pow":
        shapes = [(4,), (4,)]
        args = [np.array([0.0, 0.0, 2.0, 0.0]), np.array([2.0, 0.0, 0.0, 0.5])]
    else:
        shapes = [(3,)]
        args = [np.array([-1.0, 0.0, 2.0])]
    compare_with_torch(op_name, shapes, props, function, args)


def test_composites_match_torch() -> None:
    pytest.importorskip("torch")
    a, b, c, d = draw_inputs(find_func(broadcast_heavy(), "expr"), 1)

    def expr(t, a, b, c, d):  # type: ignore[no-untyped-def]
        m = t.sigmoid((a * b + c) / (t.abs(d) + 1)) * a - b
        return (m * m).sum()

    _, ours = pass_gradients(broadcast_heavy(), "expr", [a, b, c, d], [np.ones(())], range(4))
    for mine, theirs in zip(ours, torch_vjp(expr, [a, b, c, d], np.ones(())), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)

    (x,) = draw_inputs(find_func(reduction_chain(), "chain"), 2)

    def chain(t, x):  # type: ignore[no-untyped-def]
        peaks = t.amax(x * x.sum(2, keepdim=True), dim=1)
        return peaks.mean() + x.mean(0).sum()

    _, (mine,) = pass_gradients(reduction_chain(), "chain", [x], [np.ones(())], [0])
    (theirs,) = torch_vjp(chain, [x], np.ones(()))
    np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
