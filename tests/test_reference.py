"""The reference interpreter against independent NumPy computations, and tests/helpers."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.utils.exceptions import VerifyException

from tessc.dialects import tess
from tessc.dialects.tess import broadcast_shapes, reduced_shape
from tessc.reference import (
    find_func,
    interpret,
    interpret_text,
    parse_module,
    shape_and_dtype,
)

from helpers import (
    assert_allclose_by_dtype,
    assert_results_match,
    broadcastable_pair,
    broadcastable_triple,
    build_single_op_module,
    matmul_shapes,
    random_inputs,
    random_program,
    reduce_dims,
    shapes,
    tensor_type,
)

FAST = settings(max_examples=30, deadline=None)
DTYPES = [np.float32, np.float64]


def run_op(op_name: str, *arrays: np.ndarray, **props: object) -> np.ndarray:
    """Interpret a func holding only `tess.<op_name>` on `arrays`."""
    types = [tensor_type(a.shape, a.dtype) for a in arrays]
    module = build_single_op_module(op_name, types, **props)
    (result,) = interpret(module, "main", arrays)
    return result


def draw_array(data: st.DataObject, shape: tuple[int, ...], dtype: type, seed_label: str):
    seed = data.draw(st.integers(0, 2**32 - 1), label=seed_label)
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(dtype)


def expand(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Broadcast by hand: pad leading 1s, then repeat every size-1 dim (no NumPy rules)."""
    x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    for axis, size in enumerate(shape):
        if x.shape[axis] == 1 and size != 1:
            x = np.repeat(x, size, axis=axis)
    assert x.shape == shape
    return x


# ---------------------------------------------------------------------------------------
# maps
# ---------------------------------------------------------------------------------------

UNARY_EXPECTED: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": lambda x: 0.0 - x,
    "exp": lambda x: np.e**x,
    "log": np.log,
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(x / 2.0)),
    "tanh": lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1),
    "sqrt": lambda x: x**0.5,
    "reciprocal": lambda x: x**-1.0,
    "abs": lambda x: np.where(x < 0, -x, x),
}
NEEDS_POSITIVE = {"log", "sqrt", "reciprocal"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY_EXPECTED))
@FAST
@given(shape=shapes(), data=st.data())
def test_unary(name: str, dtype: type, shape: tuple[int, ...], data: st.DataObject) -> None:
    x = draw_array(data, shape, dtype, "x")
    if name in NEEDS_POSITIVE:
        x = np.abs(x) + dtype(0.5)
    result = run_op(name, x)
    expected = UNARY_EXPECTED[name](x.astype(np.float64)).astype(dtype)
    assert_allclose_by_dtype(result, expected)


def test_unary_special_values() -> None:
    x = np.array([-np.inf, -1.0, 0.0, np.nan, np.inf], dtype=np.float32)
    np.testing.assert_array_equal(run_op("relu", x), [0, 0, 0, np.nan, np.inf])
    np.testing.assert_array_equal(run_op("log", x), [np.nan, np.nan, -np.inf, np.nan, np.inf])
    sigmoid = np.array([0, 1 / (1 + np.e), 0.5, np.nan, 1], np.float32)
    assert_allclose_by_dtype(run_op("sigmoid", x), sigmoid)
    np.testing.assert_array_equal(run_op("reciprocal", x), [-0.0, -1, np.inf, np.nan, 0])


# ---------------------------------------------------------------------------------------
# zips
# ---------------------------------------------------------------------------------------

BINARY_EXPECTED: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: np.where(a >= b, a, b),
    "min": lambda a, b: np.where(a <= b, a, b),
    "pow": lambda a, b: np.exp(b * np.log(a)),
    "lt": lambda a, b: np.where(a < b, 1.0, 0.0),
    "gt": lambda a, b: np.where(a > b, 1.0, 0.0),
    "eq": lambda a, b: np.where(a == b, 1.0, 0.0),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY_EXPECTED))
