"""
`tess-fuse`: differential tests (fused vs unfused linalg, and both vs the tess oracle),
kernel counts, and the fusion rules (no recomputation, multi-output, reports).

The linalg-on-tensors level is executed by a small NumPy evaluator below: it walks a
`linalg.generic`'s iteration space with `numpy.ndindex` and evaluates the scalar body op by
op in the element dtype. It is slow and obviously correct, which is what an oracle for
tiny shapes should be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.arith import CMPF_COMPARISON_OPERATIONS
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Operation, SSAValue

from tessc.context import make_context
from tessc.dialects import tess as tess_dialect
from tessc.dialects.tess import PatternKind
from tessc.lowering.fusion.fuse import TessFusePass
from tessc.lowering.fusion.fuse_plan import FusionPolicy, plan_fusion
from tessc.lowering.linalg.generic_analysis import pattern_kind
from tessc.reference import interpret, numpy_dtype, parse_module, shape_and_dtype

from helpers import assert_results_match, build_single_op_module, random_inputs, random_program

# ---------------------------------------------------------------------------------------
# a NumPy evaluator of linalg on tensors
# ---------------------------------------------------------------------------------------

_CMPF: dict[str, Callable[[Any, Any], bool]] = {
    "false": lambda a, b: False,
    "oeq": lambda a, b: a == b,
    "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b,
    "olt": lambda a, b: a < b,
    "ole": lambda a, b: a <= b,
    "one": lambda a, b: a != b and not (np.isnan(a) or np.isnan(b)),
    "ord": lambda a, b: not (np.isnan(a) or np.isnan(b)),
    "ueq": lambda a, b: a == b or np.isnan(a) or np.isnan(b),
    "ugt": lambda a, b: not a <= b,
    "uge": lambda a, b: not a < b,
    "ult": lambda a, b: not a >= b,
    "ule": lambda a, b: not a > b,
    "une": lambda a, b: not a == b,
    "uno": lambda a, b: np.isnan(a) or np.isnan(b),
    "true": lambda a, b: True,
}

_SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: a / b,
    "arith.negf": lambda a: -a,
    "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.select": lambda c, a, b: a if c else b,
    "math.exp": np.exp,
    "math.log": np.log,
    "math.tanh": np.tanh,
    "math.sqrt": np.sqrt,
    "math.absf": np.abs,
    "math.powf": np.power,
}


def _eval_body(block: Any, args: Sequence[Any]) -> list[Any]:
    env: dict[SSAValue, Any] = dict(zip(block.args, args, strict=True))
    for op in block.ops:
        if isinstance(op, YieldOp):
            return [env[v] for v in op.operands]
        if isinstance(op, arith.ConstantOp):
            assert isinstance(op.value, FloatAttr)
            env[op.result] = numpy_dtype(op.result.type).type(op.value.value.data)
        elif isinstance(op, arith.CmpfOp):
            predicate = CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            env[op.result] = bool(_CMPF[predicate](env[op.lhs], env[op.rhs]))
        else:
            env[op.results[0]] = _SCALAR_OPS[op.name](*(env[v] for v in op.operands))
    raise AssertionError("body without linalg.yield")


def _run_generic(op: GenericOp, ins: list[np.ndarray], outs: list[np.ndarray]):
    maps = [m.data for m in op.indexing_maps]
    arrays = [*ins, *(o.copy() for o in outs)]
    for point in np.ndindex(*op.get_static_loop_ranges()):
        scalars = [a[m.eval(point, ())] for a, m in zip(arrays, maps, strict=True)]
        results = _eval_body(op.body.block, scalars)
        for out, m, value in zip(arrays[len(ins) :], maps[len(ins) :], results, strict=True):
            out[m.eval(point, ())] = value
    return arrays[len(ins) :]


def _run_op(op: Operation, operands: list[np.ndarray]) -> list[np.ndarray]:
    if isinstance(op, GenericOp):
        return _run_generic(op, operands[: len(op.inputs)], operands[len(op.inputs) :])
    shape, dtype = shape_and_dtype(op.results[0].type)
    if isinstance(op, tensor.EmptyOp):
        return [np.full(shape, np.nan, dtype)]  # reading an uninitialised tensor shows
    if isinstance(op, FillOp):
        return [np.full(shape, operands[0], dtype)]
    if isinstance(op, tensor.CollapseShapeOp | tensor.ExpandShapeOp):
        return [operands[0].reshape(shape)]
    if isinstance(op, arith.ConstantOp):
        if isinstance(op.value, DenseIntOrFPElementsAttr):
            values = np.asarray(op.value.get_values(), dtype)
            return [np.broadcast_to(values.reshape(()) if values.size == 1 else values, shape)]
        assert isinstance(op.value, FloatAttr)
        return [dtype.type(op.value.value.data)]
    raise NotImplementedError(op.name)


def run_linalg(module: ModuleOp, name: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Execute `func.func @name` at the linalg-on-tensors level."""
    func_op = next(
        op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == name
    )
    values: dict[SSAValue, Any] = dict(zip(func_op.body.block.args, args, strict=True))
    with np.errstate(all="ignore"):
        for op in func_op.body.block.ops:
            operands = [values[v] for v in op.operands]
            if isinstance(op, func.ReturnOp):
                return [np.asarray(v) for v in operands]
            values.update(zip(op.results, _run_op(op, operands), strict=True))
    raise AssertionError("no func.return")


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------

