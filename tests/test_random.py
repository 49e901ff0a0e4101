"""`tessc.random` and `tessc.nn.dropout`: the Threefry generator against JAX's test vector,
the same bits on every CPU target and the reference, statistics of each distribution (moments
and a Kolmogorov-Smirnov test), keys as jit arguments without retracing, dropout fused with
no mask buffer and its gradient."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tessc as ts
from tessc import random as tr
from tessc.dialects.builder_types import TessError

N = 100_000


def ks_statistic(samples: np.ndarray, cdf: np.ndarray) -> float:
    """sup |F_n - F| for sorted-sample CDF values `cdf` of `samples`."""
    n = samples.size
    upper = np.arange(1, n + 1) / n - cdf
    lower = cdf - np.arange(n) / n
    return float(max(upper.max(), lower.max()))


KS_LIMIT = 1.95 / math.sqrt(N)  # the 0.1% critical value of the KS distribution


@pytest.mark.parametrize("words", [tr.NumpyWords, tr.IntWords])
def test_threefry_matches_the_known_answer_vector(words: type) -> None:
    inputs = (0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3)
    if words is tr.NumpyWords:
        inputs = tuple(np.uint32(w) for w in inputs)
    assert [int(w) for w in tr.threefry2x32(words(), *inputs)] == [0xC4923A9C, 0x483DF7A0]


def test_eager_fold_in_is_the_traced_one() -> None:
    """The eager `fold_in` (Python-int words) gives the traced one's key, data past 31 bits
    and negative data wrapping the same way."""
    key = tr.key(2**40 + 9)
    for data in (0, 5, 2**31 + 3, -1):
        traced = ts.jit(lambda k, d=data: tr.fold_in(k, d))(key)
        np.testing.assert_array_equal(tr.fold_in(key, data), traced)


def test_keys_split_and_fold_in_eagerly() -> None:
    key = tr.key(42)
    assert key.dtype == np.int32 and key.shape == (2,)
    assert list(key.view(np.uint32)) == [0, 42]
    keys = tr.split(key, 3)
    assert keys.shape == (3, 2) and keys.dtype == np.int32
    assert len({tuple(k) for k in keys}) == 3
    np.testing.assert_array_equal(tr.split(key, 3), keys)
    assert tuple(tr.fold_in(key, 1)) != tuple(tr.fold_in(key, 2))


def draws(key: ts.Tensor) -> tuple[ts.Tensor, ...]:
    return (
        tr.uniform(key, (N,)),
        tr.normal(key, (N,)),
        tr.bernoulli(key, 0.3, (N,)),
        tr.randint(key, (N,), -3, 7),
        tr.uniform(key, (N,), np.float64, minval=2.0, maxval=5.0),
    )


@pytest.fixture(scope="module")
def samples() -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(a) for a in ts.jit(draws, target="cpu")(tr.key(7)))


def test_uniform_moments_and_ks(samples: tuple[np.ndarray, ...]) -> None:
    u = samples[0]
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    ordered = np.sort(u.astype(np.float64))
    assert ks_statistic(ordered, ordered) < KS_LIMIT
    wide = samples[4]
    assert wide.dtype == np.float64 and wide.min() >= 2.0 and wide.max() < 5.0
    ordered = np.sort(wide)
    assert ks_statistic(ordered, (ordered - 2.0) / 3.0) < KS_LIMIT


def test_normal_moments_and_ks(samples: tuple[np.ndarray, ...]) -> None:
    z = samples[1].astype(np.float64)
    assert abs(z.mean()) < 0.015 and abs(z.var() - 1.0) < 0.02
    ordered = np.sort(z)
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(ordered / math.sqrt(2.0)))
    assert ks_statistic(ordered, cdf) < KS_LIMIT


def test_bernoulli_frequency(samples: tuple[np.ndarray, ...]) -> None:
    b = samples[2]
    assert b.dtype == np.bool_
    assert abs(b.mean() - 0.3) < 0.005  # 3.5 standard deviations


def test_randint_range_and_uniformity(samples: tuple[np.ndarray, ...]) -> None:
    r = samples[3]
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3, minlength=10)
    expected = N / 10
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 27.9  # the 0.1% critical value with 9 degrees of freedom


def test_split_keys_give_independent_streams() -> None:
    def two_streams(key: ts.Tensor) -> tuple[ts.Tensor, ts.Tensor]:
        keys = tr.split(key)
        return tr.uniform(keys[0], (N,)), tr.uniform(keys[1], (N,))

    a, b = ts.jit(two_streams, target="cpu")(tr.key(3))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.015
    # the traced split is the eager one
    eager = tr.split(tr.key(3))
    one = ts.jit(lambda k: tr.uniform(k, (N,)), target="cpu")(eager[1])
    np.testing.assert_array_equal(one, b)


def small_draws(key: ts.Tensor) -> tuple[ts.Tensor, ...]:
    k1 = tr.fold_in(key, 5)
    return (
        tr.uniform(key, (3, 5)),
        tr.normal(k1, (7,), np.float64),
        tr.randint(key, (4,), 0, 100),
        tr.split(key, 3),
        tr.permutation(key, 9),
    )


def test_same_bits_on_reference_and_every_cpu_target() -> None:
    key = tr.key(123)
    expected = ts.jit(small_draws, target="reference")(key)
    np.testing.assert_array_equal(expected[3], tr.split(key, 3))
    np.testing.assert_array_equal(expected[4], tr.permutation(key, 9))
    got = ts.jit(small_draws, target="cpu")(key)
    for index, (value, want) in enumerate(zip(got, expected, strict=True)):
        if index == 1:  # normal: log and cos of the same bits, the last ulp the library's
            np.testing.assert_allclose(value, want, rtol=1e-14)
        else:
            np.testing.assert_array_equal(value, want)
    # unfused, each of the ops of a draw is a kernel of its own: one draw's bits
    unfused = ts.jit(lambda k: tr.uniform(k, (3, 5)), target="cpu-unfused")
    np.testing.assert_array_equal(unfused(key), expected[0])


def test_a_new_key_reuses_the_compiled_program() -> None:
    traces = []

    def step(x: ts.Tensor, key: ts.Tensor) -> ts.Tensor:
        traces.append(1)
        return ts.nn.dropout(x, 0.5, key)

    jitted = ts.jit(step, target="cpu")
    x = np.ones((64,), np.float32)
    first, second = jitted(x, tr.key(1)), jitted(x, tr.key(2))
    assert len(traces) == 1
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(jitted(x, tr.key(1)), first)


def kernel_count(ir: str) -> int:
    return len(re.findall(r"func\.func [^\n]*tess\.kernel", ir))


def dropout_times(x: ts.Tensor, y: ts.Tensor, key: ts.Tensor) -> ts.Tensor:
    return ts.nn.dropout(x, 0.25, key) * y


def test_dropout_is_one_kernel_with_no_mask_buffer() -> None:
    x = np.random.default_rng(0).standard_normal((32, 48)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((32, 48)).astype(np.float32)
    jitted = ts.jit(dropout_times, target="cpu")
    ir = jitted.ir(x, y, tr.key(9), stage="loops")
    assert kernel_count(ir) == 1
    assert "memref.alloc" not in ir and "i1>" not in ir  # no mask, in memory or a buffer
    got = jitted(x, y, tr.key(9))
    kept = got != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_allclose(got[kept], (x * y / 0.75)[kept], rtol=1e-6)
    reference = ts.jit(dropout_times, target="reference")(x, y, tr.key(9))
    np.testing.assert_array_equal(got, reference)


def test_dropout_rate_zero_is_the_identity() -> None:
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(
        ts.jit(lambda x, k: ts.nn.dropout(x, 0.0, k), target="cpu")(x, tr.key(0)), x
    )


def test_dropout_gradient_matches_central_differences() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 6))
    w = rng.standard_normal((5, 6))
    key = tr.key(11)

    def loss(x: ts.Tensor, w: ts.Tensor, key: ts.Tensor) -> ts.Tensor:
        return (ts.nn.dropout(x, 0.4, key) * w).sum()

    jitted = ts.jit(ts.grad(loss), target="cpu")
    ir = jitted.ir(x, w, key, stage="loops")
    assert kernel_count(ir) == 1 and "i1>" not in ir  # the mask recomputed, never stored
    grad = jitted(x, w, key)
    value = ts.jit(loss, target="reference")
    eps = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (float(value(up, w, key)) - float(value(down, w, key))) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    assert 0 < np.count_nonzero(grad) < grad.size  # some dropped, some kept


@pytest.mark.parametrize("bad", [np.zeros(3, np.int32), np.zeros(2, np.float32)])
def test_a_bad_key_is_named(bad: np.ndarray) -> None:
    with pytest.raises(TessError, match=r"key: expected a random key"):
        tr.split(bad)
    with pytest.raises(TessError, match=r"key: expected a random key.*of shape \(3,\)|float32"):
        ts.jit(lambda k: tr.uniform(k, (4,)), target="reference")(bad)


def test_word_ops_wrap_as_uint32_on_every_target() -> None:
    """Adds overflow, shifts of negative i32 bring in zeros: the bits of uint32 math."""
    values = np.array([0, 1, -1, 2**31 - 1, -(2**31), 0x13198A2E, -0x7C5CF8D3], np.int32)

    def word_ops(x: ts.Tensor) -> tuple[ts.Tensor, ...]:
        trace = x.trace
        ops, own = tr.TracedWords(trace.builder), trace.own(x)
        results = (ops.add(own, own), ops.rotl(own, 7), ops.xor(own, ops.const(0x9E3779B9)))
        return tuple(ts.Tensor(v, trace) for v in results)

    words = values.view(np.uint32)
    numpy_ops = tr.NumpyWords()
    expected = [
        numpy_ops.add(words, words),
        numpy_ops.rotl(words, 7),
        numpy_ops.xor(words, numpy_ops.const(0x9E3779B9)),
    ]
    for target in ("reference", "cpu"):
        for got, want in zip(ts.jit(word_ops, target=target)(values), expected, strict=True):
            np.testing.assert_array_equal(np.asarray(got).view(np.uint32), want)


def test_permutation_is_a_uniform_permutation() -> None:
    assert sorted(tr.permutation(tr.key(1), 50)) == list(range(50))
    counts: dict[tuple[int, ...], int] = {}
    trials = 3000
    for i in range(trials):
        order = tuple(int(v) for v in tr.permutation(tr.fold_in(tr.key(0), i), 3))
        counts[order] = counts.get(order, 0) + 1
    assert len(counts) == 6
    expected = trials / 6
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 20.5  # the 0.1% critical value with 5 degrees of freedom