@FAST
@given(pair=broadcastable_pair(), data=st.data())
def test_binary_broadcasting(
    name: str, dtype: type, pair: tuple[tuple[int, ...], ...], data: st.DataObject
) -> None:
    lhs_shape, rhs_shape = pair
    lhs, rhs = draw_array(data, lhs_shape, dtype, "lhs"), draw_array(data, rhs_shape, dtype, "rhs")
    if name == "pow":
        lhs = np.abs(lhs) + dtype(0.5)
    if name in ("div",):
        rhs = np.abs(rhs) + dtype(0.5)
    if name in ("eq", "max", "min", "lt", "gt"):
        # Small integers make ties common, which is where these ops are interesting.
        lhs, rhs = np.round(lhs), np.round(rhs)
    result = run_op(name, lhs, rhs)
    shape = broadcast_shapes(lhs_shape, rhs_shape)
    a, b = expand(lhs.astype(np.float64), shape), expand(rhs.astype(np.float64), shape)
    assert result.shape == shape and result.dtype == dtype
    assert_allclose_by_dtype(result, BINARY_EXPECTED[name](a, b).astype(dtype))


@pytest.mark.parametrize(
    ("lhs", "rhs", "expected"),
    [
        ((3, 4, 5), (3, 1, 5), (3, 4, 5)),
        ((3, 4, 1), (3, 1, 5), (3, 4, 5)),
        ((3, 4, 1), (1, 5), (3, 4, 5)),
        ((1,), (2, 3), (2, 3)),
        ((), (2, 3), (2, 3)),
    ],
)
def test_seed_broadcast_examples(
    lhs: tuple[int, ...], rhs: tuple[int, ...], expected: tuple[int, ...]
) -> None:
    a = np.arange(int(np.prod(lhs)), dtype=np.float64).reshape(lhs)
    b = np.arange(int(np.prod(rhs)), dtype=np.float64).reshape(rhs) * 10
    result = run_op("add", a, b)
    assert result.shape == expected
    np.testing.assert_array_equal(result, expand(a, expected) + expand(b, expected))


def test_seed_broadcast_error() -> None:
    with pytest.raises(ValueError, match=r"\(3,4,1\) and \(3,5\)"):
        build_single_op_module("add", [((3, 4, 1), "f32"), ((3, 5), "f32")])
    text = """
    func.func @f(%a: tensor<3x4x1xf32>, %b: tensor<3x5xf32>) -> tensor<3x4x5xf32> {
      %c = tess.add %a, %b : tensor<3x4x1xf32>, tensor<3x5xf32> -> tensor<3x4x5xf32>
      func.return %c : tensor<3x4x5xf32>
    }"""
    with pytest.raises(VerifyException, match="not broadcastable"):
        parse_module(text)


@pytest.mark.parametrize("dtype", DTYPES)
@FAST
@given(triple=broadcastable_triple(), data=st.data())
def test_select(dtype: type, triple: tuple[tuple[int, ...], ...], data: st.DataObject) -> None:
    cond = np.round(draw_array(data, triple[0], dtype, "cond") / 2)  # -1, 0 and 1
    lhs, rhs = (draw_array(data, s, dtype, n) for s, n in zip(triple[1:], "lr", strict=True))
    result = run_op("select", cond, lhs, rhs)
    shape = broadcast_shapes(*triple)
    c, a, b = expand(cond, shape), expand(lhs, shape), expand(rhs, shape)
    expected = np.empty(shape, dtype)
    for index in np.ndindex(*shape):
        expected[index] = a[index] if c[index] != 0 else b[index]
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, expected)


# ---------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------


def reduce_by_hand(x: np.ndarray, dims: tuple[int, ...], keepdim: bool, kind: str) -> np.ndarray:
    """Move the reduced dims last, flatten them, reduce that one axis, restore the shape."""
    kept = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, kept + sorted(dims)).astype(np.float64)
    flat = moved.reshape([x.shape[d] for d in kept] + [-1])
    count = flat.shape[-1]
    if kind == "sum":
        out = np.add.reduce(flat, axis=-1)
    elif kind == "mean":
        out = np.add.reduce(flat, axis=-1) / count
    else:
        out = np.maximum.reduce(flat, axis=-1)
    return out.reshape(reduced_shape(x.shape, dims, keepdim))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("kind", ["sum", "mean", "reduce_max"])
