"""TessBuilder: the ops it emits, the shapes it infers, and the errors it raises."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import Float64Type, TensorType, f32, f64, i64
from xdsl.ir import SSAValue

from tessc.dialects import tess
from tessc.dialects.builder import TessBuilder, build_function, build_module
from tessc.dialects.builder_types import (
    TessError,
    element_type,
    normalize_dims,
    numpy_dtype,
    shape_of,
    tensor_type,
)
from tessc.reference import interpret


def build(shapes, body, dtype="f32", name="f"):
    """A verified module with one function `name` over inputs of `shapes`."""
    types = [tensor_type(s, dtype) for s in shapes]
    return build_module(build_function(name, types, body))


def ops_of(module):
    return [op for op in module.walk() if op.name.startswith("tess.")]


def run(module, *arrays, name="f"):
    return interpret(module, name, list(arrays))


# ---------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["f32", "float32", np.float32, np.dtype("float32"), f32])
def test_element_type_spellings_of_f32(spelling):
    assert element_type(spelling) == f32
    assert numpy_dtype(spelling) == np.float32


@pytest.mark.parametrize("spelling", ["f64", "float64", np.float64, float, f64])
def test_element_type_spellings_of_f64(spelling):
    assert element_type(spelling) == f64


@pytest.mark.parametrize("spelling", [np.uint8, np.int8, "bfloat"])
def test_element_type_rejects_other_dtypes(spelling):
    with pytest.raises(TessError, match="bfloat16, float16, int16, int32, int64 and bool"):
        element_type(spelling)


def test_normalize_dims():
    assert normalize_dims(None, 3) == (0, 1, 2)
    assert normalize_dims(-1, 3) == (2,)
    assert normalize_dims((2, -3), 3) == (0, 2)
    with pytest.raises(TessError, match="dim 3 is out of range for a tensor of rank 3"):
        normalize_dims(3, 3)
    with pytest.raises(TessError, match="name a dim twice"):
        normalize_dims((1, -2), 3)


# ---------------------------------------------------------------------------------------
# ops and inferred types
# ---------------------------------------------------------------------------------------

UNARY = {
    "neg": tess.NegOp,
    "exp": tess.ExpOp,
    "log": tess.LogOp,
    "relu": tess.ReluOp,
    "sigmoid": tess.SigmoidOp,
    "tanh": tess.TanhOp,
    "sqrt": tess.SqrtOp,
    "reciprocal": tess.ReciprocalOp,
    "abs": tess.AbsOp,
}
BINARY = {
    "add": tess.AddOp,
    "sub": tess.SubOp,
    "mul": tess.MulOp,
    "div": tess.DivOp,
    "pow": tess.PowOp,
    "maximum": tess.MaxOp,
    "minimum": tess.MinOp,
    "lt": tess.LtOp,
    "gt": tess.GtOp,
    "eq": tess.EqOp,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op(name):
    module = build([(2, 3)], lambda b, x: getattr(b, name)(x), dtype="f64")
    [op] = ops_of(module)
    assert isinstance(op, UNARY[name])
    assert op.results[0].type == TensorType(f64, [2, 3])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_broadcasts(name):
    module = build([(3, 1), (4,)], lambda b, x, y: getattr(b, name)(x, y))
    [op] = ops_of(module)
    assert isinstance(op, BINARY[name])
    assert shape_of(op.results[0]) == (3, 4)


def test_max_and_min_are_the_elementwise_ops():
    assert TessBuilder.max is TessBuilder.maximum
    assert TessBuilder.min is TessBuilder.minimum


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_a_number_becomes_a_rank0_fill_of_the_other_operands_dtype(dtype):
    module = build([(2, 3)], lambda b, x: b.sub(1.5, x), dtype=dtype)
    fill, sub = ops_of(module)
    assert isinstance(fill, tess.FillOp) and fill.fill_value == 1.5
    assert fill.results[0].type == TensorType(element_type(dtype), [])
    assert isinstance(sub, tess.SubOp)
    assert sub.lhs == fill.results[0]  # operand order is kept: 1.5 - x
    x = np.arange(6, dtype=numpy_dtype(dtype)).reshape(2, 3)
    (result,) = run(module, x)
    np.testing.assert_array_equal(result, 1.5 - x)
    assert result.dtype == x.dtype


@pytest.mark.parametrize(
    ("method", "dims", "keepdim", "shape"),
    [
        ("sum", None, False, ()),
        ("sum", 1, False, (2, 4)),
        ("mean", (0, -1), True, (1, 3, 1)),
        ("reduce_max", -2, False, (2, 4)),
    ],
)
def test_reductions(method, dims, keepdim, shape):
    module = build([(2, 3, 4)], lambda b, x: getattr(b, method)(x, dims, keepdim))
    [op] = ops_of(module)
    assert shape_of(op.results[0]) == shape
    assert op.keeps_dims == keepdim


def test_reduce_min_is_negated_reduce_max():
    module = build([(2, 3)], lambda b, x: b.reduce_min(x, 1))
    assert [op.name for op in ops_of(module)] == ["tess.neg", "tess.reduce_max", "tess.neg"]
    x = np.array([[3, -1, 2], [0, 5, 4]], np.float32)
    np.testing.assert_array_equal(run(module, x)[0], x.min(1))


def test_shape_ops():
    def body(b, x):
        r = b.reshape(x, (3, -1))
        p = b.permute(r, (1, 0))
        t = b.transpose(p)
        u = b.unsqueeze(t, -1)
        return b.broadcast_to(u, (2, 3, 8, 5))

    module = build([(2, 12)], body)
    shapes = [shape_of(op.results[0]) for op in ops_of(module)]
    assert shapes == [(3, 8), (8, 3), (3, 8), (3, 8, 1), (2, 3, 8, 5)]
    permute = ops_of(module)[1]
    assert permute.permutation == (1, 0)


def test_select_and_matmul():
    def body(b, c, x, y):
        return b.select(c, b.matmul(x, y), 0.0)

    module = build([(1, 5), (2, 4, 3), (3, 5)], body)
    *_, select = ops_of(module)
    assert isinstance(select, tess.SelectOp)
    assert shape_of(select.results[0]) == (2, 4, 5)
    c = np.array([[1, 0, 1, 0, 0]], np.float32)
    x = np.ones((2, 4, 3), np.float32)
    y = np.ones((3, 5), np.float32)
    np.testing.assert_array_equal(run(module, c, x, y)[0], np.where(c != 0, x @ y, 0.0))


def test_comparisons_with_nan():
    def body(b, x, y):
        return b.le(x, y), b.ge(x, y), b.ne(x, y)

    module = build([(4,), (4,)], body)
    x = np.array([1, 2, np.nan, 3], np.float32)
    y = np.array([2, 2, 1, np.nan], np.float32)
    le, ge, ne = run(module, x, y)
    np.testing.assert_array_equal(le, (x <= y).astype(np.float32))
    np.testing.assert_array_equal(ge, (x >= y).astype(np.float32))
    np.testing.assert_array_equal(ne, (x != y).astype(np.float32))


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ((2, 3, 4), (3, 1), lambda x: x.sum(0).sum(1, keepdims=True)),
        ((2, 3, 4), (1, 3, 4), lambda x: x.sum(0, keepdims=True)),
        ((2, 3, 4), (4,), lambda x: x.sum((0, 1))),
        ((3, 4), (3, 4), lambda x: x),
    ],
)
def test_sum_to_shape_undoes_a_broadcast(source, target, expected):
    module = build([source], lambda b, x: b.sum_to_shape(x, target))
    x = np.random.default_rng(0).standard_normal(source).astype(np.float32)
    result = run(module, x)[0]
    assert result.shape == target
    np.testing.assert_allclose(result, expected(x), rtol=1e-5)


def test_sum_to_shape_rejects_a_shape_that_does_not_broadcast():
    fails([(2, 3)], lambda b, x: b.sum_to_shape(x, (4,)), r"\(4\) does not broadcast to \(2,3\)")


def test_build_function_names_arguments_and_returns_several_results():
    fn = build_function(
        "two",
        [tensor_type((3,)), tensor_type((3,))],
        lambda b, x, y: (b.add(x, y), b.exp(x)),
        arg_names=["x", "y"],
    )
    assert isinstance(fn, func.FuncOp)
    assert [arg.name_hint for arg in fn.body.block.args] == ["x", "y"]
    assert len(fn.function_type.outputs.data) == 2
    text = str(build_module(fn))
    assert "func.func @two(%x: tensor<3xf32>, %y: tensor<3xf32>)" in text


def test_builder_inserts_at_its_insertion_point():
    def body(b, x):
        return b.exp(x)

    module = build([(3,)], body)
    exp = ops_of(module)[0]
    builder = TessBuilder.before(exp)
    neg = builder.neg(exp.operands[0])
    assert isinstance(neg, SSAValue)
    assert [op.name for op in ops_of(module)] == ["tess.neg", "tess.exp"]


# ---------------------------------------------------------------------------------------
# errors in the user's terms
# ---------------------------------------------------------------------------------------


def fails(shapes, body, message, dtypes=None):
    dtypes = dtypes or ["f32"] * len(shapes)
    types = [tensor_type(s, d) for s, d in zip(shapes, dtypes, strict=True)]
    with pytest.raises(TessError, match=message):
        build_function("f", types, body)


def test_broadcast_error_names_both_shapes():
    fails(
        [(3, 4, 1), (3, 5)], lambda b, x, y: b.add(x, y), r"cannot broadcast \(3,4,1\) with \(3,5\)"
    )


def test_select_broadcast_error():
    fails(
        [(3,), (4,), (3,)],
        lambda b, c, x, y: b.select(c, x, y),
        r"cannot broadcast \(3\) with \(4\)",
    )


def test_dtypes_promote_as_in_numpy():
    cases = [(("f32", "f64"), f64), (("i32", "f32"), f32), (("i1", "i64"), i64)]
    for (a, b), expected in cases:

        def body(builder, x, y):
            return builder.mul(x, y)

        function = build_function("f", [tensor_type((3,), a), tensor_type((3,), b)], body)
        assert function.function_type.outputs.data[0].element_type == expected


def test_matmul_errors():
    fails([(3, 4), (5, 6)], lambda b, x, y: b.matmul(x, y), r"\(3,4\) and \(5,6\) \(4 != 5\)")
    fails([(3,), (4, 2)], lambda b, x, y: b.matmul(x, y), r"\(3\) and \(4,2\) \(3 != 4\)")
    fails([(), (4, 2)], lambda b, x, y: b.matmul(x, y), "rank >= 1")


def test_reshape_errors():
    fails([(3, 4)], lambda b, x: b.reshape(x, (5, 2)), r"cannot reshape \(3,4\) \(12 elements\)")
    fails([(3, 4)], lambda b, x: b.reshape(x, (5, -1)), r"cannot reshape \(3,4\)")
    fails([(3, 4)], lambda b, x: b.reshape(x, (-1, -1)), "invalid reshape target")


def test_permute_and_transpose_errors():
    fails([(3, 4)], lambda b, x: b.permute(x, (0, 0)), "not a permutation of the 2 dims")
    fails([(3,)], lambda b, x: b.transpose(x), "out of range")


def test_broadcast_to_error():
    fails([(3, 4)], lambda b, x: b.broadcast_to(x, (5, 4)), r"cannot broadcast \(3,4\) to \(5,4\)")


def test_reduction_dim_error():
    fails([(3, 4)], lambda b, x: b.sum(x, 2), "dim 2 is out of range")


def test_number_only_operands_are_rejected():
    fails([(3,)], lambda b, x: b.add(1.0, 2.0), "at least one operand must be a tensor")


def test_element_types_are_checked_by_the_dialect_too():
    module = build([(3,)], lambda b, x: b.exp(x), dtype="f64")
    assert isinstance(ops_of(module)[0].results[0].type.element_type, Float64Type)
