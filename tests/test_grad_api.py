"""`ts.grad` / `ts.value_and_grad`: the Python API over the `tess-autodiff` pass."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import tessc as ts
from tessc.dialects.builder_types import TessError
from tessc.frontend.grad import GradFunction, grad, value_and_grad

from helpers import central_difference

REF = "reference"
HAS_COMPILER = importlib.util.find_spec("tessc.compiler") is not None


def rng_arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=shape) for shape in shapes]


def numeric_gradient(f, args: list[np.ndarray], argnum: int, eps: float = 1e-6) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Central differences of the scalar f(*args) in args[argnum], float64."""
    return central_difference(
        lambda x: f(*args[:argnum], x, *args[argnum + 1 :]), args[argnum], eps
    )


def mlp_loss(w1, b1, w2, b2, x, labels):  # type: ignore[no-untyped-def]
    """Mean softmax cross-entropy of a 2-layer MLP (the frontend's Tensor API)."""
    hidden = (x @ w1 + b1).relu()
    logits = hidden @ w2 + b2
    shifted = logits - logits.amax(dim=1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    return -(labels * log_probs).sum(dim=1).mean()


def mlp_loss_numpy(w1, b1, w2, b2, x, labels):  # type: ignore[no-untyped-def]
    hidden = np.maximum(x @ w1 + b1, 0)
    logits = hidden @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -(labels * log_probs).sum(axis=1).mean()


def mlp_arguments(seed: int = 0) -> list[np.ndarray]:
    w1, b1, w2, b2, x = rng_arrays(seed, (4, 6), (6,), (6, 3), (3,), (5, 4))
    labels = np.eye(3)[np.random.default_rng(seed).integers(0, 3, 5)]
    return [w1, b1, w2, b2, x, labels]


# ---------------------------------------------------------------------------------------
# what grad returns
# ---------------------------------------------------------------------------------------


def test_namespace_exports_the_api() -> None:
    assert ts.grad is grad and ts.value_and_grad is value_and_grad


def test_grad_of_a_matmul_loss() -> None:
    def loss(w, x):  # type: ignore[no-untyped-def]
        return ((x @ w).relu() ** 2).sum()

    w, x = rng_arrays(0, (4, 3), (5, 4))
    gradient = grad(loss, target=REF)(w, x)
    np.testing.assert_allclose(gradient, x.T @ (2 * np.maximum(x @ w, 0)), rtol=1e-12)


@pytest.mark.parametrize("argnums", [0, 3, -2, (0, 2), (4, 1, 0)])
def test_mlp_gradients_match_central_differences(argnums: int | tuple[int, ...]) -> None:
    args = mlp_arguments()
    result = grad(mlp_loss, argnums, target=REF)(*args)
    wanted = (argnums,) if isinstance(argnums, int) else argnums
    gradients = (result,) if isinstance(argnums, int) else result
    assert isinstance(gradients, tuple) and len(gradients) == len(wanted)
    for argnum, gradient in zip(wanted, gradients, strict=True):
        expected = numeric_gradient(mlp_loss_numpy, args, argnum % len(args))
        np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)


def test_value_and_grad_returns_the_loss_too() -> None:
    args = mlp_arguments(1)
    value, (g_w1, g_b2) = value_and_grad(mlp_loss, (0, 3), target=REF)(*args)
    np.testing.assert_allclose(value, mlp_loss_numpy(*args), rtol=1e-12)
    assert g_w1.shape == (4, 6) and g_b2.shape == (3,)
    np.testing.assert_allclose(g_b2, numeric_gradient(mlp_loss_numpy, args, 3), rtol=1e-6)


