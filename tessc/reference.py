"""
The NumPy reference interpreter of the `tess` level: the semantic oracle of tessc.

Every lowering in tessc (linalg, fusion, bufferization, loops, Numba codegen) is tested by
running its output on random inputs and comparing against `interpret` on the original
`tess` program. So this module is written to be obviously correct rather than fast:

- a program is executed op by op, in block order, over a map from SSA values to arrays;
- each op kind is one small NumPy function in a dispatch table keyed by the op class
  (`OP_IMPLEMENTATIONS`); nothing is fused, nothing is reordered;
- NumPy's broadcasting rules coincide with the seed rules (pad leading 1s, size 1
  broadcasts, everything else must match), so binary ops and `select` are plain NumPy;
- every result is cast to its declared element type (an f32 program stays f32 throughout,
  as the compiled code does) and checked against its declared shape, so a wrong shape
  rule in the interpreter fails loudly instead of producing a plausible answer;
- floating point follows IEEE semantics without warnings (`log(-1)` is nan, `1/0` is inf):
  the compiled kernels do the same, and a test decides what inputs are reasonable.

Besides the `tess` ops, a program may use `func.call` (to another func of the module),
`func.return`, and `arith.constant` with a dense tensor or a scalar. Element types are
f32/f64, i32/i64 and i1 (NumPy bool), and the 16-bit storage types bf16 (`ml_dtypes`), f16
and i16, which compute as `tess-widen-narrow` says: in 32 bits, rounded once per op.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.dialects import tess, tess_conv, tess_index
from tessc.dialects.functions import lookup_function, module_functions
from tessc.dialects.tess import format_shape
from tessc.lowering.linalg.widen_narrow import TessWidenNarrowPass, has_narrow_types
from tessc.reference_attention import ATTENTION_IMPLEMENTATIONS

OpImplementation = Callable[[Any, list[np.ndarray]], np.ndarray]
"""Computes the single result of an op from the op (for its properties) and its operands."""

_DTYPES: dict[type[Attribute], np.dtype] = {
    Float32Type: np.dtype(np.float32),
    Float64Type: np.dtype(np.float64),
    BFloat16Type: np.dtype(ml_dtypes.bfloat16),
    Float16Type: np.dtype(np.float16),
}


# ---------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------


_INTEGER_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.bool_),
    16: np.dtype(np.int16),
    32: np.dtype(np.int32),
    64: np.dtype(np.int64),
}


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The NumPy dtype of an f32/f64/i32/i64/i1 element type (i1 is bool)."""
    if isinstance(element_type, IntegerType):
        dtype = _INTEGER_DTYPES.get(element_type.width.data)
    else:
        dtype = _DTYPES.get(type(element_type))
    if dtype is None:
        raise NotImplementedError(f"the reference interpreter has no dtype for {element_type}")
    return dtype


def shape_and_dtype(typ: Attribute) -> tuple[tuple[int, ...], np.dtype]:
    """`tensor<3x4xf32>` -> ((3, 4), float32); a float scalar type is a 0-d array."""
    if isinstance(typ, TensorType):
        shape = tuple(typ.get_shape())
        if any(d < 0 for d in shape):
            raise NotImplementedError(f"dynamic shapes are not supported: {typ}")
        return shape, numpy_dtype(typ.element_type)
    return (), numpy_dtype(typ)


# ---------------------------------------------------------------------------------------
# one NumPy function per op
# ---------------------------------------------------------------------------------------

OP_IMPLEMENTATIONS: dict[type[Operation], OpImplementation] = {}


def _implements(*op_classes: type[Operation]) -> Callable[[OpImplementation], OpImplementation]:
    def register(implementation: OpImplementation) -> OpImplementation:
        for op_class in op_classes:
            OP_IMPLEMENTATIONS[op_class] = implementation
        return implementation

    return register


def _unary(function: Callable[[np.ndarray], np.ndarray]) -> OpImplementation:
    return lambda op, operands: function(operands[0])