CTX = make_context()


def apply(module: ModuleOp, *passes: Any) -> ModuleOp:
    module = module.clone()
    for p in passes:
        p.apply(CTX, module)
    module.verify()
    return module


def to_linalg(module: ModuleOp) -> ModuleOp:
    from tessc.lowering.linalg.to_linalg import TessToLinalgPass

    return apply(module, TessToLinalgPass())


def generics(module: ModuleOp) -> list[GenericOp]:
    return [op for op in module.walk() if isinstance(op, GenericOp)]


def kernels(module: ModuleOp) -> list[GenericOp]:
    """Generics that compute something from inputs (not the constant inits of reductions)."""
    return [g for g in generics(module) if g.inputs]


def count_ops(module: ModuleOp, name: str) -> int:
    return sum(op.name == name for op in module.walk())


def check_fusion(module: ModuleOp, name: str = "f", seed: int = 0, **options: Any) -> ModuleOp:
    """Lower, fuse, and check tess oracle == unfused linalg == fused linalg on random inputs."""
    func_op = next(op for op in module.ops if isinstance(op, func.FuncOp))
    args = random_inputs(func_op, seed)
    expected = interpret(module, name, args)
    unfused = to_linalg(module)
    fused = apply(unfused, TessFusePass(**options))
    assert_results_match(run_linalg(unfused, name, args), expected)
    assert_results_match(run_linalg(fused, name, args), expected)
    return fused


def tess(text: str) -> ModuleOp:
    return parse_module(text)


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------

SEED = """
func.func @f(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %z = tess.mul %a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32> -> tensor<3x5x4xf32>
  %s = tess.sum %z dims = [1] : tensor<3x5x4xf32> -> tensor<3x4xf32>
  func.return %s : tensor<3x4xf32>
}
"""


def test_seed_zip_reduce_is_one_kernel_without_the_intermediate():
    fused = check_fusion(tess(SEED))
    assert len(kernels(fused)) == 1
    assert "tensor<3x5x4xf32>" not in str(fused)
    (kernel,) = kernels(fused)
    assert pattern_kind(kernel).name == "MATMUL"
    # The reduce's init (a generic yielding 0) is untouched: it is the kernel's outs.
    init = kernel.outputs[0].owner
    assert isinstance(init, GenericOp) and not init.inputs


def test_seed_keepdim():
    text = (
        SEED.replace("dims = [1]", "dims = [1] keepdim")
        .replace("-> tensor<3x4xf32>", "-> tensor<3x1x4xf32>")
        .replace("%s : tensor<3x4xf32>", "%s : tensor<3x1x4xf32>")
    )
    fused = check_fusion(tess(text))
    assert len(kernels(fused)) == 1 and "tensor<3x5x4xf32>" not in str(fused)