def test_gradients_of_parameter_structures_have_their_structure() -> None:
    def loss(params, x):  # type: ignore[no-untyped-def]
        (w1, b1), w2 = params["layer1"], params["w2"]
        return ((x @ w1 + b1).tanh() @ w2).mean()

    w1, b1, w2, x = rng_arrays(2, (3, 4), (4,), (4, 2), (5, 3))
    params = {"layer1": (w1, b1), "w2": w2}
    gradients = grad(loss, target=REF)(params, x)
    assert set(gradients) == {"layer1", "w2"}
    assert isinstance(gradients["layer1"], tuple) and len(gradients["layer1"]) == 2
    hidden = np.tanh(x @ w1 + b1)
    d_out = np.full((5, 2), 1 / 10)
    np.testing.assert_allclose(gradients["w2"], hidden.T @ d_out, rtol=1e-12)
    d_pre = (d_out @ w2.T) * (1 - hidden**2)
    np.testing.assert_allclose(gradients["layer1"][0], x.T @ d_pre, rtol=1e-12)
    np.testing.assert_allclose(gradients["layer1"][1], d_pre.sum(0), rtol=1e-12)


def test_has_aux_returns_the_auxiliary_values_undifferentiated() -> None:
    def loss(w, x):  # type: ignore[no-untyped-def]
        y = x @ w
        return (y * y).sum(), {"y": y, "max": y.max()}

    w, x = rng_arrays(3, (3, 2), (4, 3))
    gradient, aux = grad(loss, has_aux=True, target=REF)(w, x)
    np.testing.assert_allclose(gradient, x.T @ (2 * x @ w), rtol=1e-12)
    np.testing.assert_allclose(aux["y"], x @ w, rtol=1e-12)
    (value, aux2), gradient2 = value_and_grad(loss, has_aux=True, target=REF)(w, x)
    np.testing.assert_allclose(value, ((x @ w) ** 2).sum(), rtol=1e-12)
    np.testing.assert_allclose(aux2["max"], (x @ w).max(), rtol=1e-12)
    np.testing.assert_allclose(gradient2, gradient, rtol=1e-12)


def test_static_arguments_and_captured_constants() -> None:
    scale = np.array([[1.0, -2.0, 3.0]])  # not a splat: captured as an extra argument

    def loss(w, power, offset=0.5):  # type: ignore[no-untyped-def]
        return ((w * scale + offset) ** power).sum()

    (w,) = rng_arrays(4, (2, 3))
    gradient = grad(loss, target=REF)(w, 2.0)
    np.testing.assert_allclose(gradient, 2 * (w * scale + 0.5) * scale, rtol=1e-12)
    gradient3 = grad(loss, target=REF)(w, 3.0, offset=1.0)
    np.testing.assert_allclose(gradient3, 3 * (w * scale + 1.0) ** 2 * scale, rtol=1e-12)


