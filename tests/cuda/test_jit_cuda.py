"""`ts.jit(f, target="cuda")` in Numba's CUDA simulator, every case against the reference
interpreter (`target="reference"`): sizes that are not multiples of a block (1, 31, 33,
1001), broadcasts, reductions over 1, 32, 33, 64 and 513 elements along every dim and the
whole tensor, matmuls (f32 and f64, batched, with an epilogue), an MLP's gradients; device
arrays in -> device arrays out; donation; `tessc-run --pipeline cuda`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numba import cuda

import tessc as ts
from tessc.cli.run import main as tessc_run
from tessc.runtime.cuda import is_device_array


def check(fn: Callable[..., Any], *arrays: np.ndarray, rtol: float | None = None) -> Any:
    """`fn` on the cuda target vs the reference interpreter; returns the cuda result."""
    expected = ts.jit(fn, target="reference")(*arrays)
    got = ts.jit(fn, target="cuda")(*arrays)
    dtype = np.result_type(*arrays)
    tolerance = rtol if rtol is not None else (2e-5 if dtype == np.float32 else 1e-12)
    for g, e in zip(_leaves(got), _leaves(expected), strict=True):
        assert type(g) is np.ndarray and g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance)
    return got


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


def rand(*shape: int, dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


# -- elementwise and broadcasts ------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 31, 33, 1001])
def test_elementwise_chain_sizes_off_the_block(n: int) -> None:
    check(lambda x, y: (x * y + 1.0).exp() - y.tanh(), rand(n), rand(n, seed=1))


def test_broadcast_operands() -> None:
    check(lambda x, b, c: (x + b).relu() * c, rand(5, 33), rand(33, seed=1), rand(5, 1, seed=2))


def test_float64_and_scalars() -> None:
    check(lambda x: (x * 0.5 - 2.0).sigmoid(), rand(3, 31, dtype=np.float64))


# -- reductions ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 32, 33, 64, 513])
def test_sum_and_max_over_rows(n: int) -> None:
    check(lambda x: (x.sum(dim=1), x.amax(dim=1)), rand(3, n), rtol=1e-4)


@pytest.mark.parametrize("n", [1, 33, 513])
def test_column_sums_and_mean(n: int) -> None:
    check(lambda x: (x.sum(dim=0), x.mean(dim=0)), rand(n, 5), rtol=1e-4)


@pytest.mark.parametrize("n", [1, 32, 513])
def test_whole_tensor_reduction(n: int) -> None:
    check(lambda x: ((x * x).sum(), x.max(), x.mean()), rand(n), rtol=1e-4)


def test_the_seed_zip_reduce() -> None:
    check(lambda a, b: (a * b).sum(dim=1), rand(3, 5, 4), rand(3, 5, 4, seed=1))


# -- contractions --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul(dtype: type) -> None:
    check(
        lambda a, b: a @ b, rand(45, 33, dtype=dtype), rand(33, 40, dtype=dtype, seed=1), rtol=1e-4
    )


def test_batched_matmul() -> None:
    check(lambda a, b: a @ b, rand(2, 45, 33), rand(2, 33, 40, seed=1), rtol=1e-4)


def test_tall_skinny_matmul_splits_k() -> None:
    # K = 256 over one output tile: 4 slices of k tiles, summed with the bias and relu by a
    # second launch (tess-gpu-contract's split-K), and a transposed operand's the same.
    check(
        lambda a, b, c: (a @ b + c).relu(),
        rand(20, 256),
        rand(256, 30, seed=1),
        rand(30, seed=2),
        rtol=1e-4,
    )
    check(lambda a, b: a.T @ b, rand(256, 20), rand(256, 30, seed=1), rtol=1e-4)


def test_matmul_with_bias_and_activation() -> None:
    check(
        lambda x, w, b: (x @ w + b).relu(),
        rand(9, 33),
        rand(33, 17, seed=1),
        rand(17, seed=2),
        rtol=1e-4,
    )


def test_mlp_gradients_in_float64() -> None:
    def loss(params: dict, x: np.ndarray) -> Any:
        h = (x @ params["w1"] + params["b1"]).tanh()
        return ((h @ params["w2"]) ** 2).mean()

    params = {"w1": rand(5, 7, dtype=np.float64), "b1": rand(7, dtype=np.float64, seed=1),
              "w2": rand(7, 3, dtype=np.float64, seed=2)}  # fmt: skip
    x = rand(8, 5, dtype=np.float64, seed=3)
    expected = ts.jit(ts.value_and_grad(loss), target="reference")(params, x)
    got = ts.jit(ts.value_and_grad(loss), target="cuda")(params, x)
    for g, e in zip(_leaves(got), _leaves(expected), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    grads = ts.grad(loss, target="cuda")(params, x)
    np.testing.assert_allclose(grads["w1"], expected[1]["w1"], rtol=1e-10, atol=1e-12)


# -- device arrays, donation, the CLI ------------------------------------------------------


def test_device_arrays_in_device_arrays_out() -> None:
    x, y = rand(33), rand(33, seed=1)
    step = ts.jit(lambda x, y: (x * y, x + 1.0), target="cuda")
    on_device = step(cuda.to_device(x), y)
    assert all(is_device_array(out) for out in on_device)
    np.testing.assert_allclose(on_device[0].copy_to_host(), x * y, rtol=1e-6)
    chained = step(on_device[0], on_device[1])  # outputs feed the next call, no host copy
    np.testing.assert_allclose(chained[1].copy_to_host(), x * y + 1.0, rtol=1e-6)


def test_donated_device_parameters_are_updated_in_place() -> None:
    @ts.jit(target="cuda", donate_argnums=0)
    def sgd(w: np.ndarray, g: np.ndarray) -> Any:
        return w - 0.1 * g

    w, g = rand(31, dtype=np.float64), rand(31, dtype=np.float64, seed=1)
    w_device = cuda.to_device(w)
    out = sgd(w_device, cuda.to_device(g))
    np.testing.assert_allclose(out.copy_to_host(), w - 0.1 * g)
    assert out is w_device  # the donated buffer itself, updated on the device


def test_tessc_run_cuda_pipeline(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "p.tess"
    program.write_text("def f(x: f32[3, 33]) -> f32[3]:\n    return sum(exp(x), dim=1)\n")
    assert tessc_run([str(program), "--pipeline", "cuda"]) == 0
    cuda_out = capsys.readouterr().out
    assert tessc_run([str(program), "--pipeline", "reference"]) == 0
    assert cuda_out == capsys.readouterr().out
    assert cuda_out.startswith("output 0 (3) float32")


def test_fused_optimizer_update_over_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tess-fuse-horizontal` packs donated parameters into one arena (one launch): host
    arrays in -> NumPy out; device arrays in -> views of a device arena out, which, fed back
    as the next call's parameters, are passed without a copy and updated in place."""

    def step(params: dict, grads: dict, lr: np.ndarray) -> dict:
        return {k: params[k] - lr * grads[k] for k in params}

    rng = np.random.default_rng(0)
    params = {"a": rng.random((3, 5)), "b": rng.random(7)}
    grads = {"a": rng.random((3, 5)), "b": rng.random(7)}
    lr = np.array(0.1)  # a 0-d input
    update = ts.jit(step, target="cuda", donate_argnums=0)
    assert '"arenas"' in update.ir(params, grads, lr, stage="numba")
    expected = {k: params[k] - 0.1 * grads[k] for k in params}
    out = update(params, grads, lr)
    for k in params:
        assert type(out[k]) is np.ndarray
        np.testing.assert_allclose(out[k], expected[k])

    device_grads = {k: cuda.to_device(v) for k, v in grads.items()}
    first = update({k: cuda.to_device(v) for k, v in params.items()}, device_grads, lr)
    for k in params:
        assert is_device_array(first[k])
        np.testing.assert_allclose(first[k].copy_to_host(), expected[k])
    copies: list[object] = []
    device_array = cuda.device_array
    monkeypatch.setattr(
        cuda, "device_array", lambda *a, **kw: copies.append(a) or device_array(*a, **kw)
    )
    second = update(first, device_grads, lr)
    for k in params:
        assert second[k] is first[k]  # the same views, updated in place
        np.testing.assert_allclose(first[k].copy_to_host(), expected[k] - 0.1 * grads[k])
    # The parameters' arena is passed as it is; the gradients' is packed into the pooled
    # arena of the first call: no allocation.
    assert copies == []


