"""Issue 22's vmap, debug.print, boolean masks and CUDA array intake on the cuda target
(simulator), against the reference interpreter or NumPy at small shapes."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tessc as ts
from tessc.runtime.cuda import is_device_array

RNG = np.random.default_rng(7)


def test_vmap_per_example_gradients_match_the_reference() -> None:
    def loss(w, x, y):  # noqa: ANN001, ANN202
        return (((x @ w).tanh() - y) ** 2).sum()

    w, xs, ys = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3)), RNG.normal(size=(4, 2))
    per_example = ts.vmap(ts.grad(loss), in_axes=(None, 0, 0))
    got = ts.jit(per_example, target="cuda")(w, xs, ys)
    want = ts.jit(per_example, target="reference")(w, xs, ys)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_debug_print_on_the_cuda_target(capsys: pytest.CaptureFixture) -> None:
    def f(x):  # noqa: ANN001, ANN202
        ts.debug.print("s={}", x.sum())
        return x * 2.0

    step = ts.jit(f, target="cuda")
    step(np.arange(3.0))
    out = step(cuda.to_device(np.arange(3.0)))  # device arrays in: copied only to print
    assert is_device_array(out)
    assert capsys.readouterr().out.splitlines() == ["s=3.0", "s=3.0"]


def test_boolean_masks_on_the_cuda_target() -> None:
    x = RNG.normal(size=(3, 4))
    mask = x[:, 0] > 0

    def f(x):  # noqa: ANN001, ANN202
        return x[mask], x.at[x > 0].set(0.0), ts.where(x < 0, x, 1.0)

    got = ts.jit(f, target="cuda")(x)
    cleared = x.copy()
    cleared[x > 0] = 0.0
    for g, w in zip(got, (x[mask], cleared, np.where(x < 0, x, 1.0)), strict=True):
        np.testing.assert_array_equal(g, w)


def test_unsupported_device_arrays_name_the_argument() -> None:
    step = ts.jit(lambda x: x * 2.0, target="cuda")
    with pytest.raises(TypeError, match="argument `x` has dtype int8"):
        step(cuda.to_device(np.ones(3, np.int8)))

    class DLPackOnly:  # a CUDA array that only speaks DLPack
        def __dlpack__(self, **_: object) -> None:
            raise AssertionError("not read")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)  # kDLCUDA

    with pytest.raises(TypeError, match="argument `x` .* no `__cuda_array_interface__`"):
        step(DLPackOnly())

    class Refusing:  # as a PyTorch CUDA tensor that requires grad
        @property
        def __cuda_array_interface__(self) -> dict:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)

    with pytest.raises(TypeError, match="argument `x` .*requires grad"):
        step(Refusing())