def test_float32_in_float32_out() -> None:
    w, x = (a.astype(np.float32) for a in rng_arrays(5, (4, 3), (5, 4)))
    gradient = grad(lambda w, x: (x @ w).sigmoid().sum(), target=REF)(w, x)
    assert gradient.dtype == np.float32
    s = 1 / (1 + np.exp(-(x.astype(np.float64) @ w)))
    np.testing.assert_allclose(gradient, x.T @ (s * (1 - s)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# composition with jit, and with itself
# ---------------------------------------------------------------------------------------


def test_jit_of_grad_and_grad_of_jit_agree() -> None:
    args = mlp_arguments(6)
    plain = grad(mlp_loss, (0, 2), target=REF)(*args)
    jit_of_grad = ts.jit(grad(mlp_loss, (0, 2)), target=REF)
    grad_of_jit = grad(ts.jit(mlp_loss, target=REF), (0, 2))
    assert grad_of_jit.target == REF  # the jit function's target is kept
    for result in (jit_of_grad(*args), grad_of_jit(*args)):
        for actual, expected in zip(result, plain, strict=True):
            np.testing.assert_allclose(actual, expected, rtol=1e-12)
    assert jit_of_grad.trace_count == 1
    jit_of_grad(*mlp_arguments(7))
    assert jit_of_grad.trace_count == 1  # same signature: no retrace


def test_grad_inside_a_jit_function_is_spliced_into_its_trace() -> None:
    """An SGD step: the gradient ops are part of the step's one program."""

    @ts.jit(target=REF)
    def sgd_step(w1, b1, w2, b2, x, labels):  # type: ignore[no-untyped-def]
        loss, grads = value_and_grad(mlp_loss, (0, 1, 2, 3))(w1, b1, w2, b2, x, labels)
        params = (w1, b1, w2, b2)
        return loss, tuple(p - 0.1 * g for p, g in zip(params, grads, strict=True))

    args = mlp_arguments(8)
    loss, updated = sgd_step(*args)
    gradients = grad(mlp_loss, (0, 1, 2, 3), target=REF)(*args)
    np.testing.assert_allclose(loss, mlp_loss_numpy(*args), rtol=1e-12)
    for new, old, g in zip(updated, args[:4], gradients, strict=True):
        np.testing.assert_allclose(new, old - 0.1 * g, rtol=1e-12)
    program = sgd_step.ir(*args)
    # 2 forward matmuls; backward: dW2, d(hidden), dW1 (x is not differentiated).
    assert program.count("func.func") == 1 and program.count("tess.matmul") == 5


def test_second_derivative_by_grad_of_grad() -> None:
    def cube_sum(x):  # type: ignore[no-untyped-def]
        return (x * x * x).sum()

    second = grad(lambda x: grad(cube_sum)(x).sum(), target=REF)
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(second(x), 6 * x, rtol=1e-12)


def test_the_gradient_program_is_tess_from_the_pass() -> None:
    """No tape in Python: the program is the pass's output (two matmuls with transposes)."""
    w, x = rng_arrays(9, (4, 3), (5, 4))
    text = grad(lambda w, x: (x @ w).sum(), (0, 1), target=REF).ir(w, x)
    assert text.count("tess.matmul") == 2
    assert text.count("tess.permute") == 2


def test_repr_and_wrapping() -> None:
    g = grad(mlp_loss, (0, 1))
    assert isinstance(g, GradFunction)
    assert g.__name__ == "mlp_loss_grad" and g.__wrapped__ is mlp_loss  # type: ignore[attr-defined]
    assert "argnums=(0, 1)" in repr(g)


# ---------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------


def test_non_scalar_loss_is_an_error() -> None:
    with pytest.raises(TessError, match=r"needs a scalar loss.*\(2, 3\)"):
        grad(lambda w: w * 2.0, target=REF)(np.ones((2, 3)))


def test_argnums_errors() -> None:
    with pytest.raises(ValueError, match="argnums 2 is out of range"):
        grad(lambda w, x: (w * x).sum(), 2, target=REF)(np.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="argument 1 .* has no gradient"):
        grad(lambda w, k: (w * len(k)).sum(), 1, target=REF)(np.ones(2), "3")
    # A Python float is traced (weakly typed, as in JAX): it has a gradient.
    assert grad(lambda w, k: (w * k).sum(), 1, target=REF)(np.ones(2), 3.0) == 2.0


def test_has_aux_needs_a_pair() -> None:
    with pytest.raises(TypeError, match="pair"):
        grad(lambda w: (w.sum(), w, w), has_aux=True, target=REF)(np.ones(2))
    with pytest.raises(TypeError, match="has_aux"):
        grad(lambda w: (w.sum(), w), target=REF)(np.ones(2))


# ---------------------------------------------------------------------------------------
# through the cpu pipeline, and against PyTorch
# ---------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_COMPILER, reason="tessc.compiler (the cpu pipeline) is missing")
def test_mlp_gradient_through_cpu() -> None:
    args = mlp_arguments(10)
    cpu = value_and_grad(mlp_loss, (0, 1, 2, 3), target="cpu")(*args)
    reference = value_and_grad(mlp_loss, (0, 1, 2, 3), target=REF)(*args)
    np.testing.assert_allclose(cpu[0], reference[0], rtol=1e-10)
    for actual, expected in zip(cpu[1], reference[1], strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12)


def test_mlp_gradient_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    args = mlp_arguments(11)
    ours = grad(mlp_loss, (0, 1, 2, 3, 4), target=REF)(*args)
    tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args[:5]]
    w1, b1, w2, b2, x = tensors
    labels = torch.tensor(args[5], dtype=torch.float64)
    logits = torch.relu(x @ w1 + b1) @ w2 + b2
    loss = -(labels * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    loss.backward()
    for actual, tensor in zip(ours, tensors, strict=True):
        np.testing.assert_allclose(actual, tensor.grad.numpy(), rtol=1e-10, atol=1e-12)