def test_device_arrays_take_the_steady_state_fast_path() -> None:
    scale = ts.jit(lambda x, y: x * y, target="cuda")
    x, y = cuda.to_device(rand(31)), cuda.to_device(rand(31, seed=1))
    scale(x, y)
    fast = scale._fast
    assert fast is not None and fast.leaves((x, y)) == [x, y]
    assert fast.leaves((x, cuda.to_device(rand(30)))) is None  # another shape: full path
    np.testing.assert_allclose(scale(x, y).copy_to_host(), rand(31) * rand(31, seed=1))


def test_device_array_to_a_cpu_target_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="argument `x` .* is an array on a GPU.* target .cpu."):
        ts.jit(lambda x: x + 1.0)(cuda.to_device(rand(5)))


class ForeignArray:
    """A stand-in for a CuPy array or PyTorch CUDA tensor: `__cuda_array_interface__` only
    (no `.dtype` NumPy understands: the interface's typestr gives it)."""

    def __init__(self, array: np.ndarray):
        self.array, self.dtype = array, "not a numpy dtype"

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.array.shape, "typestr": self.array.dtype.str, "version": 3}


def test_jit_takes_cuda_array_interface_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    # The simulator has no `cuda.as_cuda_array`: the test's stand-in records its use.
    wrapped: list[ForeignArray] = []

    def as_cuda_array(obj: ForeignArray) -> Any:
        wrapped.append(obj)
        return cuda.to_device(obj.array)

    monkeypatch.setattr(cuda, "as_cuda_array", as_cuda_array, raising=False)
    x = rand(33)
    out = ts.jit(lambda x: x * 2.0, target="cuda")(ForeignArray(x))
    assert len(wrapped) == 1 and is_device_array(out)
    np.testing.assert_allclose(out.copy_to_host(), x * 2.0)


