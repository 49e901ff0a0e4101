"""The traced Tensor and jit: every operator and method against NumPy, errors, retracing."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import tessc as ts
from tessc.dialects import tess

RNG = np.random.default_rng(1234)
HAS_COMPILER = importlib.util.find_spec("tessc.compiler") is not None


def data(*shape, dtype=np.float32, positive=False):
    x = RNG.standard_normal(shape).astype(dtype)
    return np.abs(x) + 0.5 if positive else x


def run(fn, *args, **kwargs):
    return ts.jit(fn, target="reference")(*args, **kwargs)


def assert_close(actual, expected):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    tol = 1e-5 if actual.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# every operator and method against NumPy, in f32 and f64
# ---------------------------------------------------------------------------------------

A, B = (3, 1, 4), (5, 1)  # broadcast to (3, 5, 4)

BINARY_CASES = {
    "x + y": (lambda x, y: x + y, lambda x, y: x + y),
    "x - y": (lambda x, y: x - y, lambda x, y: x - y),
    "x * y": (lambda x, y: x * y, lambda x, y: x * y),
    "x / y": (lambda x, y: x / y, lambda x, y: x / y),
    "x ** y": (lambda x, y: abs(x) ** y, lambda x, y: np.abs(x) ** y),
    "x < y": (lambda x, y: x < y, lambda x, y: x < y),
    "x > y": (lambda x, y: x > y, lambda x, y: x > y),
    "x <= y": (lambda x, y: x <= y, lambda x, y: x <= y),
    "x >= y": (lambda x, y: x >= y, lambda x, y: x >= y),
    "x == y": (lambda x, y: x == y, lambda x, y: x == y),
    "x != y": (lambda x, y: x != y, lambda x, y: x != y),
    "x.maximum(y)": (lambda x, y: x.maximum(y), np.maximum),
    "x.minimum(y)": (lambda x, y: x.minimum(y), np.minimum),
    "x.pow(y)": (lambda x, y: abs(x).pow(y), lambda x, y: np.abs(x) ** y),
    "ts.maximum": (ts.maximum, np.maximum),
    "ts.minimum": (ts.minimum, np.minimum),
    "ts.pow": (lambda x, y: ts.pow(abs(x), y), lambda x, y: np.abs(x) ** y),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(BINARY_CASES))
def test_binary(case, dtype):
    traced, reference = BINARY_CASES[case]
    x, y = data(*A, dtype=dtype), data(*B, dtype=dtype)
    if "==" in case or "!=" in case or "=" in case:
        y = np.round(y)
        x = np.round(x)
    result = run(traced, x, y)
    expected = np.asarray(reference(x, y))
    if expected.dtype == bool:  # comparisons give bool tensors, as in NumPy
        assert result.dtype == bool
        np.testing.assert_array_equal(result, expected)
        return
    assert result.dtype == dtype
    assert_close(result, expected.astype(dtype))


UNARY_CASES = {
    "-x": (lambda x: -x, np.negative, False),
    "+x": (lambda x: +x, lambda x: x, False),
    "abs(x)": (lambda x: abs(x), np.abs, False),
    "exp": (lambda x: x.exp(), np.exp, False),
    "log": (lambda x: x.log(), np.log, True),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), False),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), False),
    "tanh": (lambda x: x.tanh(), np.tanh, False),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, True),
    "abs": (lambda x: x.abs(), np.abs, False),
    "neg": (lambda x: x.neg(), np.negative, False),
    "reciprocal": (lambda x: x.reciprocal(), np.reciprocal, True),
    "ts.exp": (ts.exp, np.exp, False),
    "ts.log": (ts.log, np.log, True),
    "ts.relu": (ts.relu, lambda x: np.maximum(x, 0), False),
    "ts.sigmoid": (ts.sigmoid, lambda x: 1 / (1 + np.exp(-x)), False),
    "ts.tanh": (ts.tanh, np.tanh, False),
    "ts.sqrt": (ts.sqrt, np.sqrt, True),
    "ts.abs": (ts.abs, np.abs, False),
    "ts.neg": (ts.neg, np.negative, False),
    "ts.reciprocal": (ts.reciprocal, np.reciprocal, True),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(UNARY_CASES))
def test_unary(case, dtype):
    traced, reference, positive = UNARY_CASES[case]
    x = data(2, 3, dtype=dtype, positive=positive)
    result = run(traced, x)
    assert result.dtype == dtype
    assert_close(result, reference(x))


REDUCTION_CASES = {
    "x.sum()": (lambda x: x.sum(), lambda x: x.sum()),
    "x.sum(1)": (lambda x: x.sum(1), lambda x: x.sum(1)),
    "x.sum(dim=-1)": (lambda x: x.sum(dim=-1), lambda x: x.sum(-1)),
    "x.sum((0, 2), keepdim=True)": (
        lambda x: x.sum((0, 2), keepdim=True),
        lambda x: x.sum((0, 2), keepdims=True),
    ),
    "x.mean()": (lambda x: x.mean(), lambda x: x.mean()),
    "x.mean(dim=[0, 1])": (lambda x: x.mean(dim=[0, 1]), lambda x: x.mean((0, 1))),
    "x.max()": (lambda x: x.max(), lambda x: x.max()),
    "x.max(1, keepdim=True).values": (
        lambda x: x.max(1, keepdim=True).values,
        lambda x: x.max(1, keepdims=True),
    ),
    "x.amin(-2)": (lambda x: x.amin(-2), lambda x: x.min(-2)),
    "ts.sum": (lambda x: ts.sum(x, dim=2), lambda x: x.sum(2)),
    "ts.mean": (lambda x: ts.mean(x, 0), lambda x: x.mean(0)),
    "ts.max": (lambda x: ts.max(x), lambda x: x.max()),
    "ts.min": (lambda x: ts.min(x, axis=(1, 2)), lambda x: x.min((1, 2))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(REDUCTION_CASES))
def test_reduction(case, dtype):
    traced, reference = REDUCTION_CASES[case]
    x = data(2, 3, 4, dtype=dtype)
    result = run(traced, x)
    assert result.dtype == dtype
    assert_close(result, reference(x))


SHAPE_CASES = {
    "view": (lambda x: x.view(4, 6), lambda x: x.reshape(4, 6)),
    "reshape(-1)": (lambda x: x.reshape((-1, 3)), lambda x: x.reshape(-1, 3)),
    "permute": (lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
    "permute(negative)": (lambda x: x.permute((-1, 0, 1)), lambda x: x.transpose(2, 0, 1)),
    "T": (lambda x: x.sum(0).T, lambda x: x.sum(0).T),
    "mT": (lambda x: x.mT, lambda x: np.swapaxes(x, 1, 2)),
    "transpose": (lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2)),
    "broadcast_to": (
        lambda x: x.sum(0).broadcast_to(5, 3, 4),
        lambda x: np.broadcast_to(x.sum(0), (5, 3, 4)),
    ),
    "expand": (
        lambda x: x.amax(1, keepdim=True).expand((2, 3, 4)),
        lambda x: np.broadcast_to(x.max(1, keepdims=True), (2, 3, 4)),
    ),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x[:, None]),
    "ts.reshape": (lambda x: ts.reshape(x, (24,)), lambda x: x.reshape(24)),
    "ts.view": (lambda x: ts.view(x, (6, 4)), lambda x: x.reshape(6, 4)),
    "ts.permute": (lambda x: ts.permute(x, (1, 2, 0)), lambda x: x.transpose(1, 2, 0)),
    "ts.transpose": (lambda x: ts.transpose(x), lambda x: np.transpose(x)),
    "ts.broadcast_to": (
        lambda x: ts.broadcast_to(x, (2, 2, 3, 4)),
        lambda x: np.broadcast_to(x, (2, 2, 3, 4)),
    ),
    "ts.unsqueeze": (lambda x: ts.unsqueeze(x, -1), lambda x: x[..., None]),
}


@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_shape_methods(case):
    traced, reference = SHAPE_CASES[case]
    x = data(2, 3, 4)
    assert_close(run(traced, x), reference(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("lhs", "rhs"), [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))]
)
def test_matmul(lhs, rhs, dtype):
    x, y = data(*lhs, dtype=dtype), data(*rhs, dtype=dtype)
    assert_close(run(lambda a, b: a @ b, x, y), x @ y)
    assert_close(run(lambda a, b: a.matmul(b), x, y), x @ y)
    assert_close(run(ts.matmul, x, y), x @ y)


def test_T_of_a_vector_is_itself():
    x = data(5)
    assert_close(run(lambda v: v.T * 1.0, x), x)


def test_where_and_fills():
    x = data(3, 4)

    def f(x):
        return ts.where(x > 0, x, ts.zeros((4,)) - 1.0) + ts.ones((3, 1)) * ts.full((), 2.0)

    assert_close(run(f, x), np.where(x > 0, x, -1.0) + 2.0)


def test_where_with_number_branches():
    x = data(3, 4, dtype=np.float64)
    assert_close(run(lambda x: ts.where(x < 0, 0.0, 1.0) * x, x), np.where(x < 0, 0.0, x))


# ---------------------------------------------------------------------------------------
# numbers and NumPy arrays mixed in
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numbers_on_either_side_take_the_tensor_dtype(dtype):
    x = data(2, 3, dtype=dtype, positive=True)

    def f(x):
        return 2 * x + 1 - x / 4 + 3 / x - 1.5**x + x**2 - np.float64(0.5) * (x > 1)

    result = run(f, x)
    assert result.dtype == dtype
    assert_close(result, 2 * x + 1 - x / 4 + 3 / x - 1.5**x + x**2 - 0.5 * (x > 1))


def test_numpy_arrays_mixed_in_are_captured_or_filled():
    x = data(2, 3)
    bias = np.array([1.0, 2.0, 3.0])  # float64: takes the tensor's float32
    weights = data(3, 3, dtype=np.float64)

    def f(x):
        return (x + bias) @ weights - np.ones(3) + [[0.5], [0.25]]

    jitted = ts.jit(f, target="reference")
    result = jitted(x)
    expected = (x + bias.astype(np.float32)) @ weights.astype(np.float32) - 1 + [[0.5], [0.25]]
    assert result.dtype == np.float32
    assert_close(result, expected.astype(np.float32))
    traced = jitted.trace(x)
    # bias, weights and the column are captured as extra inputs; np.ones(3) is a fill.
    assert len(traced.constants) == 3
    assert "%const" in traced.ir()
    fills = [op for op in traced.module.walk() if isinstance(op, tess.FillOp)]
    assert [op.results[0].type.get_shape() for op in fills] == [(3,)]


def test_numpy_array_on_the_left_uses_the_reflected_operator():
    x = data(2, 3)
    a = data(2, 3)
    assert_close(run(lambda x: a - x, x), a - x)
    assert_close(run(lambda x: a < x, x), (a < x).astype(np.float32))
    assert_close(run(lambda x: data_t @ x, x), data_t @ x)


data_t = data(4, 2)


# ---------------------------------------------------------------------------------------
# arguments, results and the trace cache
# ---------------------------------------------------------------------------------------


def test_several_results_and_nested_arguments():
    @ts.jit(target="reference")
    def step(params, x, lr=0.5):
        y = x @ params["w"] + params["b"]
        return {"y": y, "w": params["w"] - lr * y.sum()}, (y.relu(),)

    params = {"w": data(3, 2), "b": data(2)}
    x = data(4, 3)
    out, (relu,) = step(params, x)
    y = x @ params["w"] + params["b"]
    assert_close(out["y"], y)
    assert_close(out["w"], params["w"] - 0.5 * y.sum())
    assert_close(relu, np.maximum(y, 0))
    text = step.ir(params, x)
    assert "%params_b" in text and "%params_w" in text and "%x" in text


def test_traces_once_per_signature():
    @ts.jit(target="reference")
    def f(x, scale=1.0):
        return x * scale

    x = data(2, 3)
    f(x)
    f(x + 1)
    f(np.zeros((2, 3), np.float32))
    assert f.trace_count == 1
    f(data(3, 3))  # a new shape
    assert f.trace_count == 2
    f(x.astype(np.float64))  # a new dtype
    assert f.trace_count == 3
    assert_close(f(x, scale=2.0), 2 * x)  # a Python number is traced: no new trace
    assert f.trace_count == 3
    f(x, 2.0)  # the same binding, positionally
    f(data(3, 3))
    assert f.trace_count == 3
    static = ts.jit(lambda x, scale=1.0: x * scale, target="reference", static_argnames="scale")
    assert_close(static(x, scale=2.0), 2 * x)
    assert_close(static(x, 3.0), 3 * x)  # a new static value
    assert static.trace_count == 2


def test_ir_is_the_tess_module():
    @ts.jit
    def mlp(x, w1, b1, w2):
        h = (x @ w1 + b1).relu()
        return (h @ w2).sum(dim=1)

    args = data(4, 8), data(8, 6), data(6), data(6, 3)
    text = mlp.ir(*args, stage="tess")
    assert "func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x6xf32>" in text
    names = [line.split("=")[1].split()[0] for line in text.splitlines() if " = tess." in line]
    assert names == ["tess.matmul", "tess.add", "tess.relu", "tess.matmul", "tess.sum"]
    assert mlp.trace_count == 1


def test_rank0_inputs_and_outputs():
    x = np.array(3.0, np.float32)
    assert_close(run(lambda x: x * 2, x), np.array(6.0, np.float32))


# ---------------------------------------------------------------------------------------
# errors at trace time, in the user's terms
# ---------------------------------------------------------------------------------------


def error_of(fn, *args):
    with pytest.raises(ts.TraceError) as info:
        ts.jit(fn, target="reference").trace(*args)
    return info.value


def line_of(fn, offset):
    return fn.__code__.co_firstlineno + offset


def test_broadcast_error_names_shapes_expression_and_line():
    def mlp(x, y):
        return x + y

    error = error_of(mlp, np.ones((3, 4, 1), np.float32), np.ones((3, 5), np.float32))
    line = line_of(mlp, 1)
    assert str(error).startswith("cannot broadcast (3,4,1) with (3,5) in `x + y` at ")
    assert str(error).endswith(f"test_tensor.py:{line}")
    assert error.location.lineno == line and error.location.source == "x + y"


def test_method_and_function_errors_are_located():
    def f(x, w):
        h = (x @ w).relu()
        return h

    error = error_of(f, data(3, 4), data(5, 6))
    assert "matmul contraction mismatch: (3,4) and (5,6)" in str(error)
    assert error.location.source == "x @ w" and error.location.lineno == line_of(f, 1)

    def g(x):
        return ts.sum(x.exp(), dim=3)

    error = error_of(g, data(3, 4))
    assert "dim 3 is out of range" in str(error)
    assert error.location.source == "ts.sum(x.exp(), dim=3)"


def test_other_shape_errors():
    assert "cannot reshape (3,4)" in str(error_of(lambda x: x.view(5, 2), data(3, 4)))
    assert "not a permutation" in str(error_of(lambda x: x.permute(0, 0), data(3, 4)))
    assert "cannot broadcast (3,4) to (2,4)" in str(
        error_of(lambda x: x.broadcast_to(2, 4), data(3, 4))
    )
    # f32 with f64 promotes to f64, as in NumPy and JAX.
    assert run(lambda x, y: x * y, data(3), data(3, dtype=np.float64)).dtype == np.float64


def test_python_control_flow_on_a_tensor_is_an_error():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    error = error_of(f, data(3))
    assert "no truth value" in str(error) and "tessc.where" in str(error)


def test_bad_arguments_and_results():
    with pytest.raises(TypeError, match="argument `x` has dtype int8"):
        run(lambda x: x, np.arange(3, dtype=np.int8))
    with pytest.raises(TypeError, match="must return a Tensor"):
        run(lambda x: 1.0, data(3))
    with pytest.raises(TypeError, match="must return a Tensor"):
        run(lambda x: (x, None), data(3))


def test_a_tensor_that_escapes_its_trace_is_an_error():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    run(f, data(3))
    with pytest.raises(ts.TraceError, match="did a Tensor escape a jit function"):
        run(lambda y: y + leaked[0], data(3))
    with pytest.raises(ts.TraceError, match="belongs to a finished trace"):
        run(lambda y: ts.exp(leaked[0]) + y, data(3))


def test_function_forms_need_a_trace():
    with pytest.raises(ts.TessError, match="inside a @tessc.jit function"):
        ts.exp(np.ones(3))


def test_jit_on_a_method():
    class Model:
        def __init__(self, scale):
            self.scale = scale

        @ts.jit(target="reference")
        def forward(self, x):
            return x * self.scale

    x = data(3)
    assert_close(Model(3.0).forward(x), 3 * x)


def test_importing_tessc_loads_neither_numba_nor_xdsl():
    import subprocess
    import sys

    code = "import sys, tessc; print('numba' in sys.modules, 'xdsl' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------------------------------
# the compiled CPU target
# ---------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_COMPILER, reason="tessc.compiler is not available yet")
def test_cpu_target_matches_reference_and_caches():
    scale = np.array([1.0, -2.0, 0.5, 3.0, 1.5])  # captured as an extra input

    def f(x, w, b):
        h = (x @ w + b).relu() * scale
        return (h - h.mean(dim=1, keepdim=True)).tanh().sum(dim=0), h.max()

    args = data(4, 3), data(3, 5), data(5)
    cpu = ts.jit(f)
    assert cpu.target == "cpu"
    result = cpu(*args)
    expected = run(f, *args)
    for actual, want in zip(result, expected, strict=True):
        assert_close(actual, want)
    cpu(*args)
    assert cpu.trace_count == 1 and len(cpu._compiled) == 1


@pytest.mark.skipif(not HAS_COMPILER, reason="tessc.compiler is not available yet")
@pytest.mark.parametrize("stage", ["fused", "buffers", "loops", "numba"])
def test_ir_at_every_stage(stage):
    @ts.jit
    def f(x):
        return (x * 2).exp()

    text = f.ir(data(3, 4), stage=stage)
    assert text.strip()
    assert " = tess." not in text  # no tess op is left


def test_steady_state_calls_still_retrace_and_check_on_any_change():
    """Repeated calls take `JitFunction`'s fast path; any change of structure, shape,
    dtype, static value, keyword or leaf type must still reach the full path."""

    @ts.jit(target="reference")
    def step(params, x, scale):
        return {k: w * scale + x.sum() for k, w in params.items()}, x * 2.0

    params = {"b": data(3), "a": data(3)}
    x = data(2, 3)
    for _ in range(5):
        out, doubled = step(params, x, 0.5)
    assert step.trace_count == 1
    assert_close(out["a"], params["a"] * 0.5 + x.sum())
    assert_close(doubled, 2 * x)
    step({"a": data(4), "b": data(3)}, x, 0.5)  # a new leaf shape
    assert step.trace_count == 2
    step(params, x, 0.5)  # cached
    step({"a": data(3), "c": data(3)}, x, 0.5)  # same size, other keys
    assert step.trace_count == 3
    wide = {k: w.astype(np.float64) for k, w in params.items()}
    step(wide, x.astype(np.float64), 0.5)  # a new dtype
    step(params, x, 2)  # an int static: another signature
    assert step.trace_count == 5
    step(params, x, scale=0.5)  # a keyword: full path, same signature
    step(params, np.asfortranarray(x), 0.5)  # not C-contiguous: copied, same signature
    assert_close(step(params, x[:, ::-1], 0.5)[1], 2 * x[:, ::-1])
    assert step.trace_count == 5
    with pytest.raises(TypeError, match="argument `x` has dtype uint8"):
        step(params, np.ones((2, 3), np.uint8), 0.5)
    with pytest.raises(TypeError, match="neither an array nor hashable"):
        step(params, x, {0.5})


@pytest.mark.skipif(not HAS_COMPILER, reason="tessc.compiler is not available yet")
def test_executable_checks_inputs_after_many_good_calls():
    from tessc.compiler import compile_module

    traced = ts.jit(lambda x, y: x + y).trace(data(2, 3), data(3))
    run_compiled = compile_module(traced.module, traced.entry, "cpu")
    x, y = data(2, 3), data(3)
    for _ in range(3):
        assert_close(run_compiled(x, y)[0], x + y)
    assert_close(run_compiled(np.asfortranarray(x), y)[0], x + y)
    with pytest.raises(ValueError, match=r"input 0 \('x'\) has shape \(3,2\), expected \(2,3\)"):
        run_compiled(data(3, 2), y)
    with pytest.raises(ValueError, match=r"input 1 \('y'\) has dtype float64, expected float32"):
        run_compiled(x, y.astype(np.float64))
    with pytest.raises(ValueError, match="takes 2 inputs, got 1"):
        run_compiled(x)
