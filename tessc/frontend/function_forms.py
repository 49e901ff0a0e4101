"""
The function forms of the tracer: `tessc.exp(x)`, `tessc.where(c, a, b)`, `tessc.full(...)`,
and NumPy's own functions and ufuncs called on a traced `Tensor`.

A function form is the `Tensor` method of the same name (`tensor_function`), or, for what
has no method (`where`, `concatenate`, `one_hot`, `full`, ...), a builder call into the
trace its operands are in. Its first operand may be a number or an array: `lift` puts it
into the trace with the dtype of the other operands, the tracer's weak-type rule.
`np.exp(t)` and `np.sum(t, axis=1)` reach here through `Tensor.__array_ufunc__` and
`Tensor.__array_function__`: `NUMPY_UFUNCS` and `NUMPY_FUNCTIONS` map NumPy's names to
these forms; this module registers them in `numpy_protocol`'s table when it is imported
(the tracer cannot import the forms, which build its Tensors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from tessc.dialects.builder_types import DTypeLike, TessError
from tessc.frontend import composites
from tessc.frontend.numpy_protocol import register_numpy_forms
from tessc.frontend.tensor_shape import shape_args
from tessc.frontend.tracer import Tensor, Trace, build_in_trace, trace_of
from tessc.frontend.user_location import located


# NumPy ufunc name -> the tessc function (a Tensor method or a module-level form) it is.
def _binary_ufunc(name: str | Callable[..., SSAValue]) -> Callable[[Any, Any], Tensor]:
    """The builder's `name` on two operands, one a Tensor (a number stays weakly typed)."""

    def function(a: Any, b: Any) -> Tensor:
        return a._zip(name, b) if isinstance(a, Tensor) else b._zip(name, a, reverse=True)

    return function


NUMPY_UFUNCS: dict[str, Callable[..., Any]] = {
    **{
        numpy_name: _binary_ufunc(name)
        for numpy_name, name in (
            ("add", "add"),
            ("subtract", "sub"),
            ("multiply", "mul"),
            ("true_divide", "div"),
            ("divide", "div"),
            ("power", composites.power),
            ("floor_divide", composites.floor_divide),
            ("remainder", composites.remainder),
            ("matmul", "matmul"),
            ("maximum", "maximum"),
            ("minimum", "minimum"),
            ("less", "lt"),
            ("greater", "gt"),
            ("less_equal", "le"),
            ("greater_equal", "ge"),
            ("equal", "eq"),
            ("not_equal", "ne"),
            ("logical_and", "logical_and"),
            ("logical_or", "logical_or"),
            ("logical_xor", "logical_xor"),
            ("bitwise_and", "logical_and"),
            ("bitwise_or", "logical_or"),
        )
    },  # fmt: skip
    "logical_not": lambda a: a.logical_not(),
    "negative": lambda a: -a,
    "positive": lambda a: a,
    "absolute": lambda a: abs(a),
    "exp": lambda a: a.exp(),
    "sin": lambda a: a.sin(),
    "cos": lambda a: a.cos(),
    "log": lambda a: a.log(),
    "sqrt": lambda a: a.sqrt(),
    "tanh": lambda a: a.tanh(),
    "reciprocal": lambda a: a.reciprocal(),
    "square": lambda a: a * a,
    "floor": lambda a: a.floor() if a.dtype.kind == "f" else a,
    "ceil": lambda a: a.ceil() if a.dtype.kind == "f" else a,
    "rint": lambda a: a.round() if a.dtype.kind == "f" else a,
    "isnan": lambda a: a != a,
    "isfinite": lambda a: abs(a) < float("inf") if a.dtype.kind == "f" else a == a,
}

# NumPy function name -> tessc function; `axis`/`keepdims` pass through (aliases).
NUMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sum": lambda a, axis=None, keepdims=False: a.sum(axis=axis, keepdims=keepdims),
    "prod": lambda a, axis=None, keepdims=False: a.prod(axis=axis, keepdims=keepdims),
    "mean": lambda a, axis=None, keepdims=False: a.mean(axis=axis, keepdims=keepdims),
    "max": lambda a, axis=None, keepdims=False: a.amax(axis=axis, keepdims=keepdims),
    "amax": lambda a, axis=None, keepdims=False: a.amax(axis=axis, keepdims=keepdims),
    "min": lambda a, axis=None, keepdims=False: a.amin(axis=axis, keepdims=keepdims),
    "amin": lambda a, axis=None, keepdims=False: a.amin(axis=axis, keepdims=keepdims),
    "var": lambda a, axis=None, keepdims=False, ddof=0: a.var(
        axis=axis, keepdims=keepdims, ddof=ddof
    ),
    "std": lambda a, axis=None, keepdims=False, ddof=0: a.std(
        axis=axis, keepdims=keepdims, ddof=ddof
    ),
    "swapaxes": lambda a, axis1, axis2: a.transpose(axis1, axis2),
    "repeat": lambda a, repeats, axis=None: a.repeat_interleave(repeats, axis),
    "tile": lambda a, reps: a.repeat(*(1,) * (a.ndim - len(_reps(reps))), *_reps(reps)),
    "argmax": lambda a, axis=None, keepdims=False: a.argmax(axis=axis, keepdims=keepdims),
    "argmin": lambda a, axis=None, keepdims=False: a.argmin(axis=axis, keepdims=keepdims),
    "reshape": lambda a, shape, *rest: a.reshape(shape),
    "transpose": lambda a, axes=None: a.permute(
        tuple(reversed(range(a.ndim))) if axes is None else axes
    ),
    "squeeze": lambda a, axis=None: a.squeeze(axis=axis),
    "expand_dims": lambda a, axis: a.unsqueeze(axis),
    "ravel": lambda a: a.flatten(),
    "concatenate": lambda arrays, axis=0: concatenate(arrays, axis),
    "stack": lambda arrays, axis=0: stack(arrays, axis),
    "where": lambda c, a, b: where(c, a, b),
    "clip": lambda a, a_min=None, a_max=None: clip(a, a_min, a_max),
    "take": lambda a, indices, axis=None: take(
        a.flatten() if axis is None else a, indices, axis or 0
    ),
    "matmul": lambda a, b: lift(a, (b,)) @ b,
    "dot": lambda a, b: lift(a, (b,)) @ b,
    "broadcast_to": lambda a, shape: lift(a, ()).broadcast_to(shape),
}


