"""The cuda target's device memory per call, counted in the simulator: outputs and uploads
come from a pool that lives with the compiled program (`tessc.runtime.cuda_memory`), an
output the caller holds is never overwritten, strided device arrays are taken (inside a
program too), and an output arena given back is not repacked."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numba import cuda

import tessc as ts


@pytest.fixture
def allocations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The shape of every device allocation made while the test runs."""
    made: list[Any] = []
    device_array = cuda.device_array

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(args[0] if args else kwargs.get("shape"))
        return device_array(*args, **kwargs)

    monkeypatch.setattr(cuda, "device_array", counted)
    return made


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def test_no_allocation_per_call_after_the_first(allocations: list[Any]) -> None:
    x, y = rand(5, 33), rand(5, 33, seed=1)
    f = ts.jit(lambda x, y: ((x * y).sum(dim=0), x.exp()), target="cuda")
    for _ in range(3):
        out = f(x, y)  # host in, host out: uploads and outputs from the pool
        np.testing.assert_allclose(out[0], (x * y).sum(axis=0), rtol=1e-5)
        if _ == 0:
            first = len(allocations)
            assert first > 0
    assert len(allocations) == first  # calls 2 and 3 allocated nothing
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for call in range(5):
        # Device in, device out; `out` still holds the last result during each call, so
        # the outputs alternate between two sets of buffers, allocated by the first two.
        out = f(dx, dy)
        if call == 1:
            allocations.clear()
    np.testing.assert_allclose(out[1].copy_to_host(), np.exp(x), rtol=1e-6)
    assert allocations == []


def test_a_returned_array_is_not_reused_while_the_caller_holds_it(allocations: list[Any]) -> None:
    double = ts.jit(lambda x: x * 2.0, target="cuda")
    a_in, b_in = cuda.to_device(rand(40)), cuda.to_device(rand(40, seed=1))
    a = double(a_in)
    view = double(b_in)[3:9]  # only a view of the second result is kept
    allocations.clear()
    c = double(a_in)  # both earlier results are held: a new buffer
    assert len(allocations) == 1
    np.testing.assert_allclose(a.copy_to_host(), rand(40) * 2.0)
    np.testing.assert_allclose(view.copy_to_host(), rand(40, seed=1)[3:9] * 2.0)
    del a, view
    allocations.clear()
    d = double(b_in)  # the dropped ones are free again
    assert allocations == []
    np.testing.assert_allclose(c.copy_to_host(), rand(40) * 2.0)
    np.testing.assert_allclose(d.copy_to_host(), rand(40, seed=1) * 2.0)


def test_a_strided_device_array_is_taken() -> None:
    x = rand(6, 10)
    strided = cuda.to_device(x)[1:5, ::3]
    assert not strided.is_c_contiguous()
    out = ts.jit(lambda x: x + 1.0, target="cuda")(strided)
    np.testing.assert_allclose(out.copy_to_host(), x[1:5, ::3] + 1.0)


def test_a_strided_view_inside_a_program() -> None:
    """The gradient copies a slice of a padded buffer out (`memref.copy` of a subview)."""
    grad = ts.grad(
        lambda p: (ts.concatenate([ts.zeros((2, 1), p.dtype), p], dim=1) ** 2).sum(),
        target="cuda",
    )
    p = rand(2, 3)
    np.testing.assert_allclose(grad(p), 2.0 * p, rtol=1e-6)


def test_an_output_arena_given_back_is_not_repacked(
    monkeypatch: pytest.MonkeyPatch, allocations: list[Any]
) -> None:
    """Momentum SGD with the parameters donated and the velocities not: the velocities come
    back as views of an output arena; passed back, that arena is read as it is."""

    def step(params: dict, grads: dict, velocity: dict) -> tuple[dict, dict]:
        new_v = {k: 0.9 * velocity[k] + grads[k] for k in params}
        return {k: params[k] - 0.1 * new_v[k] for k in params}, new_v

    shapes = {"a": (3, 5), "b": (7,)}
    params = {k: cuda.to_device(rand(*s)) for k, s in shapes.items()}
    grads = {k: cuda.to_device(rand(*s, seed=1)) for k, s in shapes.items()}
    velocity = {k: cuda.to_device(np.zeros(s, np.float32)) for k, s in shapes.items()}
    update = ts.jit(step, target="cuda", donate_argnums=0)
    assert '"arenas"' in update.ir(params, grads, velocity, stage="numba")
    params, velocity = update(params, grads, velocity)
    copies: list[Any] = []
    array_type = type(params["a"])
    copy_to_device = array_type.copy_to_device
    monkeypatch.setattr(
        array_type,
        "copy_to_device",
        lambda s, *a, **kw: copies.append(s) or copy_to_device(s, *a, **kw),
    )
    for _ in range(2):
        allocations.clear()
        copies.clear()
        params, velocity = update(params, grads, velocity)
        # Only the gradients (separate arrays) are packed: one copy each, into the pool's
        # arena; the parameters' and the velocities' arenas pass as they are.
        assert len(copies) == len(shapes)
        assert allocations == [] or _ == 0
    v = {k: rand(*s, seed=1) for k, s in shapes.items()}
    for k in shapes:
        want = 0.9 * (0.9 * v[k] + v[k]) + v[k]
        np.testing.assert_allclose(velocity[k].copy_to_host(), want, rtol=1e-5)


def test_the_pool_stays_bounded_when_every_array_is_held() -> None:
    from tessc.runtime.cuda_memory import MAX_PER_SHAPE, DevicePool

    pool = DevicePool()
    held = [pool.take((4,), np.float32) for _ in range(MAX_PER_SHAPE + 3)]
    assert len({id(a) for a in held}) == len(held) and pool.allocations == len(held)
    assert len(pool.arrays[((4,), np.dtype(np.float32).str)]) == MAX_PER_SHAPE
    del held
    pool.take((4,), np.float32)
    assert pool.allocations == MAX_PER_SHAPE + 3  # a pooled one, free again