def test_train_mlp_example_step_on_the_cuda_target() -> None:
    """examples/train_mlp.py --target cuda: parameters and a batch on the device, one
    training step, the same loss and parameters as the example's NumPy step."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent.parent / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rng = np.random.default_rng(0)
    params = example.init_params(8)  # a hidden layer of 8
    x_all = rng.random((40, 64)).astype(np.float32)
    y_all = rng.integers(0, 10, 40).astype(np.int64)
    idx = rng.permutation(40)[:16].astype(np.int64)  # the minibatch, gathered on the device
    optimizer = ts.optim.SGD(lr=0.1, momentum=0.9)
    step = example.make_train_step(optimizer, "cuda")
    device_params = example.on_target(params, "cuda")
    state = example.on_target(optimizer.init(params), "cuda")
    new_params, _, loss = step(
        device_params, state, *example.on_target((x_all, y_all, idx), "cuda")
    )
    assert all(is_device_array(v) for v in new_params.values())
    want_loss, grads = example.numpy_train_step(params, x_all, y_all, idx)
    want_params = example.NumpyOptimizer(optimizer, params).step(params, grads)
    np.testing.assert_allclose(float(example.on_host(loss)), want_loss, rtol=1e-5)
    for k, v in example.on_host(new_params).items():
        np.testing.assert_allclose(v, want_params[k], rtol=1e-4, atol=1e-6)