def test_elementwise_chain_with_broadcasting_is_one_kernel():
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x4xf32>, %w: tensor<4xf32>, %b: tensor<3x1xf32>)
            -> tensor<3x4xf32> {
          %m = tess.mul %x, %w : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
          %a = tess.add %m, %b : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
          %r = tess.relu %a : tensor<3x4xf32>
          %n = tess.neg %r : tensor<3x4xf32>
          func.return %n : tensor<3x4xf32>
        }""")
    )
    assert len(generics(fused)) == 1


def test_broadcast_producer_into_larger_consumer():
    # The producer is (3,1); the consumer reads it as (d0, 0) over (3,4): a cheap producer
    # is recomputed per column, which is allowed for an all-parallel consumer.
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x1xf32>, %y: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
          %n = tess.neg %x : tensor<3x1xf32>
          %a = tess.add %n, %y : tensor<3x1xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
          func.return %a : tensor<2x3x4xf32>
        }""")
    )
    assert len(generics(fused)) == 1


def test_expensive_broadcast_producer_is_not_recomputed():
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x1xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32> {
          %e = tess.exp %x : tensor<3x1xf32>
          %a = tess.add %e, %y : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
          func.return %a : tensor<3x4xf32>
        }"""),
        report=True,
    )
    assert len(generics(fused)) == 2
    refused = generics(fused)[1].attributes["tess.fusion_refused"]
    assert isinstance(refused, StringAttr) and "recomputed 4 times" in refused.data


LERP_1 = """
func.func @f(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %w: tensor<3xf32>) -> tensor<4x3xf32> {
  %d = tess.sub %b, %a : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %m = tess.mul %d, %w : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %r = tess.add %a, %m : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}"""
LERP_2 = """
func.func @f(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %w: tensor<3xf32>) -> tensor<4x3xf32> {
  %one = tess.fill 1.0 : tensor<3xf32>
  %v = tess.sub %one, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %p = tess.mul %a, %v : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %q = tess.mul %b, %w : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %r = tess.add %p, %q : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}"""


@pytest.mark.parametrize("text", [LERP_1, LERP_2], ids=["a+(b-a)*w", "a*(1-w)+b*w"])
def test_both_lerps_are_one_kernel_with_each_input_read_once(text: str):
    fused = check_fusion(tess(text))
    (kernel,) = generics(fused)
    assert len(set(kernel.inputs)) == len(kernel.inputs) == 3  # a, b, w: duplicates merged


MULTI_OUTPUT = """
func.func @f(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %e = tess.exp %x : tensor<3x4xf32>
  %s = tess.mul %e, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  func.return %s, %e : tensor<3x4xf32>, tensor<3x4xf32>
}"""


def test_multi_use_expensive_producer_becomes_multi_output():
    # `e` is both returned (a saved activation) and used: one kernel, two results.
    fused = check_fusion(
        tess(MULTI_OUTPUT),
        report=True,
    )
    (kernel,) = generics(fused)
    assert len(kernel.results) == 2
    assert count_ops(fused, "math.exp") == 1


def test_multi_use_expensive_producer_is_not_duplicated_into_reductions():
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
          %e = tess.exp %x : tensor<3x4xf32>
          %r = tess.sum %e dims = [1] : tensor<3x4xf32> -> tensor<3xf32>
          %c = tess.sum %e dims = [0] : tensor<3x4xf32> -> tensor<4xf32>
          func.return %r, %c : tensor<3xf32>, tensor<4xf32>
        }"""),
        report=True,
    )
    assert count_ops(fused, "math.exp") == 1
    assert len(kernels(fused)) == 3
    reasons = [g.attributes.get("tess.fusion_refused") for g in kernels(fused)]
    assert (
        sum(isinstance(r, StringAttr) and "2 uses and is expensive" in r.data for r in reasons) == 2
    )