def _binary(function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> OpImplementation:
    return lambda op, operands: function(operands[0], operands[1])


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.ones((), x.dtype)
    return one / (one + np.exp(-x))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return np.ones((), x.dtype) / x


def _compare(function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> OpImplementation:
    """A comparison gives True/False, or 1/0 in the operand dtype: the declared result
    type decides (`_as_declared` casts)."""
    return lambda op, operands: function(operands[0], operands[1])


OP_IMPLEMENTATIONS.update(
    {
        tess.NegOp: _unary(np.negative),
        tess.ExpOp: _unary(np.exp),
        tess.LogOp: _unary(np.log),
        tess.ReluOp: _unary(_relu),
        tess.SigmoidOp: _unary(_sigmoid),
        tess.TanhOp: _unary(np.tanh),
        tess.SqrtOp: _unary(np.sqrt),
        tess.ReciprocalOp: _unary(_reciprocal),
        tess.AbsOp: _unary(np.abs),
        tess.StopGradientOp: _unary(lambda x: x),
        tess.SinOp: _unary(np.sin),
        tess.CosOp: _unary(np.cos),
        tess.ErfOp: _unary(_erf),
        tess.FloorOp: _unary(np.floor),
        tess.CeilOp: _unary(np.ceil),
        tess.RoundOp: _unary(np.rint),  # halves to even
        tess.AddOp: _binary(np.add),
        tess.SubOp: _binary(np.subtract),
        tess.MulOp: _binary(lambda a, b: np.logical_and(a, b) if a.dtype == bool else a * b),
        tess.DivOp: _binary(np.divide),
        tess.MaxOp: _binary(np.maximum),  # on bools: or
        tess.MinOp: _binary(np.minimum),  # on bools: and
        tess.PowOp: _binary(np.power),
        tess.LtOp: _compare(np.less),
        tess.GtOp: _compare(np.greater),
        tess.EqOp: _compare(np.equal),
        tess.XOrOp: _binary(np.bitwise_xor),
        tess.OrOp: _binary(np.bitwise_or),
        tess.ShLOp: _binary(lambda a, b: _unsigned_shift(np.left_shift, a, b)),
        tess.ShRUOp: _binary(lambda a, b: _unsigned_shift(np.right_shift, a, b)),
    }
)


def _unsigned_shift(
    shift: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """`shift` on the bits of `a` as unsigned (so right shifts bring in zeros, and left
    shifts drop bits as arith.shli does), back in `a`'s dtype."""
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    return shift(a.view(unsigned), b.astype(unsigned)).astype(unsigned).view(a.dtype)


@_implements(tess.IotaOp)
def _iota(op: tess.IotaOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, dtype = shape_and_dtype(op.result.type)
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


@_implements(tess.SumOp)
def _sum(op: tess.SumOp, operands: list[np.ndarray]) -> np.ndarray:
    return np.sum(operands[0], axis=op.reduced_dims, keepdims=op.keeps_dims)


@_implements(tess.ProdOp)
def _prod(op: tess.ProdOp, operands: list[np.ndarray]) -> np.ndarray:
    return np.prod(operands[0], axis=op.reduced_dims, keepdims=op.keeps_dims)


@_implements(tess.ReduceMaxOp)
def _reduce_max(op: tess.ReduceMaxOp, operands: list[np.ndarray]) -> np.ndarray:
    # -inf (an integer's minimum) is the identity of max, as in the linalg lowering's init
    # value; it also makes a reduction over an empty dim well-defined.
    x = operands[0]
    initial = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.max(x, axis=op.reduced_dims, keepdims=op.keeps_dims, initial=initial)


@_implements(tess.MeanOp)
def _mean(op: tess.MeanOp, operands: list[np.ndarray]) -> np.ndarray:
    # The sum divided by the number of reduced elements, exactly as lowered (sum, then
    # scale); np.mean would warn on an empty reduction where this gives nan silently.
    x = operands[0]
    count = 1
    for d in op.reduced_dims:
        count *= x.shape[d]
    total = np.sum(x, axis=op.reduced_dims, keepdims=op.keeps_dims)
    return total / np.asarray(count, x.dtype)


@_implements(tess.ReshapeOp)
def _reshape(op: tess.ReshapeOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, _ = shape_and_dtype(op.result.type)
    return np.reshape(operands[0], shape, order="C")


@_implements(tess.PermuteOp)
def _permute(op: tess.PermuteOp, operands: list[np.ndarray]) -> np.ndarray:
    return np.transpose(operands[0], op.permutation)


@_implements(tess.BroadcastToOp)
def _broadcast_to(op: tess.BroadcastToOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, _ = shape_and_dtype(op.result.type)
    return np.broadcast_to(operands[0], shape)


@_implements(tess.FillOp)
def _fill(op: tess.FillOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, dtype = shape_and_dtype(op.result.type)
    return np.full(shape, op.fill_value, dtype=dtype)


@_implements(tess.CastOp)
def _cast(op: tess.CastOp, operands: list[np.ndarray]) -> np.ndarray:
    # Float to integer truncates toward zero (NumPy's astype); to bool is `!= 0`.
    _, dtype = shape_and_dtype(op.result.type)
    return operands[0].astype(dtype)


@_implements(tess.BitcastOp)
def _bitcast(op: tess.BitcastOp, operands: list[np.ndarray]) -> np.ndarray:
    _, dtype = shape_and_dtype(op.result.type)
    return np.ascontiguousarray(operands[0]).view(dtype)


@_implements(tess.SelectOp)
def _select(op: tess.SelectOp, operands: list[np.ndarray]) -> np.ndarray:
    cond, lhs, rhs = operands
    return np.where(cond != 0, lhs, rhs)


@_implements(tess.MatmulOp)
def _matmul(op: tess.MatmulOp, operands: list[np.ndarray]) -> np.ndarray:
    return np.matmul(operands[0], operands[1])


def normalized_indices(indices: np.ndarray, size: int) -> np.ndarray:
    """Indices into a dim of `size`: negative ones count from the end, then every index is
    clamped into [0, size) (the gather lowering's rule: a kernel never reads outside)."""
    wrapped = np.where(indices < 0, indices + size, indices)
    return np.clip(wrapped, 0, size - 1).astype(np.int64)


@_implements(tess_index.TakeOp)
def _take(op: tess_index.TakeOp, operands: list[np.ndarray]) -> np.ndarray:
    x, indices = operands
    return np.take(x, normalized_indices(indices, x.shape[op.axis]), axis=op.axis)


@_implements(tess_index.ScatterAddOp)
def _scatter_add(op: tess_index.ScatterAddOp, operands: list[np.ndarray]) -> np.ndarray:
    y, indices = operands
    shape, dtype = shape_and_dtype(op.result.type)
    dim = op.axis
    result = np.zeros(shape, dtype)
    positions = normalized_indices(indices, shape[dim]).reshape(-1)
    # y's index dims, flattened, then the gathered dim's position in its place.
    rows = y.reshape(*y.shape[:dim], positions.size, *shape[dim + 1 :])
    moved = np.moveaxis(result, dim, 0)
    np.add.at(moved, positions, np.moveaxis(rows, dim, 0))
    return result


@_implements(tess_index.OneHotOp)
def _one_hot(op: tess_index.OneHotOp, operands: list[np.ndarray]) -> np.ndarray:
    labels = operands[0]
    return labels[..., None] == np.arange(op.classes)


def _arg_reduce(function: Callable[..., np.ndarray]) -> OpImplementation:
    # np.argmax/argmin: the first extreme, a NaN counting as the extreme.
    return lambda op, operands: function(operands[0], axis=op.axis, keepdims=op.keeps_dims)


OP_IMPLEMENTATIONS[tess_index.ArgMaxOp] = _arg_reduce(np.argmax)
OP_IMPLEMENTATIONS.update(ATTENTION_IMPLEMENTATIONS)
OP_IMPLEMENTATIONS[tess_index.ArgMinOp] = _arg_reduce(np.argmin)


def _slices(offsets: Sequence[int], strides: Sequence[int], sizes: Sequence[int]) -> tuple:
    """The basic NumPy index of a strided slice (negative strides included)."""
    index = []
    for offset, stride, size in zip(offsets, strides, sizes, strict=True):
        stop = offset + size * stride
        index.append(slice(offset, stop if stop >= 0 else None, stride))
    return tuple(index)


@_implements(tess_index.SliceOp)
def _slice(op: tess_index.SliceOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, _ = shape_and_dtype(op.result.type)
    return operands[0][_slices(op.static_offsets, op.static_strides, shape)]


@_implements(tess_index.UnsliceOp)
def _unslice(op: tess_index.UnsliceOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, dtype = shape_and_dtype(op.result.type)
    result = np.zeros(shape, dtype)
    result[_slices(op.static_offsets, op.static_strides, operands[0].shape)] = operands[0]
    return result


@_implements(tess_index.ConcatOp)
def _concat(op: tess_index.ConcatOp, operands: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(operands, axis=op.axis)


def _window(
    kernel_offset: Sequence[int],
    dilations: Sequence[int],
    strides: Sequence[int],
    out: Sequence[int],
) -> tuple[slice, ...]:
    """The padded-input elements tap `kernel_offset` reads for every output position."""
    return tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, d, s, o in zip(kernel_offset, dilations, strides, out, strict=True)
    )


def _padded(x: np.ndarray, low: Sequence[int], high: Sequence[int], value: float) -> np.ndarray:
    """`x` padded on its last `len(low)` dims."""
    if x.ndim == 0:  # nothing to pad, and np.pad refuses a 0-d array
        return x.copy()
    lead = [(0, 0)] * (x.ndim - len(low))
    return np.pad(x, [*lead, *zip(low, high, strict=True)], constant_values=value)


@_implements(tess_conv.PadOp)
def _pad(op: tess_conv.PadOp, operands: list[np.ndarray]) -> np.ndarray:
    return _padded(operands[0], op.static_low, op.static_high, op.pad_value)


@_implements(tess_conv.ConvOp)
def _conv(op: tess_conv.ConvOp, operands: list[np.ndarray]) -> np.ndarray:
    x, w = operands
    shape, _ = shape_and_dtype(op.result.type)
    xp = _padded(x, op.static_low, op.static_high, 0.0)
    groups = op.group_count
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    result = np.zeros(shape, x.dtype)
    for g in range(groups):
        xg, wg = xp[:, g * cg : (g + 1) * cg], w[g * fg : (g + 1) * fg]
        for k in np.ndindex(*w.shape[2:]):
            taps = _window(k, op.static_dilations, op.static_strides, shape[2:])
            patch = xg[(slice(None), slice(None), *taps)]  # (N, C/G, *out)
            result[:, g * fg : (g + 1) * fg] += np.einsum("nc...,fc->nf...", patch, wg[(..., *k)])
    return result


def _windows(op: tess_conv.PoolOp | tess_conv.UnpoolOp, out: Sequence[int]) -> list[tuple]:
    """For each kernel offset, in row-major order, the index of its taps in the padded
    input for every output position."""
    kernel = op.static_kernel
    lead = (slice(None),) * (len(out) - len(kernel))
    return [
        (*lead, *_window(k, [1] * len(kernel), op.static_strides, out[len(out) - len(kernel) :]))
        for k in np.ndindex(*kernel)
    ]


@_implements(tess_conv.PoolOp)
def _pool(op: tess_conv.PoolOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, _ = shape_and_dtype(op.result.type)
    fill = 0.0 if op.pool_kind == "avg" else -np.inf
    xp = _padded(operands[0], op.static_low, op.static_high, fill)
    taps = np.stack([xp[index] for index in _windows(op, shape)], axis=-1)
    if op.pool_kind == "avg":
        return taps.sum(-1) / taps.shape[-1]
    if op.pool_kind == "max":
        return taps.max(-1)
    return taps.argmax(-1)  # the first maximum


@_implements(tess_conv.UnpoolOp)
def _unpool(op: tess_conv.UnpoolOp, operands: list[np.ndarray]) -> np.ndarray:
    grad = operands[0]
    shape, dtype = shape_and_dtype(op.result.type)
    padded = _padded(np.zeros(shape, dtype), op.static_low, op.static_high, 0.0)
    for offset, index in enumerate(_windows(op, grad.shape)):
        routed = grad if len(operands) == 1 else np.where(operands[1] == offset, grad, 0)
        padded[index] += routed
    spatial = len(op.static_kernel)
    unpad = tuple(slice(lo, lo + n) for lo, n in zip(op.static_low, shape[-spatial:], strict=True))
    return padded[(..., *unpad)]


@_implements(arith.ConstantOp)
def _constant(op: arith.ConstantOp, operands: list[np.ndarray]) -> np.ndarray:
    shape, dtype = shape_and_dtype(op.result.type)
    value = op.value
    if isinstance(value, DenseIntOrFPElementsAttr):
        data = np.asarray(value.get_values(), dtype=dtype)
        if data.size == 1:
            # A splat: one value for the whole tensor.
            return np.full(shape, data.reshape(()), dtype=dtype)
        return data.reshape(shape)
    if isinstance(value, FloatAttr | IntegerAttr):
        return np.asarray(value.value.data, dtype=dtype)
    raise NotImplementedError(f"unsupported arith.constant value {value}")


# ---------------------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------------------


def find_func(module: ModuleOp, func_name: str) -> func.FuncOp:
    """The top-level `func.func @func_name` of `module`; KeyError names the known funcs."""
    found = lookup_function(module, func_name)
    if found is None:
        names = [f.sym_name.data for f in module_functions(module)]
        raise KeyError(f"no func.func @{func_name} in the module (it has: {', '.join(names)})")
    return found


def check_arguments(func_op: func.FuncOp, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`args` as arrays, after checking their count, shapes and dtypes against the signature."""
    name = func_op.sym_name.data
    inputs = func_op.function_type.inputs.data
    if len(args) != len(inputs):
        raise ValueError(f"@{name} takes {len(inputs)} arguments, got {len(args)}")
    checked: list[np.ndarray] = []
    for index, (arg, typ) in enumerate(zip(args, inputs, strict=True)):
        shape, dtype = shape_and_dtype(typ)
        array = np.asarray(arg)
        if array.shape != shape:
            raise ValueError(
                f"argument {index} of @{name} has shape {format_shape(array.shape)}, "
                f"expected {format_shape(shape)} ({typ})"
            )
        if array.dtype != dtype:
            raise ValueError(
                f"argument {index} of @{name} has dtype {array.dtype}, expected {dtype} ({typ})"
            )
        checked.append(array)
    return checked


def _as_declared(op: Operation, index: int, value: Any) -> np.ndarray:
    """`value` as an array of the declared dtype; AssertionError on a shape mismatch."""
    typ = op.results[index].type
    shape, dtype = shape_and_dtype(typ)
    array = np.asarray(value).astype(dtype, copy=False)
    if array.shape != shape:
        raise AssertionError(
            f"reference '{op.name}' computed shape {format_shape(array.shape)} for result "
            f"{index}, but the IR declares {typ}"
        )
    return array


def _run_func(module: ModuleOp, func_op: func.FuncOp, args: list[np.ndarray]) -> list[np.ndarray]:
    if not func_op.body.blocks:
        raise ValueError(f"@{func_op.sym_name.data} is a declaration without a body")
    if len(func_op.body.blocks) != 1:
        raise NotImplementedError(f"@{func_op.sym_name.data} has more than one block")
    block = func_op.body.block
    values: dict[SSAValue, np.ndarray] = dict(zip(block.args, args, strict=True))

    for op in block.ops:
        operands = [values[operand] for operand in op.operands]
        if isinstance(op, func.ReturnOp):
            return operands
        if isinstance(op, func.CallOp):
            callee = find_func(module, op.callee.string_value())
            results = _run_func(module, callee, check_arguments(callee, operands))
        else:
            implementation = OP_IMPLEMENTATIONS.get(type(op))
            if implementation is None:
                raise NotImplementedError(f"the reference interpreter does not know '{op.name}'")
            results = [implementation(op, operands)]
        for index, (result, value) in enumerate(zip(op.results, results, strict=True)):
            values[result] = _as_declared(op, index, value)
    raise ValueError(f"@{func_op.sym_name.data} has no func.return")


def interpret(
    module: ModuleOp, func_name: str, args: Sequence[np.ndarray]
) -> tuple[np.ndarray, ...]:
    """
    Run `func.func @func_name` of `module` on `args` and return its results.

    Arguments must match the signature exactly (count, shape and dtype; ValueError
    otherwise). The results are fresh, writable, C-contiguous arrays of the declared
    shapes and dtypes, even where the func returns an argument or a broadcast view.
    """
    func_op = find_func(module, func_name)
    arrays = check_arguments(func_op, args)
    if any(has_narrow_types(op) for op in module.walk()):
        # 16-bit tensors compute in f32 and round once per op, as the compiled code does.
        module = module.clone()
        TessWidenNarrowPass().apply(make_context(), module)
        func_op = find_func(module, func_name)
    with np.errstate(all="ignore"):
        results = _run_func(module, func_op, arrays)
    outputs = func_op.function_type.outputs.data
    if len(results) != len(outputs):
        raise ValueError(
            f"@{func_name} returns {len(results)} values but declares {len(outputs)} results"
        )
    return tuple(np.array(result, order="C", copy=True) for result in results)


def parse_module(text: str) -> ModuleOp:
    """Parse textual IR in the tessc context (all xDSL dialects plus `tess`) and verify it."""
    from tessc.context import make_context
    from tessc.dialects.dominance import verify_dominance

    module = Parser(make_context(), text).parse_module()
    module.verify()
    verify_dominance(module)
    return module


def interpret_text(text: str, func_name: str, args: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """`interpret` on a module given as textual IR."""
    return interpret(parse_module(text), func_name, args)


__all__ = [
    "OP_IMPLEMENTATIONS",
    "check_arguments",
    "find_func",
    "interpret",
    "interpret_text",
    "numpy_dtype",
    "parse_module",
    "shape_and_dtype",
]
