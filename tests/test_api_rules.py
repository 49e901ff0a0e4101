"""One rule for the API: Tensor methods are PyTorch's, `tessc.<function>`s NumPy's.

Every row of README's "NumPy or PyTorch" table runs traced and is compared with the
library whose spelling it uses (PyTorch rows skip where torch is not installed), and every
ambiguous spelling raises a TessError naming the unambiguous ones.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

import tessc as ts

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

RNG = np.random.default_rng(22)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
M = RNG.standard_normal((3, 4)).astype(np.float32)
I = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)  # noqa: E741


def run(fn, *args):
    return ts.jit(fn, target="reference")(*args)


def to_numpy(value):
    if isinstance(value, tuple):
        return tuple(to_numpy(v) for v in value)
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def assert_same(actual, expected):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# methods: PyTorch's meaning (the same lambda runs on a torch tensor)
# ---------------------------------------------------------------------------------------

METHOD_ROWS = {
    "x.transpose(0, 1) on a matrix": (lambda x: x.transpose(0, 1), M),
    "x.transpose(0, 2)": (lambda x: x.transpose(0, 2), X),
    "x.transpose(-1, 0)": (lambda x: x.transpose(-1, 0), X),
    "x.permute(2, 0, 1)": (lambda x: x.permute(2, 0, 1), X),
    "x.permute((1, 0, 2))": (lambda x: x.permute((1, 0, 2)), X),
    "x.T on a matrix": (lambda x: x.T, M),
    "x.mT": (lambda x: x.mT, X),
    "x.max(dim=1)": (lambda x: tuple(x.max(dim=1)), X),
    "x.max(1, keepdim=True)": (lambda x: tuple(x.max(1, keepdim=True)), X),
    "x.max(1)[1] is the indices": (lambda x: x.max(1)[1], X),
    "x.max(1).values": (lambda x: x.max(1).values, X),
    "x.min(-1).indices": (lambda x: x.min(-1).indices, X),
    "x.max()": (lambda x: x.max(), X),
    "x.max(y) elementwise": (lambda x: x.max(x * -1.0), X),
    "x.amax((0, 2))": (lambda x: x.amax((0, 2)), X),
    "x.var(1)": (lambda x: x.var(1), X),
    "x.var()": (lambda x: x.var(), X),
    "x.std(0, keepdim=True)": (lambda x: x.std(0, keepdim=True), X),
    "x.var(1, correction=0)": (lambda x: x.var(1, correction=0), X),
    "x.var(1, unbiased=False)": (lambda x: x.var(1, unbiased=False), X),
    "x.repeat(2, 1, 3)": (lambda x: x.repeat(2, 1, 3), X),
    "x.repeat(2, 1, 1, 2) adds a dim": (lambda x: x.repeat(2, 1, 1, 2), X),
    "x.repeat_interleave(2, 1)": (lambda x: x.repeat_interleave(2, 1), X),
    "x.repeat_interleave(3)": (lambda x: x.repeat_interleave(3), M),
    "x.flatten(1)": (lambda x: x.flatten(1), X),
    "x.flatten(0, 1)": (lambda x: x.flatten(0, 1), X),
    "x.view(4, -1)": (lambda x: x.view(4, -1), X),
    "x.view((6, 4))": (lambda x: x.view((6, 4)), X),
    "int ** 2": (lambda x: x**2, I),
    "int ** 3": (lambda x: x**3, I),
    "int ** 0": (lambda x: x**0, I),
    "2 ** int": (lambda x: 2 ** x.clip(0, None), I),
    "int // 4": (lambda x: x // 4, I),
    "int // -4": (lambda x: x // -4, I),
    "int % 4": (lambda x: x % 4, I),
    "int % -4": (lambda x: x % -4, I),
    "int // int": (lambda x: (x + 7) // (x.clip(1, None)), I),
    "int % int": (lambda x: (x * 5) % (x.clip(1, None) + 1), I),
    "float ** 2": (lambda x: x**2, X),
    "x.softmax(1)": (lambda x: x.softmax(1), X),
    "x.softmax(dim=-1)": (lambda x: x.softmax(dim=-1), X),
    "x.log_softmax(0)": (lambda x: x.log_softmax(0), X),
    "x.logsumexp(2)": (lambda x: x.logsumexp(2), X),
    "x.logsumexp(1, keepdim=True)": (lambda x: x.logsumexp(1, keepdim=True), X),
}


@needs_torch
@pytest.mark.parametrize("row", sorted(METHOD_ROWS))
def test_method_follows_pytorch(row):
    import torch

    fn, x = METHOD_ROWS[row]
    expected = to_numpy(fn(torch.from_numpy(x.copy())))
    assert_same(to_numpy(run(fn, x)), expected)


def test_max_over_a_dim_is_values_and_indices():
    result = run(lambda x: x.max(dim=1), X)
    assert result._fields == ("values", "indices")
    np.testing.assert_array_equal(result.values, X.max(1))
    np.testing.assert_array_equal(result.indices, X.argmax(1))
    assert result.indices.dtype == np.int64


def test_integer_arithmetic_stays_integer_as_numpy():
    for fn in (lambda x: x**2, lambda x: x // 3, lambda x: x % 3, lambda x: -7 // x):
        expected = fn(np.where(I == 0, 1, I))
        result = run(fn, np.where(I == 0, 1, I))
        assert result.dtype == expected.dtype == np.int32
        np.testing.assert_array_equal(result, expected)
    # NumPy's division by zero: 0 for both
    np.testing.assert_array_equal(run(lambda x: 5 // x, I)[1, 2], 0)
    np.testing.assert_array_equal(run(lambda x: 5 % x, I)[1, 2], 0)


# ---------------------------------------------------------------------------------------
# functions: NumPy's meaning (ts.<f> and np.<f> on a traced Tensor)
# ---------------------------------------------------------------------------------------

FUNCTION_ROWS = {
    "transpose(x)": (lambda m: m.transpose, lambda m, x: m.transpose(x), X),
    "transpose(x, axes)": (lambda m: m.transpose, lambda m, x: m.transpose(x, (1, 2, 0)), X),
    "transpose(matrix)": (lambda m: m.transpose, lambda m, x: m.transpose(x), M),
    "var(x, 1)": (lambda m: m.var, lambda m, x: m.var(x, 1), X),
    "var(x)": (lambda m: m.var, lambda m, x: m.var(x), X),
    "var(x, axis=0, ddof=1)": (lambda m: m.var, lambda m, x: m.var(x, axis=0, ddof=1), X),
    "std(x, (0, 2), keepdims)": (
        lambda m: m.std,
        lambda m, x: m.std(x, (0, 2), keepdims=True),
        X,
    ),
    "max(x, 1)": (lambda m: m.max, lambda m, x: m.max(x, 1), X),
    "max(x, axis=(0, 1))": (lambda m: m.max, lambda m, x: m.max(x, axis=(0, 1)), X),
    "min(x, -1, keepdims)": (lambda m: m.min, lambda m, x: m.min(x, -1, keepdims=True), X),
    "repeat(x, 2, axis=1)": (lambda m: m.repeat, lambda m, x: m.repeat(x, 2, axis=1), X),
    "repeat(x, 2)": (lambda m: m.repeat, lambda m, x: m.repeat(x, 2), M),
    "tile(x, (2, 1))": (lambda m: m.tile, lambda m, x: m.tile(x, (2, 1)), X),
    "tile(x, (2, 1, 1, 2))": (lambda m: m.tile, lambda m, x: m.tile(x, (2, 1, 1, 2)), X),
    "swapaxes(x, 0, 2)": (lambda m: m.swapaxes, lambda m, x: m.swapaxes(x, 0, 2), X),
    "power(int, 3)": (None, lambda m, x: np.power(x, 3), I),
    "floor_divide(int, 3)": (None, lambda m, x: np.floor_divide(x, 3), I),
    "remainder(int, -3)": (None, lambda m, x: np.remainder(x, -3), I),
}


@pytest.mark.parametrize("row", sorted(FUNCTION_ROWS))
def test_function_follows_numpy(row):
    _, fn, x = FUNCTION_ROWS[row]
    expected = fn(np, x)
    assert_same(run(lambda t: fn(np, t), x), expected)  # np.<f> on a traced Tensor
    if FUNCTION_ROWS[row][0] is not None:
        assert_same(run(lambda t: fn(ts, t), x), expected)  # ts.<f>


# ---------------------------------------------------------------------------------------
# ambiguous or unsupported spellings: a clear error, never a silent pick
# ---------------------------------------------------------------------------------------

REFUSED = {
    "x.transpose() (NumPy's reversal)": (lambda x: x.transpose(), "swaps two dims"),
    "x.transpose(1, 0, 2) (NumPy's axes)": (lambda x: x.transpose(1, 0, 2), "x.permute"),
    "x.transpose((1, 0, 2))": (lambda x: x.transpose((1, 0, 2)), "tessc.transpose"),
    "x.max(axis=1)": (lambda x: x.max(axis=1), "x.amax(dim)"),
    "x.min(keepdims=True)": (lambda x: x.min(1, keepdims=True), "ambiguous"),
    "x.max((0, 1))": (lambda x: x.max((0, 1)), "amax"),
    "x.var(axis=1)": (lambda x: x.var(axis=1), "ddof=0"),
    "x.std(axis=1)": (lambda x: x.std(axis=1), "correction=1"),
    "x.var(1, ddof=0, correction=1)": (lambda x: x.var(1, ddof=0, correction=1), "not both"),
    "ts.max(x, dim=1)": (lambda x: ts.max(x, dim=1), "tessc.max(x, axis)"),
    "ts.var(x, dim=1)": (lambda x: ts.var(x, dim=1), "ddof=0"),
    "ts.transpose(x, 0)": (lambda x: ts.transpose(x, 0), "swapaxes"),
    "x.flatten('F')": (lambda x: x.flatten("F"), "start_dim"),
    "x.repeat(2)": (lambda x: x.repeat(2), "at least one per dim"),
    "x.mT on a vector": (lambda x: x[0, 0].mT, "rank 2 or more"),
    "int ** -1": (lambda x: x.astype(np.int32) ** -1, "negative integer powers"),
}


@pytest.mark.parametrize("row", sorted(REFUSED))
def test_ambiguous_call_raises(row):
    fn, message = REFUSED[row]
    with pytest.raises(ts.TessError, match=None) as error:
        run(fn, X)
    assert message in str(error.value)


def test_explicit_spellings_are_accepted():
    result = run(lambda x: (x.var(axis=1, ddof=0), ts.var(x, dim=1, correction=1)), X)
    np.testing.assert_allclose(result[0], X.var(1), rtol=1e-5)
    np.testing.assert_allclose(result[1], X.var(1, ddof=1), rtol=1e-5)


def test_T_warns_off_rank_2_as_pytorch():
    with pytest.warns(UserWarning, match="x.mT"):
        result = run(lambda x: x.T, X)
    np.testing.assert_array_equal(result, X.T)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(lambda x: x.T, M)


def test_nn_softmax_still_takes_the_row_max():
    logits = RNG.standard_normal((4, 5)).astype(np.float32)
    result = run(lambda z: ts.nn.softmax(z, dim=1), logits)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(result, expected / expected.sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
@pytest.mark.parametrize("row", sorted(r for r in FUNCTION_ROWS if FUNCTION_ROWS[r][0]))
def test_function_follows_jax_numpy(row):
    import jax.numpy as jnp

    _, fn, x = FUNCTION_ROWS[row]
    assert_same(run(lambda t: fn(ts, t), x), np.asarray(fn(jnp, x)))
