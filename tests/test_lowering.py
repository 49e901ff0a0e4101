"""
The lowering passes end to end: tess-to-linalg, tess-bufferize, tess-outline-kernels,
tess-linalg-to-loops.

Every program is checked at each level (it verifies, prints, re-parses, and holds only
that level's ops) and then *executed* at the loop level by xDSL's interpreter, on tiny
shapes, against `tessc.reference.interpret` on the tess input. The interpreter lacks a few
ops the loop level uses (scf.parallel, divf, negf, some math, memref.copy and the view ops);
`LoopLevelFunctions` below implements them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType, f64
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import BuiltinFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.math import MathFunctions
from xdsl.interpreters.memref import MemRefFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.interpreters.utils.ptr import TypedPtr
from xdsl.ir import Operation
from xdsl.ir.affine import AffineMap
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from tessc.compiler import compile_module
from tessc.context import make_context
from tessc.dialects import contract, tess
from tessc.lowering.buffers.bufferize import TessBufferizePass
from tessc.lowering.buffers.outline_kernels import TessOutlineKernelsPass
from tessc.lowering.linalg.loop_nests import plan_loop_nest
from tessc.lowering.linalg.to_linalg import TessToLinalgPass, reassociation
from tessc.lowering.loops.attention_kernels import TessAttentionKernelsPass
from tessc.lowering.loops.linalg_to_loops import TessLinalgToLoopsPass
from tessc.passes import load_pass
from tessc.reference import find_func, interpret, shape_and_dtype

from helpers import assert_results_match, random_inputs, random_program

# ---------------------------------------------------------------------------------------
# the interpreter at the loop level
# ---------------------------------------------------------------------------------------


@register_impls
class LoopLevelFunctions(InterpreterFunctions):
    """The loop-level ops xDSL's interpreter lacks (or, for `math`, does not register)."""

    @impl(scf.ParallelOp)
    def run_parallel(
        self, interpreter: Interpreter, op: scf.ParallelOp, args: PythonValues
    ) -> PythonValues:
        rank = len(op.lowerBound)
        lower, upper, step = args[:rank], args[rank : 2 * rank], args[2 * rank : 3 * rank]
        ranges = [range(lo, hi, st) for lo, hi, st in zip(lower, upper, step, strict=True)]
        for point in itertools.product(*ranges):
            interpreter.run_ssacfg_region(op.body, point, "parallel_loop")
        return ()

    @impl_terminator(scf.ReduceOp)
    def run_reduce(
        self, interpreter: Interpreter, op: scf.ReduceOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(()), ()

    @impl(arith.DivfOp)
    def run_divf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        lhs, rhs = args
        if rhs == 0:
            if lhs == 0 or math.isnan(lhs):
                return (math.nan,)
            return (math.copysign(math.inf, lhs) * math.copysign(1.0, rhs),)
        return (lhs / rhs,)

    @impl(arith.NegfOp)
    def run_negf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (-args[0],)

    @impl(xmath.TanhOp)
    def run_tanh(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (math.tanh(args[0]),)

    @impl(xmath.AbsFOp)
    def run_absf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (abs(args[0]),)

    @impl(xmath.PowFOp)
    def run_powf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        base, exponent = args
        try:
            return (math.pow(base, exponent),)
        except (ValueError, OverflowError):
            return (float(np.power(np.float64(base), np.float64(exponent))),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (max(args),)

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (min(args),)

    @impl(arith.SIToFPOp)
    def run_sitofp(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (float(args[0]),)

    @impl(arith.FPToSIOp)
    def run_fptosi(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (int(args[0]),)  # toward zero, as arith

    @impl(arith.ExtSIOp)
    def run_extsi(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (args[0],)

    @impl(arith.ExtFOp)
    def run_extf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (args[0],)

    @impl(xmath.SinOp)
    def run_sin(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (math.sin(args[0]),)

    @impl(xmath.CosOp)
    def run_cos(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (math.cos(args[0]),)

    @impl(xmath.ErfOp)
    def run_erf(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (math.erf(args[0]),)

    @impl(xmath.FloorOp)
    def run_floor(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (float(math.floor(args[0])),)

    @impl(xmath.CeilOp)
    def run_ceil(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (float(math.ceil(args[0])),)

    @impl(xmath.RoundEvenOp)
    def run_roundeven(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (float(round(args[0])),)

    @impl(arith.ShRUIOp)
    def run_shrui(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        width = op.result_types[0].width.data  # type: ignore[attr-defined]
        return (self.signed((args[0] % (1 << width)) >> args[1], width),)

    @impl(arith.BitcastOp)
    def run_bitcast(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        source, target = op.operand_types[0], op.result_types[0]
        names = {"f32": "<f", "f64": "<d", "i32": "<i", "i64": "<q"}
        packed = np.array(args[0], names[str(source)]).tobytes()
        return (np.frombuffer(packed, names[str(target)])[0].item(),)

    @staticmethod
    def signed(value: int, width: int) -> int:
        """`value` (mod 2^width) as a two's complement integer of `width` bits."""
        return value - (1 << width) if value >= 1 << (width - 1) else value

    @impl(xmath.AbsIOp)
    def run_absi(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        return (abs(args[0]),)

    @impl(memref.CopyOp)
    def run_copy(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        source, destination = args
        for index in source.indices():
            destination.store(index, source.load(index))
        return ()

    @impl(memref.CollapseShapeOp)
    def run_collapse(self, interpreter: Interpreter, op: memref.CollapseShapeOp, args):
        return (view(args[0], op.result.type),)

    @impl(memref.ExpandShapeOp)
    def run_expand(self, interpreter: Interpreter, op: memref.ExpandShapeOp, args):
        return (view(args[0], op.result.type),)

    @impl(memref.SubviewOp)
    def run_subview(self, interpreter: Interpreter, op: memref.SubviewOp, args):
        # A copy of the strided elements: ShapedArray is row-major only. Programs here
        # only read slices (tess.slice), so a copy reads the same values.
        source = args[0]
        offsets = op.static_offsets.get_values()
        sizes = op.static_sizes.get_values()
        strides = op.static_strides.get_values()
        count = math.prod(sizes)
        data = TypedPtr.new([source.data_ptr[0]] * count, xtype=source.data_ptr.xtype)
        result = ShapedArray(data, list(sizes))
        for index in itertools.product(*(range(n) for n in sizes)):
            at = tuple(o + i * s for o, i, s in zip(offsets, index, strides, strict=True))
            result.store(index, source.load(at))
        return (result,)


def view(array: ShapedArray[Any], typ: Any) -> ShapedArray[Any]:
    """The same storage with another shape (ShapedArray.with_shape would copy)."""
    assert isinstance(typ, MemRefType)
    return ShapedArray(array.data_ptr, list(typ.get_shape()))


def to_shaped(array: np.ndarray) -> ShapedArray[float]:
    if array.dtype.kind in "biu":  # bools as 0/1 words: what the interpreter stores for i1
        ints = [int(v) for v in array.reshape(-1)]
        new = TypedPtr.new_int64 if array.dtype.itemsize == 8 else TypedPtr.new_int32
        return ShapedArray(new(ints), list(array.shape))
    values = [float(v) for v in array.reshape(-1)]
    if array.dtype == np.float32:
        return ShapedArray(TypedPtr.new_float32(values), list(array.shape))
    return ShapedArray(TypedPtr.new_float64(values), list(array.shape))


def run_loops(module: ModuleOp, entry: str, args: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Run a bufferized host with the interpreter; return its out-params as arrays."""
    host = find_func(module, entry)
    num_outputs = contract.NUM_OUTPUTS.get(host) or 0
    out_types = host.function_type.inputs.data[len(host.function_type.inputs) - num_outputs :]
    outs: list[np.ndarray] = []
    for typ in out_types:
        _, dtype = shape_and_dtype(TensorType(typ.element_type, typ.get_shape()))
        fill = np.nan if dtype.kind == "f" else 0  # NaN shows an output never written
        outs.append(np.full(typ.get_shape(), fill, dtype=dtype))
    shaped = [to_shaped(a) for a in (*args, *outs)]

    interpreter = Interpreter(module)
    for functions in (
        ArithFunctions(),
        BuiltinFunctions(),
        FuncFunctions(),
        MathFunctions(),
        MemRefFunctions(),
        ScfFunctions(),
        LoopLevelFunctions(),
    ):
        interpreter.register_implementations(functions)
    interpreter.call_op(entry, tuple(shaped))
    results = []
    for out, array in zip(outs, shaped[len(args) :], strict=True):
        results.append(np.array(array.data, dtype=out.dtype).reshape(out.shape))
    return tuple(results)


# ---------------------------------------------------------------------------------------
# lowering, with the checks of each level
# ---------------------------------------------------------------------------------------

LEVELS = ("linalg", "buffers", "kernels", "loops")
PASSES = {
    "linalg": TessToLinalgPass(),
    "buffers": TessBufferizePass(),
    "kernels": TessOutlineKernelsPass(),
    "loops": TessLinalgToLoopsPass(),
}
HOST_OPS = (
    memref.AllocOp,
    memref.DeallocOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    memref.CopyOp,
    func.CallOp,
    func.ReturnOp,
    arith.ConstantOp,
)


def all_types(op: Operation) -> list[Any]:
    types = [v.type for o in op.walk() for v in (*o.operands, *o.results)]
    types += [a.type for o in op.walk() for r in o.regions for b in r.blocks for a in b.args]
    return types


def check_level(module: ModuleOp, level: str) -> None:
    """`module` verifies, round-trips through text, and holds only `level`'s ops."""
    module.verify()
    text = str(module)
    # xDSL 0.74 prints a multi-result linalg.generic as `-> (t1, t2)` but parses only
    # `-> t1, t2` (tess-fuse makes such generics), so those modules cannot round-trip.
    if not any(op.name == "linalg.generic" and len(op.results) > 1 for op in module.walk()):
        reparsed = Parser(make_context(), text).parse_module()
        reparsed.verify()
        assert str(reparsed) == text
    names = {op.name for op in module.walk()}
    assert not any(n.startswith("tess.") for n in names), names
    if level == "linalg":
        return
    assert not any(isinstance(t, TensorType) for t in all_types(module))
    if level == "buffers":
        return
    for function in module.ops:
        assert isinstance(function, func.FuncOp)
        if function.is_declaration:  # an attention kernel before tess-attention-kernels
            assert contract.ATTENTION_KERNEL.has(function) and level == "kernels"
        elif contract.KERNEL.has(function):
            assert function.sym_visibility is not None
            assert function.sym_visibility.data == "private"
        else:
            for op in function.body.block.ops:
                assert isinstance(op, HOST_OPS), f"{op.name} left in host"
    if level == "kernels":
        return
    assert not any(n.startswith(("linalg.", "affine.")) for n in names), names


def lower(module: ModuleOp, until: str = "loops") -> ModuleOp:
    """Apply the passes up to `until` to a copy of `module`, checking every level."""
    module = module.clone()
    ctx = make_context()
    for level in LEVELS:
        PASSES[level].apply(ctx, module)
        if level == "loops":
            TessAttentionKernelsPass().apply(ctx, module)
        check_level(module, level)
        if level == until:
            break
    return module


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def check_execution(module: ModuleOp, entry: str = "main", seed: int = 0) -> ModuleOp:
    """Lower `module` to loops and run it against the reference; return the loop module.
    xDSL's interpreter cannot run `micro.mma` (the attention kernels' register tiles): a
    loop module holding one runs compiled by the `cpu` pipeline instead."""
    args = random_inputs(find_func(module, entry), seed)
    expected = interpret(module, entry, args)
    original = module.clone()
    loops = lower(module)
    if any(op.name == "micro.mma" for op in loops.walk()):
        actual = compile_module(original, entry, "cpu")(*args)
    else:
        actual = run_loops(loops, entry, args)
    assert_results_match(actual, expected)
    return loops


# ---------------------------------------------------------------------------------------
# hand-written programs, one per feature
# ---------------------------------------------------------------------------------------

PROGRAMS: dict[str, str] = {
    "elementwise_broadcast": """
func.func @main(%a: tensor<3x1x5xf32>, %b: tensor<4x1xf32>) -> tensor<3x4x5xf32> {
  %0 = tess.add %a, %b : tensor<3x1x5xf32>, tensor<4x1xf32> -> tensor<3x4x5xf32>
  %1 = tess.mul %0, %a : tensor<3x4x5xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  func.return %1 : tensor<3x4x5xf32>
}""",
    "unary_ops": """
func.func @main(%a: tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) {
  %0 = tess.neg %a : tensor<2x3xf64>
  %1 = tess.exp %0 : tensor<2x3xf64>
  %2 = tess.log %1 : tensor<2x3xf64>
  %3 = tess.relu %2 : tensor<2x3xf64>
  %4 = tess.sigmoid %3 : tensor<2x3xf64>
  %5 = tess.tanh %a : tensor<2x3xf64>
  %6 = tess.abs %5 : tensor<2x3xf64>
  %7 = tess.sqrt %6 : tensor<2x3xf64>
  %8 = tess.reciprocal %1 : tensor<2x3xf64>
  func.return %4, %7, %8 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>
}""",
    "binary_ops": """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = tess.sub %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = tess.max %0, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %2 = tess.min %1, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = tess.abs %b : tensor<3xf32>
  %4 = tess.fill 1.0 : tensor<3xf32>
  %5 = tess.add %3, %4 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %6 = tess.div %2, %5 : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %7 = tess.pow %5, %a : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %8 = tess.lt %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %9 = tess.gt %8, %6 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %10 = tess.eq %9, %8 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %11 = tess.add %10, %7 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %6, %11 : tensor<2x3xf32>, tensor<2x3xf32>
}""",
    "reduce_keepdim": """
func.func @main(%a: tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<3xf32>, tensor<1x1x1xf32>) {
  %0 = tess.sum %a dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %1 = tess.reduce_max %a dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %2 = tess.mean %a dims = [0, 1, 2] keepdim : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
  func.return %0, %1, %2 : tensor<2x1x4xf32>, tensor<3xf32>, tensor<1x1x1xf32>
}""",
    "matmul_batched": """
func.func @main(%a: tensor<2x1x3x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<2x3x3x5xf32> {
  %0 = tess.matmul %a, %b : tensor<2x1x3x4xf32>, tensor<3x4x5xf32> -> tensor<2x3x3x5xf32>
  func.return %0 : tensor<2x3x3x5xf32>
}""",
    "matmul_2d": """
func.func @main(%a: tensor<3x4xf64>, %b: tensor<4x2xf64>) -> tensor<3x2xf64> {
  %0 = tess.matmul %a, %b : tensor<3x4xf64>, tensor<4x2xf64> -> tensor<3x2xf64>
  func.return %0 : tensor<3x2xf64>
}""",
    "reshape": """
func.func @main(%a: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<4x6xf32>, tensor<2x1x12xf32>) {
  %0 = tess.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = tess.reshape %0 : tensor<6x4xf32> -> tensor<4x6xf32>
  %2 = tess.reshape %a : tensor<2x3x4xf32> -> tensor<2x1x12xf32>
  %3 = tess.neg %2 : tensor<2x1x12xf32>
  func.return %0, %1, %3 : tensor<6x4xf32>, tensor<4x6xf32>, tensor<2x1x12xf32>
}""",
    "permute": """
func.func @main(%a: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = tess.permute %a dims = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = tess.exp %0 : tensor<4x2x3xf32>
  func.return %1 : tensor<4x2x3xf32>
}""",
    "rank0": """
func.func @main(%s: tensor<f32>, %a: tensor<3xf32>)
    -> (tensor<f32>, tensor<3xf32>, tensor<1x1xf32>) {
  %0 = tess.sum %a dims = [0] : tensor<3xf32> -> tensor<f32>
  %1 = tess.mul %0, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  %2 = tess.sub %a, %1 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %3 = tess.reshape %1 : tensor<f32> -> tensor<1x1xf32>
  func.return %1, %2, %3 : tensor<f32>, tensor<3xf32>, tensor<1x1xf32>
}""",
    "broadcast_to_select_fill": """
func.func @main(%c: tensor<3x1xf32>, %a: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<3x4xf32>) {
  %0 = tess.broadcast_to %c : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %1 = tess.gt %c, %a : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %2 = tess.fill -2.5 : tensor<1x4xf32>
  %3 = tess.select %1, %a, %2 : tensor<3x4xf32>, tensor<4xf32>, tensor<1x4xf32> -> tensor<3x4xf32>
  func.return %0, %3 : tensor<2x3x4xf32>, tensor<3x4xf32>
}""",
    "results_aliasing": """
func.func @main(%a: tensor<2x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<6xf32>) {
  %0 = tess.exp %a : tensor<2x3xf32>
  %1 = tess.reshape %0 : tensor<2x3xf32> -> tensor<6xf32>
  func.return %a, %0, %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<6xf32>
}""",
    "splat_constant": """
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = arith.constant dense<2.500000e-01> : tensor<3xf32>
  %0 = tess.mul %a, %c : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}""",
    "calls": """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = func.call @affine(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = func.call @affine(%0, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}
func.func @affine(%x: tensor<2x3xf32>, %w: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = tess.mul %x, %w : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = tess.add %0, %w : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}""",
    "bitcasts": """
func.func @main(%a: tensor<2x3xf32>, %i: tensor<3xi64>) -> (tensor<2x3xi32>, tensor<3xf64>) {
  %0 = tess.bitcast %a : tensor<2x3xf32> -> tensor<2x3xi32>
  %1 = tess.bitcast %i : tensor<3xi64> -> tensor<3xf64>
  func.return %0, %1 : tensor<2x3xi32>, tensor<3xf64>
}""",
    "integers_and_casts": """
func.func @main(%a: tensor<2x3xf32>, %i: tensor<3xi32>) -> (tensor<2x3xi64>, tensor<2x3xi1>,
    tensor<3xi32>, tensor<2x3xf64>, tensor<2xi64>) {
  %0 = tess.cast %a : tensor<2x3xf32> -> tensor<2x3xi64>
  %1 = tess.cast %i : tensor<3xi32> -> tensor<3xi64>
  %2 = tess.add %0, %1 : tensor<2x3xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %3 = tess.lt %0, %1 : tensor<2x3xi64>, tensor<3xi64> -> tensor<2x3xi1>
  %4 = tess.abs %i : tensor<3xi32>
  %5 = tess.neg %4 : tensor<3xi32>
  %6 = tess.cast %3 : tensor<2x3xi1> -> tensor<2x3xf64>
  %7 = tess.select %3, %2, %0 : tensor<2x3xi1>, tensor<2x3xi64>, tensor<2x3xi64> -> tensor<2x3xi64>
  %8 = tess.reduce_max %7 dims = [1] : tensor<2x3xi64> -> tensor<2xi64>
  func.return %7, %3, %5, %6, %8 : tensor<2x3xi64>, tensor<2x3xi1>, tensor<3xi32>,
      tensor<2x3xf64>, tensor<2xi64>
}""",
    "gather_scatter_one_hot": """
func.func @main(%x: tensor<5x3xf32>, %i: tensor<2x2xi64>) -> (tensor<2x2x3xf32>,
    tensor<5x3xf32>, tensor<2x2x4xf64>, tensor<3x2x2xf32>) {
  %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<2x2xi64> -> tensor<2x2x3xf32>
  %1 = tess.scatter_add %0, %i dim = [0] : tensor<2x2x3xf32>, tensor<2x2xi64> -> tensor<5x3xf32>
  %2 = tess.one_hot %i : tensor<2x2xi64> -> tensor<2x2x4xf64>
  %3 = tess.permute %x dims = [1, 0] : tensor<5x3xf32> -> tensor<3x5xf32>
  %4 = tess.take %3, %i dim = [1] : tensor<3x5xf32>, tensor<2x2xi64> -> tensor<3x2x2xf32>
  func.return %0, %1, %2, %4 : tensor<2x2x3xf32>, tensor<5x3xf32>, tensor<2x2x4xf64>,
      tensor<3x2x2xf32>
}""",
    "sin_cos_prod": """
func.func @main(%x: tensor<4x5xf64>, %i: tensor<3x2xi32>) -> (tensor<4x5xf64>, tensor<4xf64>,
    tensor<2xi32>) {
  %0 = tess.sin %x : tensor<4x5xf64>
  %1 = tess.cos %0 : tensor<4x5xf64>
  %2 = tess.prod %1 dims = [1] : tensor<4x5xf64> -> tensor<4xf64>
  %3 = tess.prod %i dims = [0] : tensor<3x2xi32> -> tensor<2xi32>
  func.return %1, %2, %3 : tensor<4x5xf64>, tensor<4xf64>, tensor<2xi32>
}""",
    "arg_reductions": """
func.func @main(%x: tensor<4x5xf32>, %i: tensor<3x2xi32>) -> (tensor<4xi64>, tensor<1x5xi64>,
    tensor<2xi64>) {
  %0 = tess.argmax %x dim = [1] : tensor<4x5xf32> -> tensor<4xi64>
  %1 = tess.argmin %x dim = [0] keepdim : tensor<4x5xf32> -> tensor<1x5xi64>
  %2 = tess.argmax %i dim = [0] : tensor<3x2xi32> -> tensor<2xi64>
  func.return %0, %1, %2 : tensor<4xi64>, tensor<1x5xi64>, tensor<2xi64>
}""",
    "slices_and_concat": """
func.func @main(%x: tensor<6x5xf32>, %y: tensor<2x5xf32>) -> (tensor<3x5xf32>, tensor<6x5xf32>,
    tensor<8x5xf32>) {
  %0 = tess.slice %x offsets = [1, 4] strides = [2, -1] : tensor<6x5xf32> -> tensor<3x5xf32>
  %1 = tess.unslice %0 offsets = [5, 0] strides = [-2, 1] : tensor<3x5xf32> -> tensor<6x5xf32>
  %3 = tess.stop_gradient %y : tensor<2x5xf32>
  %2 = tess.concat %3, %x dim = [0] : tensor<2x5xf32>, tensor<6x5xf32> -> tensor<8x5xf32>
  func.return %0, %1, %2 : tensor<3x5xf32>, tensor<6x5xf32>, tensor<8x5xf32>
}""",
    "conv_pool_pad": """
func.func @main(%x: tensor<2x4x7x6xf64>, %w: tensor<6x2x3x2xf64>, %i: tensor<2x4x3x3xi64>)
    -> (tensor<2x6x4x4xf64>, tensor<2x4x4x3xf64>, tensor<2x4x4x3xi64>, tensor<2x4x3x3xf64>,
    tensor<2x4x7x6xf64>, tensor<2x4x7x6xf64>, tensor<2x5x7x9xf64>) {
  %0 = tess.conv %x, %w strides = [2, 2] dilations = [1, 2]
      padding_low = [1, 1] padding_high = [1, 2] groups = 2
      : tensor<2x4x7x6xf64>, tensor<6x2x3x2xf64> -> tensor<2x6x4x4xf64>
  %1 = tess.pool %x kind = "max" kernel = [3, 3] strides = [2, 2]
      padding_low = [1, 1] padding_high = [1, 1]
      : tensor<2x4x7x6xf64> -> tensor<2x4x4x3xf64>
  %2 = tess.pool %x kind = "argmax" kernel = [3, 3] strides = [2, 2]
      padding_low = [1, 1] padding_high = [1, 1]
      : tensor<2x4x7x6xf64> -> tensor<2x4x4x3xi64>
  %3 = tess.pool %x kind = "avg" kernel = [2, 2] strides = [2, 2]
      padding_low = [0, 0] padding_high = [0, 0]
      : tensor<2x4x7x6xf64> -> tensor<2x4x3x3xf64>
  %4 = tess.unpool %3, %i kernel = [2, 2] strides = [2, 2]
      padding_low = [0, 0] padding_high = [0, 0]
      : tensor<2x4x3x3xf64>, tensor<2x4x3x3xi64> -> tensor<2x4x7x6xf64>
  %5 = tess.unpool %1 kernel = [3, 3] strides = [2, 2]
      padding_low = [1, 1] padding_high = [1, 1]
      : tensor<2x4x4x3xf64> -> tensor<2x4x7x6xf64>
  %6 = tess.pad %x low = [0, 1, 0, 1] high = [0, 0, 0, 2]
      value = 2.5
      : tensor<2x4x7x6xf64> -> tensor<2x5x7x9xf64>
  func.return %0, %1, %2, %3, %4, %5, %6 : tensor<2x6x4x4xf64>, tensor<2x4x4x3xf64>,
      tensor<2x4x4x3xi64>, tensor<2x4x3x3xf64>, tensor<2x4x7x6xf64>, tensor<2x4x7x6xf64>,
      tensor<2x5x7x9xf64>
}""",
    "bit_ops_iota": """
func.func @main(%x: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  %i = tess.iota : tensor<2x3xi32>
  %c3 = tess.fill 3.0 : tensor<i32>
  %c5 = tess.fill 5.0 : tensor<i32>
  %0 = tess.shl %i, %c3 : tensor<2x3xi32>, tensor<i32> -> tensor<2x3xi32>
  %1 = tess.shru %x, %c5 : tensor<2x3xi32>, tensor<i32> -> tensor<2x3xi32>
  %2 = tess.or %0, %1 : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
  %3 = tess.xor %2, %x : tensor<2x3xi32>, tensor<2x3xi32> -> tensor<2x3xi32>
  func.return %3, %i : tensor<2x3xi32>, tensor<2x3xi32>
}""",
    "erf": """
func.func @main(%x: tensor<4x5xf64>, %y: tensor<3xf32>) -> (tensor<4x5xf64>, tensor<3xf32>) {
  %0 = tess.erf %x : tensor<4x5xf64>
  %1 = tess.erf %y : tensor<3xf32>
  func.return %0, %1 : tensor<4x5xf64>, tensor<3xf32>
}""",
    "attention": """
func.func @main(%q: tensor<2x3x4xf64>, %k: tensor<2x5x4xf64>, %v: tensor<2x5x2xf64>,
    %m: tensor<1x3x5xi1>, %d: tensor<2x3xf64>, %g: tensor<2x3x2xf64>) -> (tensor<2x3x2xf64>,
    tensor<2x3xf64>, tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x2xf64>) {
  %o = tess.attention %q, %k, %v mask %m scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>,
    tensor<2x5x2xf64>, tensor<1x3x5xi1> -> tensor<2x3x2xf64>
  %l = tess.attention_lse %q, %k scale = 0.5 causal : tensor<2x3x4xf64>, tensor<2x5x4xf64>
    -> tensor<2x3xf64>
  %dq = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "q" scale = 0.5 causal :
    tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x2xf64>, tensor<2x3xf64>, tensor<2x3xf64>,
    tensor<2x3x2xf64> -> tensor<2x3x4xf64>
  %dk = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "k" scale = 0.5 causal :
    tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x2xf64>, tensor<2x3xf64>, tensor<2x3xf64>,
    tensor<2x3x2xf64> -> tensor<2x5x4xf64>
  %dv = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "v" scale = 0.5 causal :
    tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x2xf64>, tensor<2x3xf64>, tensor<2x3xf64>,
    tensor<2x3x2xf64> -> tensor<2x5x2xf64>
  func.return %o, %l, %dq, %dk, %dv : tensor<2x3x2xf64>, tensor<2x3xf64>, tensor<2x3x4xf64>,
    tensor<2x5x4xf64>, tensor<2x5x2xf64>
}""",
    "rounding": """
func.func @main(%x: tensor<4x5xf64>, %y: tensor<3xf32>) -> (tensor<4x5xf64>, tensor<3xf32>,
    tensor<4x5xf64>) {
  %0 = tess.floor %x : tensor<4x5xf64>
  %1 = tess.ceil %y : tensor<3xf32>
  %2 = tess.round %x : tensor<4x5xf64>
  func.return %0, %1, %2 : tensor<4x5xf64>, tensor<3xf32>, tensor<4x5xf64>
}""",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_executes_like_the_reference(name: str) -> None:
    check_execution(parse(PROGRAMS[name]))


def test_every_tess_op_is_lowered() -> None:
    used = {op.name for text in PROGRAMS.values() for op in parse(text).walk()}
    assert {op.name for op in tess.Tess.operations} <= used


def test_passes_are_deterministic() -> None:
    module = parse(PROGRAMS["binary_ops"])
    assert str(lower(module)) == str(lower(module))


# ---------------------------------------------------------------------------------------
# random programs
# ---------------------------------------------------------------------------------------


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=random_program(max_ops=6, max_side=3))
def test_random_programs_execute_like_the_reference(program: tuple[ModuleOp, str]) -> None:
    module, entry = program
    check_execution(module, entry)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=random_program(max_ops=6, max_side=3))
def test_random_programs_execute_like_the_reference_after_fusion(
    program: tuple[ModuleOp, str],
) -> None:
    # tess-fuse rewrites between tess-to-linalg and tess-bufferize (multi-output generics,
    # inlined producers): the rest of the lowering must take whatever it makes.
    module, entry = program
    args = random_inputs(find_func(module, entry), 0)
    expected = interpret(module, entry, args)
    fused = lower(module, "linalg")
    load_pass("tess-fuse")().apply(make_context(), fused)
    check_level(fused, "linalg")
    actual = run_loops(lower_from_linalg(fused), entry, args)
    assert_results_match(actual, expected)


def lower_from_linalg(module: ModuleOp) -> ModuleOp:
    ctx = make_context()
    for level in LEVELS[1:]:
        PASSES[level].apply(ctx, module)
        check_level(module, level)
    return module


# ---------------------------------------------------------------------------------------
# the pieces
# ---------------------------------------------------------------------------------------


def generics_of(module: ModuleOp) -> list[Operation]:
    return [op for op in module.walk() if op.name == "linalg.generic"]


def test_bufferize_writes_results_into_out_params_without_copies() -> None:
    buffers = lower(parse(PROGRAMS["elementwise_broadcast"]), "buffers")
    host = find_func(buffers, "main")
    assert contract.NUM_OUTPUTS.get(host) == 1
    assert [str(t) for t in host.function_type.inputs.data][-1] == "memref<3x4x5xf32>"
    assert not host.function_type.outputs.data
    assert not [op for op in host.walk() if isinstance(op, memref.CopyOp)]
    last = generics_of(buffers)[-1]
    assert last.operands[-1] is host.args[-1]


def test_bufferize_copies_arguments_and_duplicate_results() -> None:
    buffers = lower(parse(PROGRAMS["results_aliasing"]), "buffers")
    host = find_func(buffers, "main")
    a, out0, out1, out2, out3 = host.args
    copies = [(op.source, op.destination) for op in host.walk() if isinstance(op, memref.CopyOp)]
    # %a into out0; %0 written by its generic straight into out1, then copied into out2;
    # the reshape view of out1 copied into out3.
    assert copies[0] == (a, out0)
    assert copies[1] == (out1, out2)
    assert copies[2][1] is out3 and isinstance(copies[2][0].owner, memref.CollapseShapeOp)
    assert generics_of(buffers)[0].operands[-1] is out1


def test_bufferize_gives_each_use_of_a_shared_empty_its_own_buffer() -> None:
    module = parse(
        """
func.func @main(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
       iterator_types = ["parallel"]} ins(%0 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.addf %x, %x : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
       iterator_types = ["parallel"]} ins(%1 : tensor<4xf32>) outs(%0 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.addf %x, %o : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  func.return %2, %1 : tensor<4xf32>, tensor<4xf32>
}"""
    )
    ctx = make_context()
    TessBufferizePass().apply(ctx, module)
    module.verify()
    host = find_func(module, "main")
    first, second, third = generics_of(module)
    out0, out1 = host.args[1:]
    # Two allocs for the shared empty; the third generic reads %0 again through its outs,
    # but %0 also feeds the second generic, so it writes a copy (into out0) not %0's buffer.
    assert first.operands[-1] is not second.operands[-1]
    assert second.operands[-1] is out1
    assert third.operands[-1] is out0
    copies = [op for op in host.walk() if isinstance(op, memref.CopyOp)]
    assert [(c.source, c.destination) for c in copies] == [(first.operands[-1], out0)]
    a = np.arange(4, dtype=np.float32)
    result_0, result_1 = run_loops(lower_from_buffers(module), "main", [a])
    np.testing.assert_array_equal(result_0, -3 * a)  # (-a + -a) + -a
    np.testing.assert_array_equal(result_1, -2 * a)


def lower_from_buffers(module: ModuleOp) -> ModuleOp:
    ctx = make_context()
    for level in LEVELS[2:]:
        PASSES[level].apply(ctx, module)
        check_level(module, level)
    return module


def test_outline_names_kernels_and_passes_deduplicated_memrefs() -> None:
    kernels = lower(parse(PROGRAMS["elementwise_broadcast"]), "kernels")
    names = [f.sym_name.data for f in kernels.ops if isinstance(f, func.FuncOp)]
    assert names == ["main", "main_kernel_0", "main_kernel_1"]
    kernel_1 = find_func(kernels, "main_kernel_1")
    # mul %0, %a: inputs (%0, %a) and the out-param: three distinct memrefs.
    assert len(kernel_1.args) == 3
    assert all(isinstance(t, MemRefType) for t in kernel_1.function_type.inputs.data)
    select = lower(parse(PROGRAMS["results_aliasing"]), "kernels")
    assert len(find_func(select, "main_kernel_0").args) == 2


def test_outline_refuses_tensors() -> None:
    linalg_level = lower(parse(PROGRAMS["permute"]), "linalg")
    with pytest.raises(PassFailedException, match="tess-bufferize"):
        TessOutlineKernelsPass().apply(make_context(), linalg_level)


def test_bufferize_refuses_non_splat_constants() -> None:
    module = parse(
        """
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = tess.mul %a, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}"""
    )
    linalg_level = lower(module, "linalg")
    with pytest.raises(PassFailedException, match="cannot bufferize 'arith.constant'"):
        TessBufferizePass().apply(make_context(), linalg_level)


def test_loops_refuse_tensors() -> None:
    linalg_level = lower(parse(PROGRAMS["permute"]), "linalg")
    with pytest.raises(PassFailedException, match="tess-bufferize"):
        TessLinalgToLoopsPass().apply(make_context(), linalg_level)


def loop_nest_of(module: ModuleOp, kernel: str) -> list[tuple[str, list[str]]]:
    """(op name, induction variable names) of each loop in `kernel`, outermost first."""
    nest = []
    for op in find_func(module, kernel).walk():
        if isinstance(op, scf.ParallelOp | scf.ForOp):
            nest.append((op.name, [a.name_hint or "" for a in op.body.block.args]))
    return nest


def test_matmul_loops_are_i_k_j_with_parallel_batch_and_rows() -> None:
    loops = lower(parse(PROGRAMS["matmul_batched"]))
    # Loops (b0, b1, i, j, k) = (d0, d1, d2, d3, d4); the init kernel, then the product.
    assert loop_nest_of(loops, "main_kernel_1") == [
        ("scf.parallel", ["i0", "i1", "i2"]),
        ("scf.for", ["i4"]),
        ("scf.for", ["i3"]),
    ]


PAR, RED = IteratorType.PARALLEL, IteratorType.REDUCTION


def plan(
    iterators: Sequence[IteratorType],
    maps: Sequence[Any],
    shapes: Sequence[tuple[int, ...]],
    num_inputs: int,
    ranges: Sequence[int],
) -> tuple[tuple[int, ...], int]:
    affine_maps = [m if isinstance(m, AffineMap) else AffineMap.from_callable(m) for m in maps]
    result = plan_loop_nest(iterators, affine_maps, shapes, num_inputs, ranges)
    return result.order, result.num_parallel


def test_loop_order_matmul_is_i_k_j() -> None:
    maps = [lambda i, j, k: (i, k), lambda i, j, k: (k, j), lambda i, j, k: (i, j)]
    assert plan([PAR, PAR, RED], maps, [(3, 4), (4, 5), (3, 5)], 2, (3, 5, 4)) == ((0, 2, 1), 1)


def test_loop_order_matmul_with_transposed_rhs_is_a_dot_product() -> None:
    maps = [lambda i, j, k: (i, k), lambda i, j, k: (j, k), lambda i, j, k: (i, j)]
    assert plan([PAR, PAR, RED], maps, [(3, 4), (5, 4), (3, 5)], 2, (3, 5, 4)) == ((0, 1, 2), 2)


def test_loop_order_reductions() -> None:
    # A row sum accumulates in place: the parallel loop stays outermost.
    row = [lambda i, k: (i, k), lambda i, k: (i,)]
    assert plan([PAR, RED], row, [(3, 4), (3,)], 1, (3, 4)) == ((0, 1), 1)
    # A column sum walks rows with unit stride, sequentially.
    column = [lambda i, j: (i, j), lambda i, j: (j,)]
    assert plan([RED, PAR], column, [(3, 4), (4,)], 1, (3, 4)) == ((0, 1), 0)
    # keepdim over the middle dim: (d0, d1, d2) -> (d0, 0, d2).
    keep = [lambda a, b, c: (a, b, c), lambda a, b, c: (a, 0, c)]
    assert plan([PAR, RED, PAR], keep, [(2, 3, 4), (2, 1, 4)], 1, (2, 3, 4)) == ((0, 1, 2), 1)
    # keepdim over the last dims: the output's size-1 trailing dims do not count.
    keep_last = [lambda a, b, c: (a, b, c), lambda a, b, c: (a, 0, 0)]
    assert plan([PAR, RED, RED], keep_last, [(2, 3, 4), (2, 1, 1)], 1, (2, 3, 4)) == (
        (0, 1, 2),
        1,
    )
    # Only the last reduction may be innermost: the summation order stays the same.
    two = [lambda a, b: (b, a), lambda a, b: ()]
    assert plan([RED, RED], two, [(4, 3), ()], 1, (3, 4)) == ((0, 1), 0)


def test_loop_order_elementwise() -> None:
    # A transposed write: its output's last dim innermost; all loops parallel.
    transpose = [lambda a, b: (a, b), lambda a, b: (b, a)]
    assert plan([PAR, PAR], transpose, [(3, 4), (4, 3)], 1, (3, 4)) == ((1, 0), 2)
    # A broadcast input read as (d0, 0) does not pull d0 inwards.
    broadcast = [lambda a, b: (a, 0), lambda a, b: (a, b)]
    assert plan([PAR, PAR], broadcast, [(3, 1), (3, 4)], 1, (3, 4)) == ((0, 1), 2)
    # A loop of extent 1 is not put innermost.
    column = [lambda a, b: (a, b), lambda a, b: (a, b)]
    assert plan([PAR, PAR], column, [(3, 1), (3, 1)], 1, (3, 1)) == ((1, 0), 2)
    # No loops at all.
    assert plan([], [AffineMap(0, 0, ())], [()], 0, ()) == ((), 0)


@pytest.mark.parametrize(
    ("expanded", "collapsed", "groups"),
    [
        ((2, 3, 4), (6, 4), [[0, 1], [2]]),
        ((2, 1, 3), (2, 3), [[0], [1, 2]]),
        ((1, 6), (6,), [[0, 1]]),
        ((6, 1, 1), (6,), [[0, 1, 2]]),
        ((1, 1), (), []),
        ((2, 3), (3, 2), None),
        ((2, 3), (), None),
        ((4, 3), (2, 6), None),
    ],
)
def test_reassociation(
    expanded: tuple[int, ...], collapsed: tuple[int, ...], groups: list[list[int]] | None
) -> None:
    assert reassociation(expanded, collapsed) == groups


def test_f64_element_type_survives() -> None:
    loops = lower(parse(PROGRAMS["matmul_2d"]))
    host = find_func(loops, "main")
    assert all(t.element_type == f64 for t in host.function_type.inputs.data)
