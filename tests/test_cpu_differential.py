"""
The cpu pipelines against the reference interpreter: every tess op, composites, random
programs, in f32 and f64, on hypothesis-drawn shapes.

Examples are derandomized: the same programs every run, so the on-disk kernel cache
(tests/conftest.py) makes a second run of this file compile nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from tessc.compiler import STAGES, compile_module, lower
from tessc.dialects import tess
from tessc.dialects.builder import TessBuilder, build_function, build_module
from tessc.pipelines import get_pipeline
from tessc.reference import interpret, parse_module

from helpers import (
    assert_results_match,
    broadcastable_pair,
    broadcastable_triple,
    build_single_op_module,
    compiled_examples,
    matmul_shapes,
    random_inputs,
    random_program,
    reduce_dims,
    shapes,
    tensor_type,
)

DTYPES = ["f32", "f64"]
NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64}
POSITIVE_INPUTS = {"log", "sqrt", "reciprocal", "div", "pow"}


def entry(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def check(
    module: ModuleOp,
    *,
    positive: bool = False,
    pipelines: tuple[str, ...] = ("cpu",),
    seed: int = 0,
    **codegen: int,
) -> None:
    """Run `module`'s function through each pipeline and the reference on the same inputs."""
    function = entry(module)
    name = function.sym_name.data
    args = random_inputs(function, seed, positive=positive)
    expected = interpret(module, name, args)
    for pipeline in pipelines:
        actual = compile_module(module, name, pipeline, **codegen)(*args)
        assert_results_match(actual, expected)


def single_op(name: str, shapes_: list[tuple[int, ...]], dtype: str, **props: object) -> ModuleOp:
    return build_single_op_module(name, [tensor_type(s, dtype) for s in shapes_], **props)


# ---------------------------------------------------------------------------------------
# every op
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [op.name.removeprefix("tess.") for op in tess.UNARY_OPS])
@given(shape=shapes(0, 3, 5))
@compiled_examples(2)
def test_unary(op: str, dtype: str, shape: tuple[int, ...]) -> None:
    check(single_op(op, [shape], dtype), positive=op in POSITIVE_INPUTS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [op.name.removeprefix("tess.") for op in tess.BINARY_OPS])