def test_expensive_value_read_in_two_layouts_is_computed_once():
    # e + transpose(e): the transpose takes exp as a second output (written through the
    # transposed map); the add would need exp at two points per element, so it is refused.
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
          %e = tess.exp %x : tensor<3x3xf32>
          %t = tess.permute %e dims = [1, 0] : tensor<3x3xf32> -> tensor<3x3xf32>
          %s = tess.add %e, %t : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
          func.return %s : tensor<3x3xf32>
        }"""),
        report=True,
    )
    transpose, add = generics(fused)
    assert len(transpose.results) == 2 and count_ops(fused, "math.exp") == 1
    refused = add.attributes["tess.fusion_refused"]
    assert isinstance(refused, StringAttr) and "recomputed 2 times per element" in refused.data


def test_cheap_multi_use_producer_is_duplicated_into_all_consumers():
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
          %d = tess.sub %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
          %r = tess.sum %d dims = [1] : tensor<3x4xf32> -> tensor<3xf32>
          %c = tess.sum %d dims = [0] : tensor<3x4xf32> -> tensor<4xf32>
          func.return %r, %c : tensor<3xf32>, tensor<4xf32>
        }""")
    )
    assert len(kernels(fused)) == 2
    assert count_ops(fused, "arith.subf") == 2


def test_reduction_reads_a_contraction_operand_instead_of_recomputing_it():
    # An MLP's dh = g * (pre > 0): the weight gradient x.T @ dh materializes it, so the b1
    # gradient sums dh (one tensor) rather than recomputing it from g and pre (two).
    fused = check_fusion(
        tess("""
        func.func @f(%g: tensor<4x5xf32>, %pre: tensor<4x5xf32>, %x: tensor<4x3xf32>)
            -> (tensor<5xf32>, tensor<3x5xf32>) {
          %z = tess.fill 0.000000e+00 : tensor<1x1xf32>
          %m = tess.gt %pre, %z : tensor<4x5xf32>, tensor<1x1xf32> -> tensor<4x5xf32>
          %dh = tess.mul %g, %m : tensor<4x5xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
          %db = tess.sum %dh dims = [0] : tensor<4x5xf32> -> tensor<5xf32>
          %xt = tess.permute %x dims = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
          %dw = tess.matmul %xt, %dh : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
          func.return %db, %dw : tensor<5xf32>, tensor<3x5xf32>
        }"""),
        report=True,
    )
    assert count_ops(fused, "arith.cmpf") == 1
    refused = [g.attributes.get("tess.fusion_refused") for g in kernels(fused)]
    assert any(
        isinstance(r, StringAttr) and "materialized for a contraction" in r.data for r in refused
    )


def test_reduction_still_recomputes_a_one_input_contraction_operand():
    # exp-free, one full input: recomputing reads as much as the result would.
    fused = check_fusion(
        tess("""
        func.func @f(%g: tensor<4x5xf32>, %x: tensor<4x3xf32>) -> (tensor<5xf32>, tensor<3x5xf32>) {
          %dh = tess.relu %g : tensor<4x5xf32>
          %db = tess.sum %dh dims = [0] : tensor<4x5xf32> -> tensor<5xf32>
          %xt = tess.permute %x dims = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
          %dw = tess.matmul %xt, %dh : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
          func.return %db, %dw : tensor<5xf32>, tensor<3x5xf32>
        }""")
    )
    assert count_ops(fused, "arith.maximumf") + count_ops(fused, "arith.maxnumf") == 2


def test_shared_expensive_subexpression_written_either_way_is_one_kernel():
    # x*w + x*b and x*(w+b) with x = exp(a): one kernel each, exp computed once.
    for body in (
        "%p = tess.mul %e, %w : T, T -> T\n %q = tess.mul %e, %b : T, T -> T\n"
        "%r = tess.add %p, %q : T, T -> T",
        "%s = tess.add %w, %b : T, T -> T\n %r = tess.mul %e, %s : T, T -> T",
    ):
        text = f"""
        func.func @f(%a: T, %w: T, %b: T) -> T {{
          %e = tess.exp %a : T
          {body}
          func.return %r : T
        }}""".replace("T", "tensor<2x3xf64>")
        fused = check_fusion(tess(text))
        assert len(generics(fused)) == 1 and count_ops(fused, "math.exp") == 1


MATMUL_EPILOGUE = """
func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %n = tess.neg %x : tensor<2x3xf32>
  %m = tess.matmul %n, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %a = tess.add %m, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %r = tess.relu %a : tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}"""


