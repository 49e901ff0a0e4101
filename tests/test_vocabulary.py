"""Issue 22 §4's missing functions inside `jit`: each on the `reference` and `cpu` targets
against NumPy (the nn losses against PyTorch, skipped without it), gradients against
central differences in float64, and `print` of a traced value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tessc as ts
from tessc.dialects.builder_types import TessError

from helpers import central_difference

TARGETS = ("reference", "cpu")
RNG = np.random.default_rng(22)
X = RNG.normal(size=(3, 4))
V = RNG.normal(size=(5,))
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.7, 0.0, 3.5])


def run(f: Callable[..., Any], *args: Any, target: str) -> Any:
    return ts.jit(f, target=target)(*args)


def same(actual: Any, wanted: Any, tol: float = 1e-12) -> None:
    if isinstance(wanted, list | tuple):
        assert len(actual) == len(wanted)
        for a, w in zip(actual, wanted, strict=True):
            same(a, w, tol)
        return
    actual, wanted = np.asarray(actual), np.asarray(wanted)
    assert actual.shape == wanted.shape, (actual.shape, wanted.shape)
    assert actual.dtype.kind == wanted.dtype.kind, (actual.dtype, wanted.dtype)
    np.testing.assert_allclose(actual, wanted, rtol=tol, atol=tol)


# name -> (tessc function of the inputs, NumPy function of the inputs, inputs)
CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = {
    # constants (the input only anchors the trace's dtype where the function needs none)
    "arange(5)": (
        lambda x: ts.arange(5) + 0 * x.sum().astype(np.int64),
        lambda x: np.arange(5),
        (X,),
    ),
    "arange(1, 2, 0.25) f64": (
        lambda x: ts.arange(1, 2, 0.25, dtype=np.float64) + x[0, 0],
        lambda x: np.arange(1, 2, 0.25) + x[0, 0],
        (X,),
    ),
    "linspace": (
        lambda x: ts.linspace(0, 1, 5, dtype=np.float64) * x[0, 0],
        lambda x: np.linspace(0, 1, 5) * x[0, 0],
        (X,),
    ),
    "eye(3, 4, k=1)": (
        lambda x: ts.eye(3, 4, k=1, dtype=np.float64) * x,
        lambda x: np.eye(3, 4, k=1) * x,
        (X,),
    ),
    "zeros_like": (lambda x: ts.zeros_like(x), np.zeros_like, (X,)),
    "ones_like int": (
        lambda x: ts.ones_like(x, dtype=np.int32),
        lambda x: np.ones_like(x, np.int32),
        (X,),
    ),
    "full_like": (lambda x: ts.full_like(x, 2.5), lambda x: np.full_like(x, 2.5), (X,)),
    "full": (
        lambda x: ts.full((2, 3), 7.0, np.float64) + x[0, 0],
        lambda x: np.full((2, 3), 7.0) + x[0, 0],
        (X,),
    ),
    "triu": (lambda x: ts.triu(x), np.triu, (X,)),
    "tril(k=-1)": (lambda x: ts.tril(x, -1), lambda x: np.tril(x, -1), (X,)),
    "triu batched k=2": (lambda x: ts.triu(x, 2), lambda x: np.triu(x, 2), (X.reshape(1, 3, 4),)),
    # tests and rounding
    "any": (lambda x: ts.any(x > 1.0, axis=1), lambda x: np.any(x > 1.0, axis=1), (X,)),
    "all": (lambda x: ts.all(x > -3.0), lambda x: np.all(x > -3.0), (X,)),
    "all keepdims": (
        lambda x: ts.all(x, axis=0, keepdims=True),
        lambda x: np.all(x, axis=0, keepdims=True),
        (np.array([[1.0, 0.0], [2.0, 3.0]]),),
    ),
    "isnan": (ts.isnan, np.isnan, (np.array([1.0, np.nan, np.inf, -np.inf]),)),
    "isfinite": (ts.isfinite, np.isfinite, (np.array([1.0, np.nan, np.inf, -np.inf]),)),
    "sign": (ts.sign, np.sign, (np.array([-2.0, 0.0, 3.0, np.nan, -np.inf]),)),
    "sign int": (ts.sign, np.sign, (np.array([-2, 0, 3], np.int32),)),
    "floor": (ts.floor, np.floor, (HALVES,)),
    "ceil": (ts.ceil, np.ceil, (HALVES,)),
    "round (halves to even)": (ts.round, np.round, (HALVES,)),
    "round(decimals=1)": (lambda x: ts.round(x, 1), lambda x: np.round(x, 1), (X,)),
    "x.floor() f32": (lambda x: x.floor(), np.floor, (HALVES.astype(np.float32),)),
    "float //": (lambda x, y: x // y, lambda x, y: x // y, (HALVES, np.array([0.7, -1.1] * 5))),
    "float %": (lambda x, y: x % y, lambda x, y: x % y, (HALVES, np.array([0.7, -1.1] * 5))),
    "float // 0 and inf //": (
        lambda x, y: (x // y, x % y),
        lambda x, y: (x // y, x % y),
        (np.array([1.0, -1.0, 0.0, np.inf]), np.array([0.0, 0.0, 0.0, 2.0])),
    ),
    "float % number": (lambda x: x % 1.5, lambda x: x % 1.5, (HALVES,)),
    # reordering
    "flip": (lambda x: ts.flip(x), np.flip, (X,)),
    "flip axis": (lambda x: ts.flip(x, 1), lambda x: np.flip(x, 1), (X,)),
    "roll": (lambda x: ts.roll(x, 2), lambda x: np.roll(x, 2), (X,)),
    "roll axes": (
        lambda x: ts.roll(x, (1, -1), (0, 1)),
        lambda x: np.roll(x, (1, -1), (0, 1)),
        (X,),
    ),
    "split sections": (lambda x: ts.split(x, 2, axis=1), lambda x: np.split(x, 2, axis=1), (X,)),
    "split indices": (lambda x: ts.split(x, [1, 3]), lambda x: np.split(x, [1, 3]), (X.T.copy(),)),
    "moveaxis": (
        lambda x: ts.moveaxis(x, 0, -1),
        lambda x: np.moveaxis(x, 0, -1),
        (X.reshape(3, 2, 2),),
    ),
    "moveaxis two": (
        lambda x: ts.moveaxis(x, (0, 1), (2, 0)),
        lambda x: np.moveaxis(x, (0, 1), (2, 0)),
        (X.reshape(3, 2, 2),),
    ),
    "swapaxes": (lambda x: ts.swapaxes(x, 0, 1), lambda x: np.swapaxes(x, 0, 1), (X,)),
    "tile": (lambda x: ts.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1)), (X,)),
    # scans and norms
    "cumsum": (lambda x: ts.cumsum(x), np.cumsum, (X,)),
    "cumsum axis": (lambda x: ts.cumsum(x, axis=1), lambda x: np.cumsum(x, axis=1), (X,)),
    "cumsum int": (
        lambda x: ts.cumsum(x, 0),
        lambda x: np.cumsum(x, 0),
        (np.arange(7, dtype=np.int32),),
    ),
    "cumprod": (lambda x: ts.cumprod(x, axis=0), lambda x: np.cumprod(x, axis=0), (X,)),
    "norm": (lambda x: ts.linalg.norm(x), np.linalg.norm, (X,)),
    "norm axis": (lambda x: ts.linalg.norm(x, axis=1), lambda x: np.linalg.norm(x, axis=1), (X,)),
    "norm ord=1": (lambda x: ts.linalg.norm(x, 1, 0), lambda x: np.linalg.norm(x, 1, 0), (X,)),
    "norm ord=3": (lambda x: ts.linalg.norm(x, 3, 1), lambda x: np.linalg.norm(x, 3, 1), (X,)),
    "norm ord=inf": (
        lambda x: ts.linalg.norm(x, np.inf),
        lambda x: np.linalg.norm(x, np.inf),
        (V,),
    ),
    "norm ord=0": (
        lambda x: ts.linalg.norm(x, 0),
        lambda x: np.linalg.norm(x, 0),
        (np.array([1.0, 0.0, 2.0]),),
    ),
    "norm fro": (lambda x: ts.linalg.norm(x, "fro"), lambda x: np.linalg.norm(x, "fro"), (X,)),
    "norm matrix 1": (lambda x: ts.linalg.norm(x, 1), lambda x: np.linalg.norm(x, 1), (X,)),
    "norm matrix -inf": (
        lambda x: ts.linalg.norm(x, -np.inf),
        lambda x: np.linalg.norm(x, -np.inf),
        (X,),
    ),
    "norm matrix keepdims": (
        lambda x: ts.linalg.norm(x, np.inf, (0, 1), keepdims=True),
        lambda x: np.linalg.norm(x, np.inf, (0, 1), keepdims=True),
        (X,),
    ),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_function_matches_numpy(case: str, target: str) -> None:
    function, numpy_function, inputs = CASES[case]
    same(run(function, *inputs, target=target), numpy_function(*inputs))


def test_python_round_floor_and_ceil_of_a_traced_value() -> None:
    import math

    def f(x):
        return round(x), round(x, 1), math.floor(x), math.ceil(x), x.round(decimals=1)

    wanted = (np.round(X), np.round(X, 1), np.floor(X), np.ceil(X), np.round(X, 1))
    same(run(f, X, target="cpu"), wanted)
    ints = np.arange(-3, 3, dtype=np.int32)
    same(run(lambda i: (ts.floor(i), i.round(), ts.ceil(i)), ints, target="cpu"), (ints,) * 3)


NUMPY_CALLS = {
    "cumsum": lambda np, x: np.cumsum(x, axis=1),
    "cumprod": lambda np, x: np.cumprod(x),
    "flip": lambda np, x: np.flip(x, 0),
    "roll": lambda np, x: np.roll(x, -1, 1),
    "split": lambda np, x: np.split(x, [2], axis=1),
    "moveaxis": lambda np, x: np.moveaxis(x, 0, 1),
    "triu": lambda np, x: np.triu(x, 1),
    "tril": lambda np, x: np.tril(x),
    "any": lambda np, x: np.any(x > 1.0, axis=0),
    "all": lambda np, x: np.all(x > -1.0, axis=1),
    "sign": lambda np, x: np.sign(x),
    "round": lambda np, x: np.round(x, 1),
    "around": lambda np, x: np.around(x),
    "zeros_like": lambda np, x: np.zeros_like(x),
    "full_like": lambda np, x: np.full_like(x, 3.0),
    "linalg.norm": lambda np, x: np.linalg.norm(x, axis=1),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CALLS))
def test_np_function_on_a_traced_tensor_is_tessc_s(name: str) -> None:
    call = NUMPY_CALLS[name]
    same(run(lambda x: call(np, x), X, target="reference"), call(np, X))


def test_np_functions_on_traced_tensors_stay_numpy_semantics() -> None:
    wanted = (np.floor(HALVES), np.rint(HALVES), np.isfinite(HALVES), HALVES // 0.5)
    same(
        run(lambda x: (np.floor(x), np.rint(x), np.isfinite(x), x // 0.5), HALVES, target="cpu"),
        wanted,
    )


# ---------------------------------------------------------------------------------------
# gradients against central differences (float64)
# ---------------------------------------------------------------------------------------

POSITIVE = np.abs(X) + 0.5
GRADIENTS: dict[
    str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray], np.ndarray]
] = {
    "triu": (lambda x: ts.triu(x, 1), lambda x: np.triu(x, 1), X),
    "tril": (ts.tril, np.tril, X),
    "flip": (lambda x: ts.flip(x, 0), lambda x: np.flip(x, 0), X),
    "roll": (lambda x: ts.roll(x, 1, 1), lambda x: np.roll(x, 1, 1), X),
    "split": (lambda x: ts.split(x, [1])[1] * 2.0, lambda x: np.split(x, [1])[1] * 2.0, X),
    "moveaxis": (lambda x: ts.moveaxis(x, 0, 1), lambda x: np.moveaxis(x, 0, 1), X),
    "cumsum": (lambda x: ts.cumsum(x, 1), lambda x: np.cumsum(x, 1), X),
    "cumprod": (lambda x: ts.cumprod(x, 1), lambda x: np.cumprod(x, 1), X),
    "cumprod through a zero": (
        lambda x: ts.cumprod(x),
        np.cumprod,
        np.array([1.5, 0.0, -2.0, 0.5]),
    ),
    "norm": (ts.linalg.norm, np.linalg.norm, X),
    "norm ord=3": (lambda x: ts.linalg.norm(x, 3, 1), lambda x: np.linalg.norm(x, 3, 1), X),
    "float %": (lambda x: x % 0.7, lambda x: x % 0.7, X),
    "floor zero gradient": (lambda x: x.floor() * x, lambda x: np.floor(x) * x, X),
    "round zero gradient": (lambda x: ts.round(x) + x, lambda x: np.round(x) + x, X),
    "sign": (lambda x: ts.sign(x) * x, lambda x: np.sign(x) * x, X),
    "full_like": (lambda x: ts.full_like(x, 2.0) * x, lambda x: 2.0 * x, X),
    "log of positive": (
        lambda x: ts.cumsum(x.log(), 0),
        lambda x: np.cumsum(np.log(x), 0),
        POSITIVE,
    ),
}


@pytest.mark.parametrize("case", sorted(GRADIENTS))
def test_gradient_matches_central_differences(case: str) -> None:
    function, numpy_function, x = GRADIENTS[case]
    weights = RNG.normal(size=np.shape(numpy_function(x)))

    def loss(x: Any) -> Any:
        return (function(x) * weights).sum()

    gradient = ts.jit(ts.grad(loss))(x)
    numerical = central_difference(lambda v: (numpy_function(v) * weights).sum(), x)
    np.testing.assert_allclose(gradient, numerical, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------
# the binary cross-entropies, against PyTorch
# ---------------------------------------------------------------------------------------

LOGITS = np.array([[-30.0, -2.0, -0.1, 0.0], [0.3, 1.5, 5.0, 40.0]])
TARGET = np.array([[0.0, 1.0, 0.3, 1.0], [1.0, 0.0, 0.5, 0.0]])
WEIGHT = np.array([0.5, 1.0, 2.0, 1.5])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target", TARGETS)
def test_binary_cross_entropy_matches_torch(reduction: str, target: str) -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    probabilities = 1.0 / (1.0 + np.exp(-LOGITS / 10))
    probabilities[0, 0] = 0.0  # torch clamps its logs at -100
    actual = run(
        lambda p, y, w: (
            ts.nn.binary_cross_entropy(p, y, reduction=reduction),
            ts.nn.binary_cross_entropy(p, y, w, reduction),
        ),
        probabilities,
        TARGET,
        WEIGHT,
        target=target,
    )
    p, y, w = (torch.tensor(a) for a in (probabilities, TARGET, WEIGHT))
    wanted = (
        functional.binary_cross_entropy(p, y, reduction=reduction).numpy(),
        functional.binary_cross_entropy(p, y, w, reduction=reduction).numpy(),
    )
    same(actual, wanted)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target", TARGETS)
def test_binary_cross_entropy_with_logits_matches_torch(reduction: str, target: str) -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    actual = run(
        lambda x, y, w: (
            ts.nn.binary_cross_entropy_with_logits(x, y, reduction=reduction),
            ts.nn.binary_cross_entropy_with_logits(x, y, w, reduction, pos_weight=w * 2.0),
        ),
        LOGITS,
        TARGET,
        WEIGHT,
        target=target,
    )
    x, y, w = (torch.tensor(a) for a in (LOGITS, TARGET, WEIGHT))
    wanted = (
        functional.binary_cross_entropy_with_logits(x, y, reduction=reduction).numpy(),
        functional.binary_cross_entropy_with_logits(
            x, y, w, reduction=reduction, pos_weight=w * 2.0
        ).numpy(),
    )
    same(actual, wanted)


def test_binary_cross_entropy_with_logits_gradient_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    gradient = ts.jit(ts.grad(ts.nn.binary_cross_entropy_with_logits))(LOGITS, TARGET)
    x = torch.tensor(LOGITS, requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(x, torch.tensor(TARGET)).backward()
    same(gradient, x.grad.numpy())


def test_binary_cross_entropy_gradient_is_finite_at_0_and_1() -> None:
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    loss, gradient = ts.jit(ts.value_and_grad(ts.nn.binary_cross_entropy))(p, y)
    np.testing.assert_allclose(loss, (100.0 + 100.0 + np.log(2.0)) / 5, rtol=1e-12)
    assert np.isfinite(gradient).all()
    np.testing.assert_allclose(gradient[[0, 1, 4]], [0.2, -0.2, -0.4], rtol=1e-12)


def test_binary_cross_entropy_gradients_match_central_differences() -> None:
    p = 1.0 / (1.0 + np.exp(-X))

    def numpy_loss(p: np.ndarray) -> float:
        return float(-(TARGET[:, :1] * np.log(p) + (1 - TARGET[:, :1]) * np.log(1 - p)).mean())

    target = np.broadcast_to(TARGET[:, :1], (2, 4)).copy()
    gradient = ts.jit(ts.grad(ts.nn.binary_cross_entropy))(p[:2], target)
    numerical = central_difference(
        lambda v: -(target * np.log(v) + (1 - target) * np.log(1 - v)).mean(), p[:2]
    )
    np.testing.assert_allclose(gradient, numerical, rtol=1e-6, atol=1e-8)
    assert numpy_loss(p[:2, :1]) > 0

    logits_gradient = ts.jit(ts.grad(ts.nn.binary_cross_entropy_with_logits))(X[:2], target)
    numerical = central_difference(
        lambda v: (np.maximum(v, 0) - v * target + np.log1p(np.exp(-np.abs(v)))).mean(), X[:2]
    )
    np.testing.assert_allclose(logits_gradient, numerical, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------------------
# errors and print
# ---------------------------------------------------------------------------------------

ERRORS = {
    "arange outside jit": (lambda: ts.arange(3), "inside a @tessc.jit"),
    "split unequal": (lambda x: ts.split(x, 3, axis=1), "do not divide"),
    "norm ord=2 matrix": (lambda x: ts.linalg.norm(x, 2), "needs an SVD"),
    "roll shift count": (lambda x: ts.roll(x, (1, 2), 0), "2 shifts for 1 axes"),
    "tril of a vector": (lambda x: ts.tril(x[0]), "rank 2 or more"),
    "bce shapes": (lambda x: ts.nn.binary_cross_entropy(x, x[0]), "differs from input"),
    "format a traced value": (lambda x: f"{x.sum():.3f}", "no value while tracing"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_name_the_problem(case: str) -> None:
    function, message = ERRORS[case]
    with pytest.raises(TessError) as error:
        function() if case == "arange outside jit" else run(function, X, target="reference")
    assert message in str(error.value)


def test_print_of_a_traced_value_says_it_has_no_value_yet(capsys: pytest.CaptureFixture) -> None:
    def f(x: Any) -> Any:
        print(x.sum())
        return x

    run(f, X, target="reference")
    printed = capsys.readouterr().out
    assert "f64[]" in printed and "no value while tracing" in printed
