"""runtime/output_cache: a large output the caller dropped is handed out again, and never one
the caller (or a view, a buffer export, a weak reference) still holds."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tessc as ts
from tessc.compiler import compile_module
from tessc.reference import parse_module
from tessc.runtime import output_cache

N = 1 << 18  # 1 MiB of f32: the smallest cached output

ONE = """
func.func @f(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = tess.add %x, %y : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  func.return %0 : tensor<{n}xf32>
}}
"""

TWO = """
func.func @g(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> (tensor<{n}xf32>, tensor<{n}xf32>) {{
  %0 = tess.add %x, %y : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  %1 = tess.mul %x, %y : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>
  func.return %0, %1 : tensor<{n}xf32>, tensor<{n}xf32>
}}
"""


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.delenv("TESSC_OUTPUT_CACHE_BYTES", raising=False)
    output_cache.clear()
    yield
    output_cache.clear()


@pytest.fixture(scope="module")
def add():
    return compile_module(parse_module(ONE.format(n=N)), "f", "cpu")


@pytest.fixture(scope="module")
def add_mul():
    return compile_module(parse_module(TWO.format(n=N)), "g", "cpu")


def inputs(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def test_a_dropped_output_is_handed_out_again(add) -> None:
    x, y = inputs()
    (first,) = add(x, y)
    address = first.ctypes.data
    del first
    (second,) = add(x, y)
    assert second.ctypes.data == address
    assert second.base is None and second.flags.writeable  # a donatable array, as np.empty's
    np.testing.assert_array_equal(second, x + y)


def test_an_output_still_held_is_never_handed_out(add) -> None:
    x, y = inputs()
    (held,) = add(x, y)
    kept = held.copy()
    (other,) = add(y, y)
    assert not np.shares_memory(held, other)
    np.testing.assert_array_equal(held, kept)


@pytest.mark.parametrize(
    "keep",
    [
        lambda a: a[10:],  # a view (its base is the output)
        lambda a: memoryview(a),  # a buffer export
        lambda a: a.reshape(2, -1),
        lambda a: np.asarray(a).view(np.int32),
        lambda a: [a],
    ],
    ids=["slice", "memoryview", "reshape", "view-dtype", "list"],
)
def test_nothing_that_still_refers_to_an_output_loses_it(add, keep) -> None:
    x, y = inputs()
    (result,) = add(x, y)
    expected = result.copy()
    holder = keep(result)
    del result
    for _ in range(3):  # more calls than the cache keeps per shape
        (fresh,) = add(y, y)
        assert not np.shares_memory(
            np.asarray(holder[0] if isinstance(holder, list) else holder), fresh
        )
    kept = holder[0] if isinstance(holder, list) else holder
    got = np.frombuffer(kept, np.float32)
    np.testing.assert_array_equal(got, expected[expected.size - got.size :])


def test_an_output_with_a_weak_reference_or_read_only_is_not_reused(add) -> None:
    x, y = inputs()
    (marked,) = add(x, y)
    address = marked.ctypes.data
    reference = weakref.ref(marked)  # as `donation.mark` remembers a donated array
    del marked
    (fresh,) = add(x, y)
    assert reference() is None or fresh is not reference()
    assert fresh.ctypes.data != address or reference() is None
    fresh.flags.writeable = False
    del fresh
    (again,) = add(x, y)  # not the read-only array (freed then: its address may come back)
    assert again.flags.writeable


def test_two_outputs_of_one_call_never_share_memory(add_mul) -> None:
    x, y = inputs()
    for _ in range(3):
        total, product = add_mul(x, y)
        assert not np.shares_memory(total, product)
        np.testing.assert_array_equal(total, x + y)
        np.testing.assert_array_equal(product, x * y)
        del total  # the other output keeps the buffer both are views of
        total2, product2 = add_mul(y, y)
        assert not np.shares_memory(product, total2) and not np.shares_memory(product, product2)
        np.testing.assert_array_equal(product, x * y)
        del product, total2, product2


def test_small_outputs_and_a_zero_limit_are_not_cached(add, monkeypatch) -> None:
    assert output_cache.empty((16,), np.dtype(np.float32)) is not output_cache.empty(
        (16,), np.dtype(np.float32)
    )
    assert output_cache.tracked_bytes() == 0
    monkeypatch.setenv("TESSC_OUTPUT_CACHE_BYTES", "0")
    x, y = inputs()
    add(x, y)
    assert output_cache.tracked_bytes() == 0


def test_the_limit_bounds_what_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("TESSC_OUTPUT_CACHE_BYTES", str(3 << 20))
    dtype = np.dtype(np.float32)
    held = [output_cache.empty((N,), dtype) for _ in range(5)]
    assert output_cache.tracked_bytes() == 3 << 20
    del held
    gc.collect()
    output_cache.empty((2 * N,), dtype)  # 2 MiB: frees kept 1 MiB arrays to fit
    assert output_cache.tracked_bytes() <= 3 << 20


def test_jit_keeps_no_result_alive(add) -> None:
    f = ts.jit(lambda x, y: x + y)
    x, y = inputs()
    first = f(x, y)
    address = first.ctypes.data
    del first
    second = f(x, y)  # the first result, dropped, is this one's buffer
    assert second.ctypes.data == address
    third = f(x, y)  # `second` is held: a new buffer
    assert not np.shares_memory(second, third)
    np.testing.assert_array_equal(second, third)


def test_a_donated_jit_output_runs_in_place_again(add) -> None:
    step = ts.jit(lambda p, g: p - 0.5 * g, donate_argnums=0)
    p, g = inputs()
    expected = p - np.float32(0.5) * g
    p = step(p, g)
    p2 = step(p, g)  # a cached output donated back: computed in place
    assert p2 is p
    np.testing.assert_allclose(p2, expected - np.float32(0.5) * g, rtol=1e-6)
