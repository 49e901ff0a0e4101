"""`tessc.random` on the cuda target (Numba's simulator): the same key gives bit-identical
draws and dropout as the reference interpreter (the Threefry words wrap as uint32 there;
normal agrees to the last ulp of log/cos)."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts
from tessc import random as tr


def draws(x: ts.Tensor, key: ts.Tensor) -> tuple[ts.Tensor, ...]:
    return (
        tr.uniform(key, (3, 5)),
        tr.normal(key, (7,), np.float64),
        tr.randint(key, (4,), 0, 100),
        ts.nn.dropout(x, 0.5, key) * x,
        tr.bernoulli(key, 0.25, (5,)),
        tr.split(key, 2),
    )


# The simulator runs the kernels on NumPy int32 scalars, whose wrapping adds warn; the
# device's int32 arithmetic wraps silently. The bits are checked below.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_same_bits_as_the_reference() -> None:
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    key = tr.key(2024)
    want = ts.jit(draws, target="reference")(x, key)
    got = ts.jit(draws, target="cuda")(x, key)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        if index == 1:  # normal: log and cos of the same bits, the last ulp the library's
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-14)
        else:
            np.testing.assert_array_equal(np.asarray(g), w)
