"""tess-autodiff: gradients of every op and of composites against central differences.

Every gradient is a vector-Jacobian product seed · ∂f/∂x computed by `@f_grad`, run by the
reference interpreter (and through the `cpu` pipeline where `tessc.compiler` exists), and
compared with central differences of seed · f in float64 on hypothesis-drawn shapes.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.utils.exceptions import PassFailedException

from tessc.context import make_context
from tessc.dialects import tess
from tessc.dialects.builder import TessBuilder, build_function, build_module, finish_function
from tessc.dialects.builder_types import tensor_type
from tessc.lowering.autodiff.autodiff import TessAutodiffPass
from tessc.lowering.autodiff.grad_emitter import GradEmitter
from tessc.lowering.autodiff.vjp_rules import VJP_RULES
from tessc.passes import load_pass
from tessc.reference import find_func, interpret, parse_module

from helpers import (
    assert_allclose_by_dtype,
    broadcastable_pair,
    broadcastable_triple,
    build_single_op_module,
    central_difference,
    matmul_shapes,
    random_program,
    reduce_dims,
    shapes,
)

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HAS_COMPILER = importlib.util.find_spec("tessc.compiler") is not None
needs_compiler = pytest.mark.skipif(
    not HAS_COMPILER, reason="tessc.compiler (the cpu pipeline) has not landed yet"
)

# ---------------------------------------------------------------------------------------
# the gradient check
# ---------------------------------------------------------------------------------------


def differentiate(
    module: ModuleOp, name: str = "main", wrt: Sequence[int] | None = None, **options: object
) -> ModuleOp:
    """A copy of `module` with `@<name>_grad` added by the pass."""
    result = module.clone()
    wrt_option = None if wrt is None else tuple(wrt)
    TessAutodiffPass(func=name, wrt=wrt_option, **options).apply(make_context(), result)  # type: ignore[arg-type]
    result.verify()
    return result


def draw_inputs(func_op: func.FuncOp, seed: int, positive: bool = False) -> list[np.ndarray]:
    """Arguments in [-2, 2] (or [0.5, 2] with `positive`), of the declared shapes/dtypes."""
    rng = np.random.default_rng(seed)
    low, high = (0.5, 2.0) if positive else (-2.0, 2.0)
    arrays = []
    for typ in func_op.function_type.inputs.data:
        dtype = np.float64 if "f64" in str(typ.element_type) else np.float32  # type: ignore[attr-defined]
        arrays.append(rng.uniform(low, high, size=tuple(typ.get_shape())).astype(dtype))  # type: ignore[attr-defined]
    return arrays


def seeds_for(outputs: Sequence[np.ndarray], seed: int) -> list[np.ndarray]:
    """The adjoint of each result: 1 for one-element results, random otherwise."""
    rng = np.random.default_rng(seed + 1)
    return [
        np.ones_like(o) if o.size == 1 else rng.uniform(-1, 1, o.shape).astype(o.dtype)
        for o in outputs
    ]


def central_differences(
    run: Callable[[list[np.ndarray]], Sequence[np.ndarray]],
    args: list[np.ndarray],
    seeds: Sequence[np.ndarray],
    wrt: Sequence[int],
    eps: float = 1e-6,
) -> list[np.ndarray]:
    """∂/∂args[i] of sum(seed * f(args)) for i in `wrt`, element by element, in float64."""

    def objective(point: list[np.ndarray]) -> float:
        return sum(float(np.sum(o * s)) for o, s in zip(run(point), seeds, strict=True))

    return [
        central_difference(lambda x, i=i: objective([*args[:i], x, *args[i + 1 :]]), args[i], eps)
        for i in wrt
    ]


def pass_gradients(
    module: ModuleOp,
    name: str,
    args: list[np.ndarray],
    seeds: Sequence[np.ndarray],
    wrt: Sequence[int],
    target: str = "reference",
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """(primal results, gradients) of `@<name>_grad` on `args` and the non-scalar seeds."""
    grad_module = differentiate(module, name, wrt)
    explicit = [s for s in seeds if s.size != 1]
    if target == "reference":
        results = interpret(grad_module, f"{name}_grad", [*args, *explicit])
    else:
        from tessc.compiler import compile_module

        results = compile_module(grad_module, f"{name}_grad", target)(*args, *explicit)
    count = len(seeds)
    return tuple(results[:count]), tuple(results[count:])


def check_gradients(
    module: ModuleOp,
    name: str = "main",
    *,
    positive: bool = False,
    seed: int = 0,
    wrt: Sequence[int] | None = None,
    target: str = "reference",
) -> None:
    """`@<name>_grad` matches central differences of `@<name>` (a float64 program)."""
    args = draw_inputs(find_func(module, name), seed, positive)
    wrt = list(range(len(args))) if wrt is None else list(wrt)
    outputs = interpret(module, name, args)
    seeds = seeds_for(outputs, seed)
    primal, gradients = pass_gradients(module, name, args, seeds, wrt, target)
    for value, expected in zip(primal, outputs, strict=True):
        assert_allclose_by_dtype(value, expected)
    expected_gradients = central_differences(
        lambda point: interpret(module, name, point), args, seeds, wrt
    )
    for index, gradient, expected in zip(wrt, gradients, expected_gradients, strict=True):
        assert gradient.shape == args[index].shape and gradient.dtype == args[index].dtype
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        np.testing.assert_allclose(
            gradient, expected, rtol=1e-5, atol=1e-6 * scale, err_msg=f"gradient of arg {index}"
        )


def single_op(op_name: str, *input_shapes: Sequence[int], **props: object) -> ModuleOp:
    return build_single_op_module(op_name, [(s, "f64") for s in input_shapes], **props)


# ---------------------------------------------------------------------------------------
# every op, through the reference interpreter
# ---------------------------------------------------------------------------------------

UNARY = ["neg", "exp", "log", "relu", "sigmoid", "tanh", "sqrt", "reciprocal", "abs"]
BINARY = ["add", "sub", "mul", "div", "max", "min", "pow"]
POSITIVE = {"log", "sqrt", "reciprocal", "div", "pow"}


def test_every_tess_op_has_a_rule() -> None:
    assert set(tess.Tess.operations) <= set(VJP_RULES), set(tess.Tess.operations) - set(VJP_RULES)


@pytest.mark.parametrize("op_name", UNARY)
@FAST
@given(shape=shapes(0, 3, 4), seed=st.integers(0, 2**16))
def test_unary_gradient(op_name: str, shape: tuple[int, ...], seed: int) -> None:
    check_gradients(single_op(op_name, shape), positive=op_name in POSITIVE, seed=seed)


@pytest.mark.parametrize("op_name", BINARY)
@FAST
@given(pair=broadcastable_pair(0, 3, 4), seed=st.integers(0, 2**16))
def test_binary_gradient_sums_over_broadcast_dims(
    op_name: str, pair: tuple[tuple[int, ...], ...], seed: int
) -> None:
    check_gradients(single_op(op_name, *pair), positive=op_name in POSITIVE, seed=seed)


@pytest.mark.parametrize("op_name", ["lt", "gt", "eq"])
@given(pair=broadcastable_pair(0, 3, 4))
@settings(max_examples=10, deadline=None)
def test_comparisons_have_zero_gradient(op_name: str, pair: tuple[tuple[int, ...], ...]) -> None:
    module = single_op(op_name, *pair)
    check_gradients(module)
    args = draw_inputs(find_func(module, "main"), 0)
    outputs = interpret(module, "main", args)
    _, gradients = pass_gradients(module, "main", args, seeds_for(outputs, 0), [0, 1])
    assert all(not g.any() for g in gradients)


@pytest.mark.parametrize("op_name", ["sum", "mean", "reduce_max"])
@FAST
@given(data=st.data(), shape=shapes(1, 4, 4), keepdim=st.booleans())
def test_reduction_gradient(
    op_name: str, data: st.DataObject, shape: tuple[int, ...], keepdim: bool
) -> None:
    dims = data.draw(reduce_dims(shape, min_size=1))
    check_gradients(single_op(op_name, shape, dims=dims, keepdim=keepdim), seed=len(dims))


@FAST
@given(data=st.data(), shape=shapes(1, 4, 4))
def test_permute_gradient_is_the_inverse_permutation(
    data: st.DataObject, shape: tuple[int, ...]
) -> None:
    perm = data.draw(st.permutations(range(len(shape))))
    check_gradients(single_op("permute", shape, dims=perm))


@FAST
@given(data=st.data(), shape=shapes(0, 4, 4))
def test_reshape_gradient(data: st.DataObject, shape: tuple[int, ...]) -> None:
    size = int(np.prod(shape))
    target = data.draw(st.sampled_from([(size,), (1, size), (size, 1, 1)]))
    check_gradients(single_op("reshape", shape, shape=target))


@FAST
@given(data=st.data(), pair=broadcastable_pair(0, 4, 4))
def test_broadcast_to_gradient_sums_back(
    data: st.DataObject, pair: tuple[tuple[int, ...], ...]
) -> None:
    source, other = pair
    target = tess.broadcast_shapes(source, other)
    check_gradients(single_op("broadcast_to", source, shape=target))


@FAST
@given(triple=broadcastable_triple(0, 3, 4), seed=st.integers(0, 2**16))
def test_select_gradient(triple: tuple[tuple[int, ...], ...], seed: int) -> None:
    check_gradients(single_op("select", *triple), seed=seed)


@FAST
@given(pair=matmul_shapes(max_batch_rank=2, max_side=4), seed=st.integers(0, 2**16))
def test_matmul_gradient_with_broadcast_batch_dims(
    pair: tuple[tuple[int, ...], ...], seed: int
) -> None:
    check_gradients(single_op("matmul", *pair), seed=seed)


def test_fill_is_a_constant() -> None:
    def body(b: TessBuilder, x):  # type: ignore[no-untyped-def]
        return b.mul(x, b.fill(3.0, (2, 1), "f64"))

    module = build_module(build_function("main", [tensor_type((4,), "f64")], body))
    check_gradients(module)


# ---------------------------------------------------------------------------------------
# conventions at non-differentiable points (those of PyTorch)
# ---------------------------------------------------------------------------------------


def gradient_at(op_name: str, *arrays: np.ndarray, **props: object) -> tuple[np.ndarray, ...]:
    module = build_single_op_module(op_name, [(a.shape, "f64") for a in arrays], **props)
    outputs = interpret(module, "main", list(arrays))
    seeds = [np.ones_like(o) for o in outputs]
    _, gradients = pass_gradients(module, "main", list(arrays), seeds, range(len(arrays)))
    return gradients


def test_binary_max_and_min_split_ties_evenly() -> None:
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([3.0, 2.0, 1.0])
    for op_name, expected_a in (("max", [0.0, 0.5, 1.0]), ("min", [1.0, 0.5, 0.0])):
        grad_a, grad_b = gradient_at(op_name, a, b)
        np.testing.assert_array_equal(grad_a, expected_a)
        np.testing.assert_array_equal(grad_b, 1.0 - np.array(expected_a))


def test_reduce_max_splits_ties_evenly_among_the_maxima() -> None:
    x = np.array([[1.0, 5.0, 5.0, 2.0], [3.0, 3.0, 3.0, 0.0]])
    (grad,) = gradient_at("reduce_max", x, dims=[1])
    np.testing.assert_allclose(grad, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])


def test_relu_and_abs_have_zero_gradient_at_zero() -> None:
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(gradient_at("relu", x)[0], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(gradient_at("abs", x)[0], [-1.0, 0.0, 1.0])


def test_pow_at_a_zero_base_and_a_zero_exponent() -> None:
    base = np.array([0.0, 0.0, 2.0, 0.0])
    exponent = np.array([2.0, 0.0, 0.0, 0.5])
    grad_base, grad_exponent = gradient_at("pow", base, exponent)
    # d/dx x^y = y x^(y-1): 0 at x=0,y=2; 0 (not NaN) where y=0; inf at x=0,y=0.5 (torch's).
    np.testing.assert_array_equal(grad_base, [0.0, 0.0, 0.0, np.inf])
    # d/dy x^y = x^y log x: 0 (not NaN) where x=0 and y >= 0; log 2 at x=2,y=0.
    np.testing.assert_allclose(grad_exponent, [0.0, 0.0, np.log(2.0), 0.0])


# ---------------------------------------------------------------------------------------
# composites
# ---------------------------------------------------------------------------------------


def mlp_softmax_cross_entropy(n: int, d: int, h: int, c: int, dtype: str = "f64") -> ModuleOp:
    """loss(x, w1, b1, w2, b2, labels) = mean cross-entropy of softmax(relu(x w1 + b1) w2 + b2)."""

    def body(b: TessBuilder, x, w1, b1, w2, b2, labels):  # type: ignore[no-untyped-def]
        hidden = b.relu(b.add(b.matmul(x, w1), b1))
        logits = b.add(b.matmul(hidden, w2), b2)
        shifted = b.sub(logits, b.reduce_max(logits, 1, keepdim=True))
        log_z = b.log(b.sum(b.exp(shifted), 1, keepdim=True))
        log_probs = b.sub(shifted, log_z)
        return b.neg(b.mean(b.sum(b.mul(labels, log_probs), 1)))

    types = [(n, d), (d, h), (h,), (h, c), (c,), (n, c)]
    function = build_function("loss", [tensor_type(s, dtype) for s in types], body)
    return build_module(function)


def broadcast_heavy(dtype: str = "f64") -> ModuleOp:
    """sum(m * m), m = sigmoid((a * b + c) / (|d| + 1)) * a - b, with a (3,1,5), b (4,1),
    c (5,), d (1,): every zip broadcasts, to (3,4,5)."""

    def body(b: TessBuilder, a, bb, c, d):  # type: ignore[no-untyped-def]
        numerator = b.add(b.mul(a, bb), c)
        scaled = b.div(numerator, b.add(b.abs(d), 1.0))
        mixed = b.sub(b.mul(b.sigmoid(scaled), a), bb)
        return b.sum(b.mul(mixed, mixed), None)

    types = [(3, 1, 5), (4, 1), (5,), (1,)]
    return build_module(build_function("expr", [tensor_type(s, dtype) for s in types], body))


def reduction_chain(dtype: str = "f64") -> ModuleOp:
    """mean(reduce_max(x * sum(x, 2, keepdim), 1)) + sum(mean(x, 0)) as a (2,3,4) -> scalar."""

    def body(b: TessBuilder, x):  # type: ignore[no-untyped-def]
        rows = b.sum(x, 2, keepdim=True)
        peaks = b.reduce_max(b.mul(x, rows), 1)
        return b.add(b.mean(peaks, None), b.sum(b.mean(x, 0), None))

    return build_module(build_function("chain", [tensor_type((2, 3, 4), dtype)], body))


def one_hot_labels(args: list[np.ndarray], seed: int) -> None:
    """Replace the last argument (labels) by one-hot rows, so the loss is a real CE."""
    labels = args[-1]
    rng = np.random.default_rng(seed)
    one_hot = np.zeros_like(labels)
    one_hot[np.arange(labels.shape[0]), rng.integers(0, labels.shape[1], labels.shape[0])] = 1
    args[-1] = one_hot


@settings(max_examples=10, deadline=None)
@given(
    n=st.integers(1, 4), d=st.integers(1, 4), h=st.integers(1, 5), c=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_mlp_softmax_cross_entropy_gradient(n: int, d: int, h: int, c: int, seed: int) -> None:
    check_gradients(mlp_softmax_cross_entropy(n, d, h, c), "loss", seed=seed, wrt=range(5))


def test_mlp_gradient_matches_the_closed_form() -> None:
    """The textbook backward of softmax cross-entropy: dlogits = (softmax - labels) / n."""
    module = mlp_softmax_cross_entropy(4, 3, 5, 3)
    args = draw_inputs(find_func(module, "loss"), 7)
    one_hot_labels(args, 7)
    x, w1, b1, w2, b2, labels = args
    _, (g_x, g_w1, g_b1, g_w2, g_b2, _) = pass_gradients(
        module, "loss", args, [np.ones(())], range(6)
    )
    pre = x @ w1 + b1
    hidden = np.maximum(pre, 0)
    logits = hidden @ w2 + b2
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    d_logits = (probs - labels) / len(x)
    d_pre = (d_logits @ w2.T) * (pre > 0)
    for actual, expected in (
        (g_w2, hidden.T @ d_logits), (g_b2, d_logits.sum(0)),
        (g_w1, x.T @ d_pre), (g_b1, d_pre.sum(0)), (g_x, d_pre @ w1.T),
    ):  # fmt: skip
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_broadcast_heavy_gradient(seed: int) -> None:
    check_gradients(broadcast_heavy(), "expr", seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reduction_chain_gradient(seed: int) -> None:
    check_gradients(reduction_chain(), "chain", seed=seed)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_program(dtypes=("f64",), max_ops=8))
def test_random_program_gradients(program: tuple[ModuleOp, str]) -> None:
    module, name = program
    check_gradients(module, name)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_program(dtypes=("f64",), max_ops=5))
def test_second_order_gradients(program: tuple[ModuleOp, str]) -> None:
    """The pass applied to its own output: every rule emits ops that have rules."""
    module, name = program
    check_gradients(differentiate(module, name), f"{name}_grad")


def test_float32_gradients_stay_float32() -> None:
    module = mlp_softmax_cross_entropy(3, 4, 5, 3, dtype="f32")
    module64 = mlp_softmax_cross_entropy(3, 4, 5, 3, dtype="f64")
    args = draw_inputs(find_func(module, "loss"), 3)
    one_hot_labels(args, 3)
    seeds = [np.ones((), np.float32)]
    _, gradients = pass_gradients(module, "loss", args, seeds, range(5))
    _, expected = pass_gradients(
        module64, "loss", [a.astype(np.float64) for a in args], seeds, range(5)
    )
    for gradient, reference in zip(gradients, expected, strict=True):
        assert gradient.dtype == np.float32
        assert_allclose_by_dtype(gradient, reference.astype(np.float32), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------
# the pass itself
# ---------------------------------------------------------------------------------------

TWO_RESULTS = """
func.func @f(%x: tensor<3xf64>, %y: tensor<3xf64>) -> (tensor<f64>, tensor<3xf64>) {
  %0 = tess.mul %x, %y : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  %1 = tess.sum %0 dims = [0] : tensor<3xf64> -> tensor<f64>
  %2 = tess.exp %x : tensor<3xf64>
  func.return %1, %2 : tensor<f64>, tensor<3xf64>
}
"""


def test_pass_leaves_the_primal_alone_and_is_deterministic() -> None:
    module = parse_module(TWO_RESULTS)
    before = str(module)
    first, second = differentiate(module, "f"), differentiate(module, "f")
    assert str(first) == str(second)
    assert str(module) == before
    assert str(first.body.block.first_op) == str(module.body.block.first_op)


def test_pass_options_from_a_pipeline_string() -> None:
    from xdsl.utils.arg_spec import parse_pipeline

    (spec,) = parse_pipeline("tess-autodiff{func=f wrt=1 results=0 grad-name=df}")
    pass_ = load_pass("tess-autodiff").from_pass_spec(spec)
    assert pass_ == TessAutodiffPass(func="f", wrt=(1,), results=(0,), grad_name="df")
    module = parse_module(TWO_RESULTS)
    pass_.apply(make_context(), module)
    grad = find_func(module, "df")
    # Only result 0 (scalar) is differentiated: no seed argument; exp(x) is auxiliary.
    assert len(grad.args) == 2 and len(grad.function_type.outputs) == 3
    x, y = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    value, aux, grad_y = interpret(module, "df", [x, y])
    np.testing.assert_allclose(value, x @ y)
    np.testing.assert_allclose(aux, np.exp(x))
    np.testing.assert_allclose(grad_y, x)


def test_all_results_are_differentiated_by_default() -> None:
    module = differentiate(parse_module(TWO_RESULTS), "f")
    x, y, seed = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), np.array([1.0, 0, -1])
    *_, grad_x, grad_y = interpret(module, "f_grad", [x, y, seed])
    np.testing.assert_allclose(grad_x, y + seed * np.exp(x))
    np.testing.assert_allclose(grad_y, x)


def test_unused_argument_gets_zeros_and_wrt_picks_arguments() -> None:
    text = """
    func.func @f(%x: tensor<2xf64>, %unused: tensor<3x2xf64>) -> tensor<f64> {
      %0 = tess.sum %x dims = [0] : tensor<2xf64> -> tensor<f64>
      func.return %0 : tensor<f64>
    }
    """
    module = differentiate(parse_module(text), "f", wrt=[1, 0])
    _, grad_unused, grad_x = interpret(module, "f_grad", [np.ones(2), np.ones((3, 2))])
    np.testing.assert_array_equal(grad_unused, np.zeros((3, 2)))
    np.testing.assert_array_equal(grad_x, np.ones(2))


def test_inactive_branches_emit_no_gradient_code() -> None:
    """Code that depends only on arguments outside wrt gets no backward ops."""
    module = differentiate(single_op("matmul", (3, 4), (4, 5)), "main", wrt=[0])
    grad = find_func(module, "main_grad")
    assert [op.name for op in grad.body.block.ops].count("tess.matmul") == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"func": "missing"}, "no function @missing"),
        ({"func": "main", "wrt": (2,)}, "wrt index 2 is out of range: @main has 2 arguments"),
        ({"func": "main", "results": (1,)}, "results index 1 is out of range"),
        ({"func": "main", "grad_name": "main"}, "already has a symbol @main"),
    ],
)
def test_pass_errors(options: dict[str, object], message: str) -> None:
    module = single_op("add", (2,), (2,))
    with pytest.raises(PassFailedException, match=message):
        TessAutodiffPass(**options).apply(make_context(), module)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# GradEmitter: the one TessBuilder, folding
# ---------------------------------------------------------------------------------------


def test_grad_emitter_composites_fold_through_its_primitives() -> None:
    """The builder's composites are the VJP rules' too, and fold like its primitives."""
    block = Block(arg_types=[tensor_type((2, 3), "f64")])
    emit = GradEmitter.at_end(block)
    x = block.args[0]
    two = emit.full_like(x, 2.0)
    unsqueezed = emit.unsqueeze(two, 0)  # a reshape of a fill
    assert isinstance(unsqueezed.owner, tess.FillOp)
    assert tess.tensor_shape(unsqueezed) == (1, 2, 3)
    summed = emit.sum_to_shape(two, (1, 3))  # one sum of a fill: a fill
    assert isinstance(summed.owner, tess.FillOp) and summed.owner.fill_value == 4.0
    assert tess.tensor_shape(summed) == (1, 3)
    assert emit.sum_to_shape(x, (2, 3)) is x
    assert emit.mul(x, emit.scalar(1.0, x)) is x
    assert [op.name for op in block.ops] == ["tess.fill"] * 4


INDEXING_AND_BOOLS = """
func.func @f(%x: tensor<5x3xf64>, %y: tensor<2x3xf64>) -> tensor<f64> {
  %i = tess.argmax %x dim = [1] : tensor<5x3xf64> -> tensor<5xi64>
  %t = tess.take %x, %i dim = [0] : tensor<5x3xf64>, tensor<5xi64> -> tensor<5x3xf64>
  %s = tess.slice %t offsets = [1, 2] strides = [2, -1] : tensor<5x3xf64> -> tensor<2x3xf64>
  %c = tess.concat %s, %y dim = [0] : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<4x3xf64>
  %z = tess.fill 0.0 : tensor<4x3xf64>
  %m = tess.lt %c, %z : tensor<4x3xf64>, tensor<4x3xf64> -> tensor<4x3xi1>
  %e = tess.exp %c : tensor<4x3xf64>
  %w = tess.select %m, %c, %e : tensor<4x3xi1>, tensor<4x3xf64>, tensor<4x3xf64> -> tensor<4x3xf64>
  %k = tess.cast %m : tensor<4x3xi1> -> tensor<4x3xf64>
  %p = tess.mul %w, %k : tensor<4x3xf64>, tensor<4x3xf64> -> tensor<4x3xf64>
  %q = tess.add %p, %w : tensor<4x3xf64>, tensor<4x3xf64> -> tensor<4x3xf64>
  %u = tess.unslice %q offsets = [0, 0] strides = [2, 1] : tensor<4x3xf64> -> tensor<8x3xf64>
  %r = tess.sum %u dims = [0, 1] : tensor<8x3xf64> -> tensor<f64>
  func.return %r : tensor<f64>
}
"""


@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_through_indexing_ops_casts_and_a_bool_condition(seed: int) -> None:
    """The adjoint-op rules (take, slice, unslice, concat), a cast from i1 and a select on an
    i1 condition, all built through GradEmitter."""
    check_gradients(parse_module(INDEXING_AND_BOOLS), "f", seed=seed)


def test_grad_emitter_composites_compute_what_the_front_does() -> None:
    def body(b: TessBuilder, x: SSAValue, y: SSAValue) -> list[SSAValue]:
        return [b.le(x, y), b.ne(x, 0.0), b.reduce_min(x, 1, keepdim=True), b.sum_to_shape(x, (3,))]

    x = np.array([[1.0, -2.0, 0.0], [3.0, 3.0, -1.0]])
    y = np.array([[1.0, 0.0, -1.0], [2.0, 4.0, -1.0]])
    results = {}
    for builder in (TessBuilder, GradEmitter):
        block = Block(arg_types=[tensor_type((2, 3), "f64")] * 2)
        emit = builder.at_end(block)
        emit.ret(*body(emit, *block.args))
        module = build_module(finish_function("f", block))
        results[builder] = interpret(module, "f", [x, y])
    expected = [x <= y, x != 0, x.min(1, keepdims=True), x.sum(0)]
    for got in results.values():
        for value, want in zip(got, expected, strict=True):
            np.testing.assert_array_equal(value, np.asarray(want, np.float64))


# ---------------------------------------------------------------------------------------
# through the cpu pipeline
# ---------------------------------------------------------------------------------------

CPU_CASES: list[tuple[str, Callable[[], ModuleOp], str, bool]] = [
    *((f"unary-{op}", lambda op=op: single_op(op, (3, 4)), "main", op in POSITIVE) for op in UNARY),
    *(
        (f"binary-{op}", lambda op=op: single_op(op, (3, 1, 4), (2, 1)), "main", op in POSITIVE)
        for op in [*BINARY, "lt"]
    ),
    *(
        (f"reduce-{op}", lambda op=op: single_op(op, (2, 3, 4), dims=[0, 2]), "main", False)
        for op in ["sum", "mean", "reduce_max"]
    ),
    ("permute", lambda: single_op("permute", (2, 3, 4), dims=[2, 0, 1]), "main", False),
    ("reshape", lambda: single_op("reshape", (2, 6), shape=(3, 4)), "main", False),
    ("broadcast_to", lambda: single_op("broadcast_to", (3, 1), shape=(2, 3, 4)), "main", False),
    ("select", lambda: single_op("select", (3, 4), (4,), (3, 1)), "main", False),
    ("matmul", lambda: single_op("matmul", (2, 3, 4), (4, 5)), "main", False),
    ("mlp", lambda: mlp_softmax_cross_entropy(4, 3, 5, 3), "loss", False),
    ("broadcast-heavy", broadcast_heavy, "expr", False),
    ("reduction-chain", reduction_chain, "chain", False),
]


@needs_compiler
@pytest.mark.parametrize(
    ("build", "name", "positive"),
    [pytest.param(build, name, positive, id=case) for case, build, name, positive in CPU_CASES],
)
def test_cpu_gradients_match_central_differences(
    build: Callable[[], ModuleOp], name: str, positive: bool
) -> None:
    check_gradients(build(), name, positive=positive, target="cpu")


@needs_compiler
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(program=random_program(dtypes=("f64",), max_ops=5, max_side=3))
def test_cpu_gradients_of_random_programs(program: tuple[ModuleOp, str]) -> None:
    """Hypothesis-drawn shapes and ops through the whole cpu pipeline: few, and the same
    ones every run (derandomized), since each new program is a Numba compilation."""
    module, name = program
    check_gradients(module, name, target="cpu")


MLP_TO_NUMBA = Path(__file__).parent / "filecheck" / "autodiff" / "mlp-grad-to-numba.mlir"
MLP_TO_NUMBA_PIPELINE = (
    "tess-autodiff{func=loss wrt=1,2,3,4},tess-to-linalg,tess-fuse,tess-bufferize,"
    "tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse"
)


@needs_compiler
def test_mlp_gradient_from_one_tessc_opt_pipeline_runs() -> None:
    """The Numba source that one `tessc-opt -p ... -t numba` run writes for the MLP's
    gradient computes the reference interpreter's gradient (f32)."""
    from tessc.runtime.cache import load_source
    from tessc.runtime.executor import Executable

    assert MLP_TO_NUMBA_PIPELINE in MLP_TO_NUMBA.read_text()
    tool = Path(sys.executable).parent / "tessc-opt"
    completed = subprocess.run(
        [str(tool), str(MLP_TO_NUMBA), "-p", MLP_TO_NUMBA_PIPELINE, "-t", "numba"],
        capture_output=True,
        text=True,
        check=True,
    )
    loss_grad = Executable(load_source(completed.stdout), "loss_grad")
    module = parse_module(MLP_TO_NUMBA.read_text())
    args = draw_inputs(find_func(module, "loss"), 12)
    one_hot_labels(args, 12)
    expected = interpret(differentiate(module, "loss", wrt=[1, 2, 3, 4]), "loss_grad", args)
    for actual, reference in zip(loss_grad(*args), expected, strict=True):
        assert_allclose_by_dtype(actual, reference, rtol=1e-4, atol=1e-5)
