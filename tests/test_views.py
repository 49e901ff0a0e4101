"""Static indexing as views: reversed slices (`x[::-1]`, `x[5:1:-2]`) and dropped dims
(`x[0]`, `x[..., -1]`), alone, chained, with `None`, feeding elementwise ops with broadcast
operands and reductions. Values on `cpu` against the reference interpreter (and the
reference against NumPy); gradients (`unslice`) against float64 central differences on
`cpu` and `reference`. That they cost no kernel of their own is FileCheck's to say
(tests/filecheck/fusion/slice-views.mlir)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tessc as ts

from helpers import central_difference

Key = Callable[[object], object]

# (name, shape, key): each key is NumPy basic indexing, so NumPy computes it too.
CASES: list[tuple[str, tuple[int, ...], Key]] = [
    ("reverse", (6, 5), lambda x: x[::-1]),
    ("reverse_1d", (7,), lambda x: x[::-1]),
    ("reverse_last_by_2", (3, 4, 5), lambda x: x[..., ::-2]),
    ("negative_step_range", (7, 5), lambda x: x[5:1:-2, 1:4]),
    ("first_row", (6, 5), lambda x: x[0]),
    ("last_column", (3, 4, 5), lambda x: x[..., -1]),
    ("reversed_then_dropped", (4, 3, 5), lambda x: x[::-1, 1]),
    ("dropped_then_reversed", (4, 3, 5), lambda x: x[2, :, ::-1]),
    ("none_int_reverse", (4, 5), lambda x: x[None, 2, ::-1]),
    ("unit_dim_reversed", (1, 4, 3), lambda x: x[::-1, ::-1, 0]),
    ("element", (4, 5), lambda x: x[1, -2]),
    ("chained", (6, 5), lambda x: x[::-1][:, 0]),
    ("chained_none", (6, 5), lambda x: x[:, ::-1][2][None, :]),
]


def broadcast_operand(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A random operand that broadcasts against `shape`: some leading dims dropped, some
    of the others 1."""
    kept = shape[rng.integers(0, len(shape) + 1) :] if shape else ()
    dims = tuple(1 if rng.random() < 0.5 else n for n in kept)
    return rng.normal(size=dims).astype(np.float32)


def program(key: Key) -> Callable[..., tuple]:
    def run(x, b):
        y = key(x)
        results = [y * 2.0 + 1.0, y - b, (y * y).sum()]
        if y.ndim:
            results.append(np.max(y, -1) + y.sum(0).sum())
        return tuple(results)

    return run


@pytest.mark.parametrize(("name", "shape", "key"), CASES, ids=[c[0] for c in CASES])
def test_values_match_the_reference_and_numpy(name: str, shape, key: Key) -> None:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.normal(size=shape).astype(np.float32)
    b = broadcast_operand(np.shape(key(x)), rng)
    want = ts.jit(program(key), target="reference")(x, b)
    numpy = program(key)(x, b)
    got = ts.jit(program(key), target="cpu")(x, b)
    for g, w, n in zip(got, want, numpy, strict=True):
        np.testing.assert_allclose(w, n, rtol=1e-6, atol=1e-6)
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


GRADIENT_CASES = [c for c in CASES if c[0] != "reverse_1d"]


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize(
    ("name", "shape", "key"), GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES]
)
def test_gradients_match_central_differences(target: str, name: str, shape, key: Key) -> None:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.normal(size=shape)
    w = rng.normal(size=np.shape(key(x)))

    def loss(x):
        y = key(x)
        return (y * w).sum() + (y * y).sum() * 0.5

    grad = ts.jit(ts.grad(loss), target=target)(x)
    expected = central_difference(ts.jit(loss, target="reference"), x)
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7)