def test_matmul_prologue_and_epilogue_are_refused_with_reasons():
    fused = check_fusion(tess(MATMUL_EPILOGUE), report=True)
    neg, matmul, epilogue = kernels(fused)
    assert pattern_kind(matmul).name == "MATMUL"
    refused = matmul.attributes["tess.fusion_refused"]
    assert isinstance(refused, StringAttr)
    assert "would recompute the producer 4 times per element inside a reduction" in refused.data
    refused = epilogue.attributes["tess.fusion_refused"]
    assert isinstance(refused, StringAttr) and "tess-fuse-epilogue groups them" in refused.data
    fused_ops = epilogue.attributes["tess.fused"]
    assert isinstance(fused_ops, ArrayAttr) and len(fused_ops) == 2
    assert count_ops(fused, "arith.maximumf") == 1  # bias add and relu fused together


def test_transpose_copy_fuses_into_matmul():
    # A permute is free (no arithmetic), so it folds into the matmul's operand map.
    fused = check_fusion(
        tess("""
        func.func @f(%x: tensor<3x2xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32> {
          %t = tess.permute %x dims = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
          %m = tess.matmul %t, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
          func.return %m : tensor<2x4xf32>
        }""")
    )
    assert len(kernels(fused)) == 1


def test_report_off_leaves_no_attributes():
    fused = check_fusion(tess(MATMUL_EPILOGUE))
    for g in generics(fused):
        assert not {"tess.fused", "tess.fusion_refused", "tess.kind"} & set(g.attributes)


def test_output_is_deterministic():
    module = to_linalg(tess(LERP_2))
    first = str(apply(module, TessFusePass(report=True)))
    assert first == str(apply(module, TessFusePass(report=True)))
    assert first == str(apply(parse_module(str(module)), TessFusePass(report=True)))


def test_multi_output_generic_round_trips_through_text():
    """Needs tessc.xdsl_patches: xDSL 0.74 alone cannot parse `-> (t1, t2)`."""
    module = to_linalg(tess(MULTI_OUTPUT))
    fused = apply(module, TessFusePass())
    assert len(generics(fused)[0].results) == 2
    assert str(parse_module(str(fused))) == str(fused)


def test_no_multi_output_option_refuses_instead():
    module = to_linalg(tess(MULTI_OUTPUT))
    fused = apply(module, TessFusePass(multi_output=False))
    assert len(generics(fused)) == 2
    consumer = generics(fused)[1]
    assert plan_fusion(consumer, 0, FusionPolicy(multi_output=False)) == (
        "producer has 2 uses and is expensive"
    )


