"""Arrays in (CPU): PyTorch and JAX CPU arrays, and any `__dlpack__` or
`__array_interface__` exporter, are taken without a copy; outputs are NumPy arrays; a GPU
array or an unsupported dtype is an error naming the argument."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import tessc as ts
from tessc.frontend.trace_function import host_array
from tessc.runtime.cuda import is_device_array

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")

W = np.arange(12, dtype=np.float32).reshape(3, 4)


def affine(x, b):
    return x * 2.0 + b


class DLPackOnly:
    """An exporter with only the DLPack protocol (as an array library's own type)."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class InterfaceOnly:
    def __init__(self, array: np.ndarray):
        self.__array_interface__ = array.__array_interface__
        self._keep = array


def check_taken(x, expected_base: np.ndarray | None = None):
    jitted = ts.jit(affine)
    for _ in range(3):  # traced, then the planned call
        result = jitted(x, np.ones(4, np.float32))
        assert type(result) is np.ndarray
        np.testing.assert_array_equal(result, W * 2 + 1)
    if expected_base is not None:
        assert np.shares_memory(host_array(x, "x"), expected_base)  # no copy


def test_dlpack_only_and_array_interface_objects():
    check_taken(DLPackOnly(W), W)
    check_taken(InterfaceOnly(W), W)


@needs_torch
def test_torch_cpu_tensors():
    import torch

    t = torch.from_numpy(W.copy())
    assert not is_device_array(t)
    check_taken(t, t.numpy())
    check_taken(torch.from_numpy(W.T.copy()).T)  # strided: copied to row-major by jit
    result = ts.grad(lambda x: (x * x).sum())(t)
    np.testing.assert_allclose(result, 2 * W)


@needs_torch
def test_torch_tensor_errors_name_the_argument():
    import torch

    f = ts.jit(affine)
    with pytest.raises(TypeError, match=r"argument `x` \(torch.Tensor\).*x.detach\(\)"):
        f(torch.ones(3, 4, requires_grad=True), np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"argument `b` has dtype uint8 \(torch.Tensor\)"):
        f(W, torch.ones(4, dtype=torch.uint8))
    with pytest.raises(TypeError, match=r"argument `b` \(torch.Tensor\).*convert it"):
        f(W, torch.ones(4, dtype=torch.bfloat16))


@needs_jax
def test_jax_cpu_arrays():
    import jax.numpy as jnp

    x = jnp.asarray(W)
    assert not is_device_array(x)
    check_taken(x)


def test_a_gpu_array_given_to_a_cpu_function_names_the_argument():
    class FakeGPUArray:
        """What CuPy's arrays look like to tessc: a CUDA array interface."""

        __cuda_array_interface__ = {
            "shape": (3, 4),
            "typestr": "<f4",
            "data": (0, False),
            "version": 3,
        }

    with pytest.raises(TypeError, match=r"argument `x` \(.*FakeGPUArray\) is an array on a GPU"):
        ts.jit(affine)(FakeGPUArray(), np.ones(4, np.float32))


def test_numpy_integers_stay_static():
    f = ts.jit(lambda x, n: x.reshape(n, -1))
    assert f(W, np.int64(2)).shape == (2, 6)


def test_a_dlpack_array_on_another_device_names_the_argument():
    class OnGPU(DLPackOnly):
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    with pytest.raises(TypeError, match=r"argument `b` \(.*OnGPU\) is an array on device"):
        ts.jit(affine)(W, OnGPU(np.ones(4, np.float32)))
