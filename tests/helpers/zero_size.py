"""
Programs on zero-size tensors, for every target (`tests/test_zero_size.py` runs them on the
CPU pipelines, `tests/cuda/test_zero_size_cuda.py` on the CUDA target in the simulator).

`CASES` covers each tess op with a zero-size operand or result: elementwise ops (with
broadcasting), reductions over an empty dim (sum 0, prod 1, mean NaN) and over a full dim
of an empty tensor, matmuls with an empty contraction (zeros) and empty rows or columns,
the shape ops, concat, take, one_hot, cast, softmax and cross-entropy, and gradients
(`GRADIENTS`) through all of them. `check_case`/`check_gradient` compare a target with the
reference interpreter. `ERRORS`: what NumPy refuses (the max or argmax of an empty dim) is
a TraceError naming the call, on every target alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tessc as ts
from tessc import nn


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


EMPTY = rand(0, 3)
NO_LABELS = np.zeros((0,), np.int64)

Case = tuple[Callable[..., Any], list[np.ndarray]]

CASES: dict[str, Case] = {
    "neg": (lambda t: -t, [EMPTY]),
    "unary_chain": (lambda t: (t * 2.0).exp().tanh().sqrt(), [EMPTY]),
    "binary": (lambda a, b: (a + b) * a - b / 2.0, [EMPTY, rand(0, 3, seed=1)]),
    "broadcast_row": (lambda a, b: a * b, [EMPTY, rand(3)]),
    "broadcast_to_empty": (lambda a, b: a - b, [rand(0, 1), rand(1, 3)]),
    "broadcast_empty_cols": (lambda a, b: a + b, [rand(3, 0), rand(3, 1)]),
    "compare_where": (lambda t: ts.where(t > 0.0, t, 0.0), [EMPTY]),
    "cast_int": (lambda t: t.astype(np.int32) + 1, [EMPTY]),
    "int_sum_empty_dim": (lambda a: a.sum(0), [np.zeros((0, 4), np.int64)]),
    "bool_count": (lambda t: (t > 0.0).sum(1), [EMPTY]),
    "sum_empty_dim": (lambda t: t.sum(0), [EMPTY]),
    "sum_all": (lambda t: t.sum(), [EMPTY]),
    "sum_full_dim": (lambda t: t.sum(1), [EMPTY]),
    "prod_empty_dim": (lambda t: t.prod(0), [EMPTY]),
    "mean_empty_dim": (lambda t: t.mean(0), [EMPTY]),
    "mean_full_dim": (lambda t: t.mean(1), [EMPTY]),
    "var_full_dim": (lambda t: t.var(1), [EMPTY]),
    "max_full_dim": (lambda t: t.amax(1), [EMPTY]),
    "argmax_full_dim": (lambda t: t.argmax(1), [EMPTY]),
    "matmul_empty_contraction": (lambda a, b: a @ b, [rand(3, 0), rand(0, 4)]),
    "matmul_empty_contraction_epilogue": (
        lambda a, b: (a @ b).relu() + 1.0,
        [rand(3, 0), rand(0, 4)],
    ),
    "matmul_empty_rows": (lambda a, b: a @ b, [EMPTY, rand(3, 4)]),
    "matmul_empty_cols": (lambda a, b: a @ b, [rand(2, 3), rand(3, 0)]),
    "matmul_then_reduce": (lambda a, b: (a @ b).sum(0), [EMPTY, rand(3, 4)]),
    "transpose": (lambda t: t.T * 2.0, [EMPTY]),
    "reshape": (lambda t: t.reshape(3, 0) + 1.0, [EMPTY]),
    "flatten_unsqueeze": (lambda t: t.flatten().unsqueeze(0) * 2.0, [EMPTY]),
    "broadcast_to": (lambda t: t.broadcast_to(0, 3) + 1.0, [rand(3)]),
    "slice_to_empty": (lambda t: t[1:1] + 1.0, [rand(4, 3)]),
    "slice_of_empty": (lambda t: t[:, 1:] * 2.0, [EMPTY]),
    "concat_with_empty": (lambda a, b: ts.concatenate([a, b], 0) * 2.0, [EMPTY, rand(2, 3)]),
    "concat_of_empties": (lambda a, b: ts.concatenate([a, b], 0) * 2.0, [EMPTY, EMPTY]),
    "take_no_indices": (lambda t, i: t.take(i, 0), [rand(4, 3), NO_LABELS]),
    "take_from_empty": (lambda t, i: t.take(i, 1), [EMPTY, np.array([0, 2], np.int64)]),
    "one_hot": (lambda i: ts.one_hot(i, 5), [NO_LABELS]),
    "softmax": (lambda t: nn.softmax(t), [EMPTY]),
    "softmax_over_empty_dim": (lambda t: nn.softmax(t, dim=0), [EMPTY]),
    "log_softmax": (lambda t: nn.log_softmax(t), [EMPTY]),
    "softmax_of_empty_rows": (lambda t: nn.softmax(t), [rand(3, 0)]),
    "logsumexp_of_empty_rows": (lambda t: nn.logsumexp(t), [rand(3, 0)]),
    "sum_of_empty_rows": (lambda t: (t * 2.0).sum(1) + 1.0, [rand(3, 0)]),
    "mean_of_empty_rows": (lambda t: t.mean(1), [rand(3, 0)]),
    "cross_entropy_sum": (
        lambda x, y: nn.cross_entropy(x, y, reduction="sum"),
        [rand(0, 5), NO_LABELS],
    ),
    "cross_entropy_mean": (lambda x, y: nn.cross_entropy(x, y), [rand(0, 5), NO_LABELS]),
    "two_results": (lambda t: (t * t, (t * t).sum(1)), [EMPTY]),
}


def _mlp_loss(w: Any, b: Any, x: Any, y: Any) -> Any:
    return nn.cross_entropy((x @ w + b).tanh(), y, reduction="sum")


Gradient = tuple[Callable[..., Any], tuple[int, ...], list[np.ndarray]]

GRADIENTS: dict[str, Gradient] = {
    "neg_sum": (lambda t: (-t).sum(), (0,), [EMPTY]),
    "broadcast_mul": (lambda a, b: (a * b).sum(), (0, 1), [EMPTY, rand(3)]),
    "matmul_empty_contraction": (lambda a, b: (a @ b).sum(), (0, 1), [rand(2, 0), rand(0, 4)]),
    "matmul_empty_rows": (lambda a, b: (a @ b).sum(), (0, 1), [EMPTY, rand(3, 4)]),
    "take_no_indices": (lambda t, i: t.take(i, 0).sum(), (0,), [rand(4, 3), NO_LABELS]),
    "softmax": (lambda t: (nn.softmax(t) * t).sum(), (0,), [EMPTY]),
    "max_full_dim": (lambda t: t.amax(1).sum(), (0,), [EMPTY]),
    "mean": (lambda t: t.mean(), (0,), [EMPTY]),
    "mean_full_dim": (lambda t: t.mean(1).sum(), (0,), [EMPTY]),
    "prod_empty_dim": (lambda t: t.prod(0).sum(), (0,), [EMPTY]),
    "concat": (lambda a, b: ts.concatenate([a, b], 0).sum(), (0, 1), [EMPTY, rand(2, 3)]),
    "slice": (lambda t: t[:, 1:].sum(), (0,), [EMPTY]),
    "mlp_empty_batch": (_mlp_loss, (0, 1), [rand(4, 5), rand(5), rand(0, 4), NO_LABELS]),
    "mlp_mean_empty_batch": (
        lambda w, x: (x @ w).tanh().mean(),
        (0, 1),
        [rand(4, 5), rand(0, 4)],
    ),
}

ERRORS: dict[str, tuple[Callable[..., Any], str]] = {
    "max_empty_dim": (lambda t: t.max(0), "max of an empty dim"),
    "min_empty_dim": (lambda t: t.min(0), "min of an empty dim"),
    "max_all": (lambda t: t.max(), "max of an empty dim"),
    "argmax_empty_dim": (lambda t: t.argmax(0), "argmax of an empty dim"),
    "argmax_all": (lambda t: t.argmax(), "argmax of an empty tensor"),
}


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [np.asarray(value)]


def assert_same(got: Any, expected: Any) -> None:
    got_leaves, expected_leaves = _leaves(got), _leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, equal_nan=True)


def check_case(name: str, target: str) -> None:
    fn, arrays = CASES[name]
    expected = ts.jit(fn, target="reference")(*arrays)
    assert_same(ts.jit(fn, target=target)(*arrays), expected)


def check_gradient(name: str, target: str) -> None:
    fn, argnums, arrays = GRADIENTS[name]
    expected = ts.value_and_grad(fn, argnums=argnums, target="reference")(*arrays)
    assert_same(ts.value_and_grad(fn, argnums=argnums, target=target)(*arrays), expected)