HAND_WRITTEN = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant 2.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %two = linalg.fill ins(%c : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %half = arith.constant dense<0.5> : tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %s = linalg.generic {
      indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                       affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]}
      ins(%x, %two, %half : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      outs(%e1 : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %h: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %m, %h : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}
"""


def test_fill_and_splat_constant_become_scalars():
    module = parse_module(HAND_WRITTEN)
    fused = apply(module, TessFusePass())
    (kernel,) = generics(fused)
    assert len(kernel.inputs) == 1
    assert count_ops(fused, "linalg.fill") == 0
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run_linalg(fused, "f", [x])[0], x * 2 + 0.5)


# The fusion FileCheck inputs this file's linalg evaluator can run (tess-fuse-horizontal's
# use func.call and casts; its own tests run them through the cpu pipeline).
FILECHECK_INPUTS = [
    Path(__file__).parent / "filecheck" / "fusion" / f"{name}.mlir"
    for name in ("tess-fuse", "tess-fuse-rules", "tess-fuse-epilogue")
]


@pytest.mark.parametrize("path", FILECHECK_INPUTS, ids=lambda p: p.name)
def test_filecheck_inputs_fused_match_unfused(path: Path):
    """Every func of the FileCheck inputs computes the same before and after tess-fuse."""
    module = parse_module(path.read_text())
    fused = apply(module, TessFusePass())
    assert len(generics(fused)) < len(generics(module))
    for func_op in (op for op in module.ops if isinstance(op, func.FuncOp)):
        name = func_op.sym_name.data
        args = random_inputs(func_op, 2)
        expected = run_linalg(module, name, args)
        assert_results_match(run_linalg(fused, name, args), expected)


KIND_CASES = [
    ("exp", [(3, 4)], {}),
    ("add", [(3, 1), (4,)], {}),
    ("select", [(3, 4), (4,), (1, 1)], {}),
    ("broadcast_to", [(3, 1)], {"shape": (2, 3, 4)}),
    ("permute", [(3, 4)], {"dims": [1, 0]}),
    ("sum", [(3, 4)], {"dims": [1]}),
    ("reduce_max", [(3, 4)], {"dims": [0], "keepdim": True}),
    ("matmul", [(2, 3), (3, 4)], {}),
]


@pytest.mark.parametrize(("op", "shapes", "props"), KIND_CASES, ids=[c[0] for c in KIND_CASES])
def test_kind_from_maps_agrees_with_the_tess_op(op: str, shapes: list, props: dict):
    module = build_single_op_module(op, [(s, "f32") for s in shapes], **props)
    (kernel,) = kernels(to_linalg(module))
    (tess_op,) = (o for o in tess_dialect.Tess.operations if o.name == f"tess.{op}")
    assert pattern_kind(kernel) == tess_op.PATTERN_KIND
    assert kernel.attributes["tess.op"] == StringAttr(f"tess.{op}")


def test_bias_then_max_is_a_reduction_not_a_contraction():
    # Both inputs are read along the reduced dim, but (d0, d1) and (d1) are no (i,k)x(k,j).
    fused = check_fusion(
        tess("""
        func.func @f(%z: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3xf32> {
          %a = tess.add %z, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
          %m = tess.reduce_max %a dims = [1] : tensor<3x4xf32> -> tensor<3xf32>
          func.return %m : tensor<3xf32>
        }""")
    )
    (kernel,) = kernels(fused)
    assert pattern_kind(kernel) == PatternKind.REDUCTION


def test_fill_generic_is_elementwise():
    module = build_single_op_module("fill", [], value=1.0, type=((3,), "f32"))
    (fill,) = generics(to_linalg(module))
    assert pattern_kind(fill) == PatternKind.ELEMENTWISE


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_program(max_ops=7))
def test_random_programs_fused_match_unfused_and_oracle(program: tuple[ModuleOp, str]):
    module, name = program
    func_op = next(op for op in module.ops if isinstance(op, func.FuncOp))
    args = random_inputs(func_op, 1)
    expected = interpret(module, name, args)
    unfused = to_linalg(module)
    fused = apply(unfused, TessFusePass(report=True))
    assert_results_match(run_linalg(fused, name, args), expected)
    assert len(generics(fused)) <= len(generics(unfused))
    # No expensive op is duplicated unless it is the same subexpression twice anyway.
    for op_name in ("math.exp", "math.log", "math.tanh", "math.sqrt", "arith.divf"):
        assert count_ops(fused, op_name) <= count_ops(unfused, op_name)


@pytest.mark.parametrize("n", [1, 4])
def test_expensive_scalar_is_not_fused_into_a_consumer_whatever_its_size(n: int) -> None:
    # sqrt(sum(x)) read by every element of x: recomputed per element, refused, and for one
    # element as for four (decisions do not depend on an extent being 1, so that a one-
    # element parameter's optimizer step fuses as the others' do: tess-fuse-horizontal).
    fused = check_fusion(
        tess(f"""
        func.func @f(%x: tensor<{n}xf32>, %s: tensor<f32>) -> tensor<{n}xf32> {{
          %r = tess.sqrt %s : tensor<f32>
          %d = tess.div %r, %s : tensor<f32>, tensor<f32> -> tensor<f32>
          %y = tess.mul %x, %d : tensor<{n}xf32>, tensor<f32> -> tensor<{n}xf32>
          func.return %y : tensor<{n}xf32>
        }}"""),
        report=True,
    )
    scalar, update = kernels(fused)
    assert not scalar.iterator_types and count_ops(fused, "math.sqrt") == 1
    refused = update.attributes["tess.fusion_refused"]
    assert isinstance(refused, StringAttr) and "expensive producer would be" in refused.data