@given(pair=broadcastable_pair(0, 3, 4))
@compiled_examples(2)
def test_binary(op: str, dtype: str, pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    check(single_op(op, list(pair), dtype), positive=op in POSITIVE_INPUTS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [op.name.removeprefix("tess.") for op in tess.REDUCE_OPS])
@given(data=st.data())
@compiled_examples(3)
def test_reduce(op: str, dtype: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(1, 3, 5), label="shape")
    dims = data.draw(reduce_dims(shape, min_size=1), label="dims")
    keepdim = data.draw(st.booleans(), label="keepdim")
    check(single_op(op, [shape], dtype, dims=list(dims), keepdim=keepdim))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
@compiled_examples(3)
def test_reshape(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(0, 3, 4), label="shape")
    size = int(np.prod(shape))
    targets = [(size,), (1, size), (size, 1)] + ([()] if size == 1 else [])
    target = data.draw(st.sampled_from(targets), label="target")
    check(single_op("reshape", [shape], dtype, shape=target))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
@compiled_examples(3)
def test_permute(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(2, 3, 4), label="shape")
    dims = data.draw(st.permutations(range(len(shape))), label="dims")
    check(single_op("permute", [shape], dtype, dims=list(dims)))


@pytest.mark.parametrize("dtype", DTYPES)
@given(pair=broadcastable_pair(0, 3, 4))
@compiled_examples(3)
def test_broadcast_to(dtype: str, pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    source, other = pair
    target = tess.broadcast_shapes(source, other)
    check(single_op("broadcast_to", [source], dtype, shape=target))


@pytest.mark.parametrize("dtype", DTYPES)
@given(shape=shapes(0, 3, 4), value=st.sampled_from([0.0, -1.5, 3.25]))
@compiled_examples(2)
def test_fill(dtype: str, shape: tuple[int, ...], value: float) -> None:
    check(single_op("fill", [], dtype, value=value, type=(shape, dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
@given(triple=broadcastable_triple(0, 3, 4))
@compiled_examples(3)
def test_select(dtype: str, triple: tuple[tuple[int, ...], ...]) -> None:
    check(single_op("select", list(triple), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@given(pair=matmul_shapes(max_batch_rank=1, max_side=5))
@compiled_examples(4)
def test_matmul(dtype: str, pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    check(single_op("matmul", list(pair), dtype))


# ---------------------------------------------------------------------------------------
# composites, through both cpu pipelines, serial and parallel
# ---------------------------------------------------------------------------------------

BOTH = ("cpu", "cpu-unfused")
# Pairwise rather than the full product: each dtype and each threshold is covered once, as f32
# on the parallel kernels and f64 on the serial ones, which halves the compiles.
DTYPE_AND_THRESHOLD = pytest.mark.parametrize(
    ("dtype", "parallel_threshold"),
    [("f32", 0), ("f64", 1 << 30)],
    ids=["f32-parallel", "f64-serial"],
)


def mlp_module(batch: int, features: int, hidden: int, classes: int, dtype: str) -> ModuleOp:
    """Two dense layers with relu, then a softmax over the classes."""
    t = lambda *shape: f"tensor<{'x'.join(map(str, shape))}x{dtype}>"  # noqa: E731
    return parse_module(
        f"""
func.func @mlp(%x: {t(batch, features)}, %w1: {t(features, hidden)}, %b1: {t(hidden)},
               %w2: {t(hidden, classes)}, %b2: {t(classes)}) -> {t(batch, classes)} {{
  %0 = tess.matmul %x, %w1 : {t(batch, features)}, {t(features, hidden)} -> {t(batch, hidden)}
  %1 = tess.add %0, %b1 : {t(batch, hidden)}, {t(hidden)} -> {t(batch, hidden)}
  %2 = tess.relu %1 : {t(batch, hidden)}
  %3 = tess.matmul %2, %w2 : {t(batch, hidden)}, {t(hidden, classes)} -> {t(batch, classes)}
  %4 = tess.add %3, %b2 : {t(batch, classes)}, {t(classes)} -> {t(batch, classes)}
  %m = tess.reduce_max %4 dims = [1] keepdim : {t(batch, classes)} -> {t(batch, 1)}
  %5 = tess.sub %4, %m : {t(batch, classes)}, {t(batch, 1)} -> {t(batch, classes)}
  %6 = tess.exp %5 : {t(batch, classes)}
  %s = tess.sum %6 dims = [1] keepdim : {t(batch, classes)} -> {t(batch, 1)}
  %7 = tess.div %6, %s : {t(batch, classes)}, {t(batch, 1)} -> {t(batch, classes)}
  func.return %7 : {t(batch, classes)}
}}
"""
    )


@DTYPE_AND_THRESHOLD
@given(sizes=st.tuples(*(st.integers(1, 9) for _ in range(4))))
@compiled_examples(2)
def test_mlp_forward(dtype: str, parallel_threshold: int, sizes: tuple[int, ...]) -> None:
    module = mlp_module(*sizes, dtype)
    check(module, pipelines=BOTH, parallel_threshold=parallel_threshold)


def softmax_module(shape: tuple[int, ...], dim: int, dtype: str) -> ModuleOp:
    def softmax(b: TessBuilder, x: SSAValue) -> SSAValue:
        e = b.exp(b.sub(x, b.reduce_max(x, dim, keepdim=True)))
        return b.div(e, b.sum(e, dim, keepdim=True))

    return build_module(build_function("softmax", [tensor_type(shape, dtype)], softmax))


@DTYPE_AND_THRESHOLD
@given(data=st.data())
@compiled_examples(2)
def test_softmax(dtype: str, parallel_threshold: int, data: st.DataObject) -> None:
    shape = data.draw(shapes(1, 3, 6), label="shape")
    dim = data.draw(st.integers(0, len(shape) - 1), label="dim")
    check(softmax_module(shape, dim, dtype), pipelines=BOTH, parallel_threshold=parallel_threshold)


def broadcast_expression_module(
    x: tuple[int, ...], w: tuple[int, ...], b: tuple[int, ...], dtype: str
) -> ModuleOp:
    """relu(x * w + b) * sigmoid(x) - 0.5 * x, every operand of its own broadcast shape."""

    def expression(t: TessBuilder, x: SSAValue, w: SSAValue, b: SSAValue) -> SSAValue:
        return t.sub(t.mul(t.relu(t.add(t.mul(x, w), b)), t.sigmoid(x)), t.mul(0.5, x))

    types = [tensor_type(shape, dtype) for shape in (x, w, b)]
    return build_module(build_function("expr", types, expression))


@DTYPE_AND_THRESHOLD
@given(triple=broadcastable_triple(1, 4, 5))
@compiled_examples(3)
def test_broadcast_heavy_expression(
    dtype: str, parallel_threshold: int, triple: tuple[tuple[int, ...], ...]
) -> None:
    module = broadcast_expression_module(*triple, dtype)
    check(module, pipelines=BOTH, parallel_threshold=parallel_threshold)


@given(program=random_program(max_ops=6))
@compiled_examples(8)
def test_random_programs(program: tuple[ModuleOp, str]) -> None:
    module, _ = program
    check(module, pipelines=("cpu",), parallel_threshold=0)


# Fewer examples for the other pipelines: tests/test_fuzz.py runs random programs through
# every pipeline as well.
@pytest.mark.parametrize("pipeline", ["cpu-unfused", "cpu-basic"])
@given(program=random_program(max_ops=6))
@compiled_examples(4)
def test_random_programs_other_pipelines(pipeline: str, program: tuple[ModuleOp, str]) -> None:
    module, _ = program
    check(module, pipelines=(pipeline,), parallel_threshold=0)


def test_large_parallel_elementwise_and_reduction() -> None:
    """Shapes above the default parallel threshold, with the default codegen options."""
    module = broadcast_expression_module((256, 1), (1, 300), (300,), "f32")
    check(module, pipelines=BOTH)
    check(softmax_module((300, 257), 1, "f32"), pipelines=BOTH)


# ---------------------------------------------------------------------------------------
# tessc.compiler and tessc.pipelines
# ---------------------------------------------------------------------------------------

LAYER = """
func.func @layer(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %b: tensor<5xf32>)
    -> tensor<4x5xf32> {
  %0 = tess.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %1 = tess.add %0, %b : tensor<4x5xf32>, tensor<5xf32> -> tensor<4x5xf32>
  %2 = tess.relu %1 : tensor<4x5xf32>
  func.return %2 : tensor<4x5xf32>
}
"""


@pytest.mark.parametrize(
    ("stage", "present", "absent"),
    [
        ("tess", "tess.matmul %", "linalg"),
        ("fused", "linalg.generic", "tess.matmul %"),
        ("buffers", "memref<4x5xf32>", "tensor<"),
        ("loops", "scf.parallel", "linalg"),
        ("numba", "@njit(", "func.func"),
    ],
)
def test_lower_prints_each_stage(stage: str, present: str, absent: str) -> None:
    module = parse_module(LAYER)
    before = str(module)
    text = lower(module, stage)
    assert present in text and absent not in text
    assert str(module) == before  # lowering works on a copy


def test_pipelines_reach_every_stage_in_order() -> None:
    assert STAGES == ("tess", "fused", "buffers", "loops", "numba")
    cpu = get_pipeline("cpu")
    assert cpu.passes_to("tess") == ""
    assert cpu.passes_to("fused").startswith("dce,tess-widen-narrow,tess-to-linalg,tess-fuse")
    assert cpu.spec.startswith(cpu.passes_to("buffers"))
    assert "tess-fuse" not in get_pipeline("cpu-unfused").spec
    with pytest.raises(ValueError, match="unknown pipeline 'gpu'"):
        get_pipeline("gpu")
    with pytest.raises(ValueError, match="unknown stage 'bytes'"):
        lower(parse_module(LAYER), "bytes")
    with pytest.raises(ValueError, match="does not reach stage 'loops'"):
        get_pipeline("reference").passes_to("loops")


def test_compile_module_checks_the_entry_and_targets() -> None:
    module = parse_module(LAYER)
    with pytest.raises(ValueError, match=r"no function '@dense'.*layer"):
        compile_module(module, "dense")
    with pytest.raises(ValueError, match="unknown pipeline"):
        compile_module(module, "layer", "tpu")
    args = random_inputs(entry(module), 0)
    expected = compile_module(module, "layer", "reference")(*args)
    assert_results_match(compile_module(module, "layer", "cpu")(*args), expected)
