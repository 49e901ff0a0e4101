"""`tessc.optim` on device arrays: the standalone step compiles for the cuda target and
keeps parameters and state on the device; the numbers are the cpu step's."""

from __future__ import annotations

import numpy as np
from numba import cuda

import tessc as ts
from tessc.runtime.cuda import is_device_array

Arrays = dict[str, np.ndarray]


def reference_steps(optimizer: ts.optim.Optimizer, params: Arrays, grads: list[Arrays]) -> Arrays:
    """`params` after one optimizer step per gradient, on the reference target."""
    expected, state = dict(params), optimizer.init(params)
    step = ts.jit(lambda p, g, s: optimizer.step(p, g, s), target="reference")
    for g in grads:
        expected, state = step(expected, g, state)
    return expected


def device_steps(
    optimizer: ts.optim.Optimizer, device: dict, state: dict, grads: list[Arrays]
) -> dict:
    """The same steps from `device` parameters and `state`, gradients copied to the device."""
    for g in grads:
        device, state = optimizer.step(device, {k: cuda.to_device(v) for k, v in g.items()}, state)
    return device


def test_standalone_adam_step_on_device_arrays() -> None:
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 5)), "b": rng.standard_normal(7)}
    grads = [{k: rng.standard_normal(v.shape) for k, v in params.items()} for _ in range(3)]
    optimizer = ts.optim.Adam(lr=0.01, weight_decay=0.1)
    expected = reference_steps(optimizer, params, grads)

    device = {k: cuda.to_device(v) for k, v in params.items()}
    device_state = optimizer.init(device)
    assert all(is_device_array(a) for a in device_state["exp_avg"].values())
    device = device_steps(optimizer, device, device_state, grads)
    assert sorted(optimizer._compiled) == ["cuda"]
    for name, value in device.items():
        assert is_device_array(value)
        np.testing.assert_allclose(value.copy_to_host(), expected[name], rtol=1e-9)


def test_standalone_lamb_step_on_device_arrays() -> None:
    """The cuda pipeline keeps a reduction kernel per parameter norm (no segmented
    reductions there): the numbers are the reference's, a zero parameter's ratio is 1.
    Six steps: from the fourth on, the runtime hands back output arrays it was once given
    donated, which must not count as donated again (`donation.unmark_returned`)."""
    rng = np.random.default_rng(1)
    params = {"w": rng.standard_normal((3, 5)), "b": np.zeros(7), "s": rng.standard_normal(1)}
    grads = [{k: rng.standard_normal(v.shape) for k, v in params.items()} for _ in range(6)]
    optimizer = ts.optim.Lamb(lr=0.01, weight_decay=0.01)
    expected = reference_steps(optimizer, params, grads)

    device = {k: cuda.to_device(v) for k, v in params.items()}
    device = device_steps(optimizer, device, optimizer.init(device), grads)
    assert sorted(optimizer._compiled) == ["cuda"]
    for name, value in device.items():
        np.testing.assert_allclose(value.copy_to_host(), expected[name], rtol=1e-9)