@FAST
@given(data=st.data())
def test_reductions(kind: str, keepdim: bool, dtype: type, data: st.DataObject) -> None:
    shape = data.draw(shapes(), label="shape")
    dims = data.draw(reduce_dims(shape), label="dims")
    x = draw_array(data, shape, dtype, "x")
    result = run_op(kind, x, dims=dims, keepdim=keepdim)
    expected = reduce_by_hand(x, dims, keepdim, kind.removeprefix("reduce_")).astype(dtype)
    assert result.dtype == dtype
    assert_allclose_by_dtype(result, expected)


def test_reduction_examples() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert run_op("sum", x, dims=[1], keepdim=True).shape == (2, 1, 4)
    np.testing.assert_array_equal(run_op("sum", x, dims=[0, 2]), [6 + 54, 22 + 70, 38 + 86])
    np.testing.assert_array_equal(run_op("reduce_max", x, dims=[2, 0]), [15, 19, 23])
    np.testing.assert_array_equal(run_op("mean", x, dims=[0, 1, 2], keepdim=True), [[[11.5]]])
    assert run_op("sum", x, dims=[]).tolist() == x.tolist()


# ---------------------------------------------------------------------------------------
# shape ops and matmul
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@FAST
@given(shape=shapes(), data=st.data())
def test_reshape_is_row_major(dtype: type, shape: tuple[int, ...], data: st.DataObject) -> None:
    x = draw_array(data, shape, dtype, "x")
    size = x.size
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = data.draw(st.sampled_from(divisors), label="first")
    target = data.draw(st.sampled_from([(size,), (first, size // first), (1, size, 1)]))
    result = run_op("reshape", x, shape=target)
    expected = np.empty(target, dtype)
    for flat, index in enumerate(np.ndindex(*target)):
        expected[index] = x[np.unravel_index(flat, shape)] if shape else x
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@FAST
@given(shape=shapes(min_rank=1), data=st.data())
def test_permute(dtype: type, shape: tuple[int, ...], data: st.DataObject) -> None:
    x = draw_array(data, shape, dtype, "x")
    perm = tuple(data.draw(st.permutations(range(len(shape))), label="perm"))
    result = run_op("permute", x, dims=perm)
    assert result.shape == tuple(shape[d] for d in perm)
    for index in np.ndindex(*result.shape):
        source = [0] * len(shape)
        for out_dim, in_dim in enumerate(perm):
            source[in_dim] = index[out_dim]
        assert result[index] == x[tuple(source)]


@pytest.mark.parametrize("dtype", DTYPES)
@FAST
@given(pair=broadcastable_pair(), data=st.data())
def test_broadcast_to(dtype: type, pair: tuple[tuple[int, ...], ...], data: st.DataObject) -> None:
    source, other = pair
    target = broadcast_shapes(source, other)
    x = draw_array(data, source, dtype, "x")
    result = run_op("broadcast_to", x, shape=target)
    np.testing.assert_array_equal(result, expand(x, target))
    assert result.flags.writeable and result.flags.c_contiguous


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_fill(dtype: str) -> None:
    module = build_single_op_module("fill", [], value=-1.5, type=((2, 3), dtype))
    (result,) = interpret(module, "main", [])
    assert result.dtype == np.dtype({"f32": np.float32, "f64": np.float64}[dtype])
    np.testing.assert_array_equal(result, np.full((2, 3), -1.5))


@pytest.mark.parametrize("dtype", DTYPES)
@FAST
@given(pair=matmul_shapes(), data=st.data())
def test_matmul_batched_broadcast(
    dtype: type, pair: tuple[tuple[int, ...], ...], data: st.DataObject
) -> None:
    lhs_shape, rhs_shape = pair
    lhs, rhs = draw_array(data, lhs_shape, dtype, "lhs"), draw_array(data, rhs_shape, dtype, "rhs")
    result = run_op("matmul", lhs, rhs)
    batch = broadcast_shapes(lhs_shape[:-2], rhs_shape[:-2])
    a = expand(lhs.astype(np.float64), (*batch, *lhs_shape[-2:]))
    b = expand(rhs.astype(np.float64), (*batch, *rhs_shape[-2:]))
    n, k, m = lhs_shape[-2], lhs_shape[-1], rhs_shape[-1]
    expected = np.zeros((*batch, n, m))
    for index in itertools.product(*map(range, batch)):
        for i, j, p in itertools.product(range(n), range(m), range(k)):
            expected[(*index, i, j)] += a[(*index, i, p)] * b[(*index, p, j)]
    assert result.dtype == dtype
    assert_allclose_by_dtype(result, expected.astype(dtype))


def test_matmul_example() -> None:
    lhs = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    rhs = np.ones((4, 3, 2), dtype=np.float32)
    result = run_op("matmul", lhs, rhs)
    assert result.shape == (4, 2, 2)
    np.testing.assert_array_equal(result, np.broadcast_to([[3, 3], [12, 12]], (4, 2, 2)))


# ---------------------------------------------------------------------------------------
# programs, calls, constants, errors
# ---------------------------------------------------------------------------------------

PROGRAM = """
func.func @affine(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %y = tess.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %b = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %z = tess.add %y, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  func.return %z : tensor<2x4xf32>
}
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>)
    -> (tensor<2x4xf32>, tensor<2xf32>, tensor<2x3xf32>) {
  %z = func.call @affine(%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %r = tess.relu %z : tensor<2x4xf32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %h = tess.mul %r, %half : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %s = tess.sum %h dims = [1] : tensor<2x4xf32> -> tensor<2xf32>
  func.return %h, %s, %x : tensor<2x4xf32>, tensor<2xf32>, tensor<2x3xf32>
}
"""


def test_program_with_call_and_constants() -> None:
    x = np.array([[1, -2, 0.5], [0, 1, -1]], dtype=np.float32)
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    h, s, x_out = interpret_text(PROGRAM, "main", [x, w])
    expected_h = np.maximum(x.astype(np.float64) @ w + [1, 2, 3, 4], 0) * 0.5
    assert_allclose_by_dtype(h, expected_h.astype(np.float32))
    assert_allclose_by_dtype(s, expected_h.sum(axis=1).astype(np.float32))
    np.testing.assert_array_equal(x_out, x)
    assert x_out is not x  # results are fresh arrays, never an argument


def test_argument_errors() -> None:
    module = parse_module(PROGRAM)
    x, w = np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32)
    with pytest.raises(
        ValueError, match=r"argument 1 of @main has shape \(4,3\), expected \(3,4\)"
    ):
        interpret(module, "main", [x, w.T])
    with pytest.raises(ValueError, match="argument 0 of @main has dtype float64, expected float32"):
        interpret(module, "main", [x.astype(np.float64), w])
    with pytest.raises(ValueError, match="takes 2 arguments, got 1"):
        interpret(module, "main", [x])
    with pytest.raises(KeyError, match="no func.func @nope.*affine, main"):
        interpret(module, "nope", [x, w])


def test_declared_shape_is_checked() -> None:
    """An op whose IR result type disagrees with its semantics fails loudly, not silently."""
    module = build_single_op_module("sum", [((2, 3), "f64")], dims=[1])
    sum_op = next(op for op in find_func(module, "main").walk() if isinstance(op, tess.SumOp))
    sum_op.properties["dims"] = DenseArrayBase.from_list(i64, [0])  # now (3,), declared (2,)
    with pytest.raises(AssertionError, match=r"computed shape \(3\).*tensor<2xf64>"):
        interpret(module, "main", [np.ones((2, 3))])


def test_unknown_op_is_reported() -> None:
    text = """
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = tensor.empty() : tensor<2xf32>
      func.return %y : tensor<2xf32>
    }"""
    with pytest.raises(NotImplementedError, match="'tensor.empty'"):
        interpret_text(text, "f", [np.ones(2, np.float32)])


@settings(max_examples=50, deadline=None)
@given(program=random_program(), seed=st.integers(0, 2**16))
def test_random_programs_verify_and_stay_finite(program: tuple, seed: int) -> None:
    module, name = program
    module.verify()
    func_op = find_func(module, name)
    outputs = interpret(module, name, random_inputs(func_op, seed))
    declared = func_op.function_type.outputs.data
    assert 1 <= len(outputs) == len(declared)
    for output, typ in zip(outputs, declared, strict=True):
        assert (output.shape, output.dtype) == shape_and_dtype(typ)
        assert np.all(np.isfinite(output)), str(module)


@FAST
@given(program=random_program(min_ops=4, dtypes=("f64",)))
def test_random_program_text_round_trips(program: tuple) -> None:
    """Random programs print as IR that parses back to the same semantics."""
    module, name = program
    args = random_inputs(find_func(module, name), seed=0)
    assert_results_match(interpret_text(str(module), name, args), interpret(module, name, args))


# ---------------------------------------------------------------------------------------
# the helpers themselves
# ---------------------------------------------------------------------------------------


@FAST
@given(pair=broadcastable_pair(), triple=broadcastable_triple(), mm=matmul_shapes())
def test_shape_strategies_are_valid(pair: tuple, triple: tuple, mm: tuple) -> None:
    broadcast_shapes(*pair)
    broadcast_shapes(*triple)
    tess.matmul_shape(*mm)


@FAST
@given(data=st.data())
def test_reduce_dims_are_distinct_and_in_range(data: st.DataObject) -> None:
    shape = data.draw(shapes())
    dims = data.draw(reduce_dims(shape, min_size=1))
    assert len(set(dims)) == len(dims) and all(0 <= d < len(shape) for d in dims)
    assert len(dims) >= min(1, len(shape))


def test_random_inputs() -> None:
    module = build_single_op_module("add", [((2, 3), "f32"), ((3,), "f32")])
    func_op = find_func(module, "main")
    first, second = random_inputs(func_op, seed=7), random_inputs(func_op, seed=7)
    assert [a.shape for a in first] == [(2, 3), (3,)]
    assert all(a.dtype == np.float32 for a in first)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert all((a >= 0.5).all() for a in random_inputs(func_op, seed=1, positive=True))


def test_tolerances_by_dtype() -> None:
    x32 = np.array([1.0, 100.0], np.float32)
    assert_allclose_by_dtype(x32 * np.float32(1 + 1e-6), x32)
    with pytest.raises(AssertionError):
        assert_allclose_by_dtype(x32 * np.float32(1 + 1e-4), x32)
    with pytest.raises(AssertionError, match="dtype"):
        assert_allclose_by_dtype(x32.astype(np.float64), x32)
    x64 = x32.astype(np.float64)
    with pytest.raises(AssertionError):
        assert_allclose_by_dtype(x64 * (1 + 1e-9), x64)
    with pytest.raises(AssertionError, match="shape"):
        assert_allclose_by_dtype(x64[:1], x64)


@pytest.mark.parametrize("op_class", list(tess.Tess.operations), ids=lambda c: c.name)
def test_every_tess_op_has_an_implementation(op_class: type) -> None:
    from tessc.reference import OP_IMPLEMENTATIONS

    assert op_class in OP_IMPLEMENTATIONS


ELEMENTWISE_OPS = {c.name for c in (*tess.UNARY_OPS, *tess.BINARY_OPS)} | {"tess.fill"}


@FAST
@given(program=random_program(kinds=("unary", "binary"), comparisons=False))
def test_random_program_kinds_restrict_the_ops(program: tuple) -> None:
    module, name = program
    names = {op.name for op in find_func(module, name).body.block.ops} - {"func.return"}
    assert names <= ELEMENTWISE_OPS - {"tess.lt", "tess.gt", "tess.eq"}


@FAST
@given(program=random_program(min_ops=1, max_ops=1, kinds=("matmul",), max_inputs=4))
def test_random_program_matmul_only(program: tuple) -> None:
    module, name = program
    assert any(isinstance(op, tess.MatmulOp) for op in find_func(module, name).walk())


def test_random_program_rejects_unknown_kinds() -> None:
    @given(random_program(kinds=("conv",)))
    def draw_one(program: tuple) -> None:
        pass

    with pytest.raises(ValueError, match="step kinds"):
        draw_one()