def _reps(reps: Any) -> tuple[int, ...]:
    return tuple(reps) if isinstance(reps, Sequence) else (reps,)


def tensor_function(name: str) -> Callable[..., Tensor]:
    """The Tensor method `name` as a function: `tessc.exp(x)`, `tessc.sum(x, dim=1)`, ...

    The first operand may be a number or an array too (`tessc.maximum(0.0, x)`); it takes
    the dtype of the other operands."""
    method = getattr(Tensor, name)

    @located
    def function(x: Any, *args: Any, **kwargs: Any) -> Tensor:
        result = method(lift(x, args), *args, **kwargs)
        if result is NotImplemented:
            raise TypeError(f"unsupported operand types for {name}: {type(args[0]).__name__}")
        return result

    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


def lift(value: Any, others: Sequence[Any]) -> Tensor:
    if isinstance(value, Tensor):
        return value
    trace = trace_of(*others)
    dtype = next((o.dtype for o in others if isinstance(o, Tensor)), np.dtype(np.float32))
    operand = trace.operand(value, dtype)
    if operand is None:
        raise TessError(f"expected a tensor or a number, got {type(value).__name__}")
    if not isinstance(operand, SSAValue):
        operand = trace.builder.fill(operand, (), dtype)
    return Tensor(operand, trace)


def _tensors(xs: Sequence[Any]) -> tuple[Trace, list[SSAValue]]:
    trace = trace_of(*xs)
    dtype = next((x.dtype for x in xs if isinstance(x, Tensor)), np.dtype(np.float32))
    values = []
    for x in xs:
        value = trace.operand(x, dtype)
        if value is None:
            raise TessError(f"expected a tensor, got {type(x).__name__}")
        values.append(
            value if isinstance(value, SSAValue) else trace.builder.fill(value, (), dtype)
        )
    return trace, values


@located
def concatenate(xs: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """The tensors one after another along `dim` (`tess.concat`)."""
    trace, values = _tensors(list(xs))
    return Tensor(trace.builder.concatenate(values, axis if axis is not None else dim), trace)


@located
def stack(xs: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """The tensors (of one shape) along a new dim `dim`."""
    trace, values = _tensors(list(xs))
    return Tensor(trace.builder.stack(values, axis if axis is not None else dim), trace)


@located
def one_hot(labels: Any, classes: int, dtype: DTypeLike = "f32") -> Tensor:
    """`(..., classes)` of `dtype`: 1 where the last index is the label (an integer), else 0."""
    trace = trace_of(labels)
    return Tensor(trace.builder.one_hot(trace.indices(labels), classes, dtype), trace)


@located
def take(x: Any, indices: Any, dim: int = 0, *, axis: int | None = None) -> Tensor:
    """`x` gathered along `dim` at integer `indices` (NumPy's `take`; see `Tensor.take`)."""
    return lift(x, (indices,)).take(indices, dim, axis=axis)


@located
def stop_gradient(x: Tensor) -> Tensor:
    """`x`, as a constant to `grad` (JAX's `stop_gradient`)."""
    return build_in_trace("stop_gradient", x)


@located
def clip(x: Any, min: Any = None, max: Any = None) -> Tensor:
    """`x` clipped to [min, max] (NumPy's `clip`; either bound may be None)."""
    return lift(x, (min, max)).clip(min, max)


@located
def where(cond: Any, lhs: Any, rhs: Any) -> Tensor:
    """`lhs` where `cond` is nonzero, else `rhs` (`tess.select`), broadcasting all three."""
    return build_in_trace("select", cond, lhs, rhs)


@located
def full(shape: Sequence[int], value: float, dtype: DTypeLike = "f32") -> Tensor:
    """A tensor of `shape` filled with `value` (`tess.fill`), inside a traced function."""
    trace = trace_of()
    return Tensor(trace.builder.fill(value, shape_args((shape,)), dtype), trace)


def zeros(shape: Sequence[int], dtype: DTypeLike = "f32") -> Tensor:
    return full(shape, 0.0, dtype)


def ones(shape: Sequence[int], dtype: DTypeLike = "f32") -> Tensor:
    return full(shape, 1.0, dtype)


register_numpy_forms(NUMPY_UFUNCS, NUMPY_FUNCTIONS)
