"""
Tracing Python functions on NumPy arrays into `tess` IR: `Tensor` and the `Trace` it is in.

`jit` (`tessc.frontend.jit`) runs a function with `Tensor`s standing in for its array
arguments. Every operator and method of a `Tensor` emits one `tess` op through the trace's
`TessBuilder`, so the trace is the `tess` program of the function. The function forms
(`tessc.exp(x)`, `tessc.where(c, a, b)`, `tessc.full(...)`) build into the same trace.

Operands that are not Tensors follow the "weak type" rule: they take the Tensor's dtype.
A Python number becomes a rank-0 `tess.fill` that the op broadcasts. A NumPy array (or a
list of numbers) that is one repeated value becomes a `tess.fill` of its shape; any other
array is *captured*: it becomes an extra argument of the traced function, after the
user's, and `jit` passes its value (taken at trace time, as in JAX) on every call. This
is how the IR stays within `tess`, which has no dense-constant op.

Shape and dtype errors are raised at trace time in the user's terms, at the line of the
user's code that built the op: "cannot broadcast (3,4,1) with (3,5) in `x + y` at
mlp.py:12".
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import linecache
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np
from xdsl.ir import Block, SSAValue

from tessc.dialects.builder import (
    DimsLike,
    DTypeLike,
    TessBuilder,
    TessError,
    dtype_name,
    element_type_of,
    numpy_dtype,
    shape_of,
    tensor_type,
)

# ---------------------------------------------------------------------------------------
# errors located in the user's code
# ---------------------------------------------------------------------------------------

_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, os.path.dirname(os.path.abspath(__file__)))
)


@dataclass(frozen=True)
class UserLocation:
    """Where in the user's code an op was built: the file, line and expression text."""

    filename: str
    lineno: int
    source: str | None = None

    def __str__(self) -> str:
        path = os.path.abspath(self.filename)
        shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else self.filename
        return f"{shown}:{self.lineno}"


class TraceError(TessError):
    """A `TessError` located in the user's code (`location`), raised while tracing."""

    def __init__(self, message: str, location: UserLocation | None):
        self.message = message
        self.location = location
        text = message
        if location is not None:
            if location.source:
                text += f" in `{location.source}`"
            text += f" at {location}"
        super().__init__(text)


def user_location() -> UserLocation | None:
    """The innermost frame outside tessc: the user's code that called into the tracer."""
    frame: FrameType | None = inspect.currentframe()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _INTERNAL_DIRS
    ):
        frame = frame.f_back
    if frame is None:
        return None
    return UserLocation(frame.f_code.co_filename, frame.f_lineno, _expression_source(frame))


def _expression_source(frame: FrameType) -> str | None:
    """The text of the expression `frame` is executing (from the code's column table)."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    start_line, end_line, start_col, end_col = positions[index]
    if None in (start_line, end_line, start_col, end_col):
        return None
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if not lines or end_line > len(lines):
        return None
    # Columns count UTF-8 bytes.
    chunk = [line.rstrip("\n").encode() for line in lines[start_line - 1 : end_line]]
    chunk[-1] = chunk[-1][:end_col]
    chunk[0] = chunk[0][start_col:]
    text = " ".join(part.decode(errors="replace").strip() for part in chunk)
    return re.sub(r"\s+", " ", text) or None


def _located(method: Callable) -> Callable:
    """Re-raise a `TessError` from `method` as a `TraceError` at the user's line."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TraceError:
            raise
        except TessError as error:
            raise TraceError(str(error), user_location()) from None

    return wrapper


# ---------------------------------------------------------------------------------------
# a trace in progress
# ---------------------------------------------------------------------------------------

_CURRENT_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "tessc_current_trace", default=None
)


class Trace:
    """The function being built: its entry block, a builder, and the captured constants."""

    def __init__(self) -> None:
        self.block = Block()
        self.builder = TessBuilder.at_end(self.block)
        self.constants: list[np.ndarray] = []
        self.active = True
        self._token: contextvars.Token[Trace | None] | None = None

    def input(self, shape: Sequence[int], dtype: DTypeLike, name: str | None) -> Tensor:
        arg = self.block.insert_arg(tensor_type(shape, dtype), len(self.block.args))
        if name is not None and SSAValue.is_valid_name(name):
            arg.name_hint = name
        return Tensor(arg, self)

    def constant(self, value: Any, dtype: DTypeLike) -> SSAValue:
        """A non-scalar constant: a `tess.fill` if it is one repeated value, else captured."""
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TessError(f"cannot use an array of dtype {array.dtype} as a tensor")
        array = np.ascontiguousarray(array, dtype=numpy_dtype(dtype))
        if array.size and np.all(array == array.flat[0]):
            return self.builder.fill(float(array.flat[0]), array.shape, dtype)
        self.constants.append(array)
        return self.input(array.shape, dtype, "const").value

    def operand(self, value: Any, dtype: DTypeLike) -> SSAValue | float | None:
        """`value` as a builder operand of `dtype` (None if it cannot be one)."""
        if isinstance(value, Tensor):
            return self.own(value)
        if isinstance(value, bool | int | float | np.number | np.bool_):
            return float(value)
        if isinstance(value, np.ndarray | list | tuple):
            array = np.asarray(value)
            if array.ndim == 0 and array.dtype.kind in "biuf":
                return float(array)
            return self.constant(array, dtype)
        return None

    def __enter__(self) -> Trace:
        """Make this the current trace (the one `tessc.full` and friends build into) while
        the traced function runs; on exit it is finished: its Tensors may not be used."""
        self._token = _CURRENT_TRACE.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        _CURRENT_TRACE.reset(self._token)
        self.active = False

    def own(self, tensor: Tensor) -> SSAValue:
        if tensor.trace is not self:
            raise TessError(
                "a Tensor from another trace is used here (did a Tensor escape a jit function?)"
            )
        return tensor.value


def _is_operand(value: Any) -> bool:
    """Whether `Trace.operand` accepts `value` (checked before converting it)."""
    return isinstance(
        value, Tensor | bool | int | float | np.number | np.bool_ | np.ndarray | list | tuple
    )


def _trace_of(*values: Any) -> Trace:
    for value in values:
        if isinstance(value, Tensor):
            if not value.trace.active:
                raise TessError("this Tensor belongs to a finished trace")
            return value.trace
    trace = _CURRENT_TRACE.get()
    if trace is None:
        raise TessError("expected a traced Tensor: call this inside a @tessc.jit function")
    return trace


def _apply(name: str, *operands: Any, **options: Any) -> Tensor:
    """`builder.<name>(*operands, **options)` with operands converted in their trace."""
    trace = _trace_of(*operands)
    tensors = [v for v in operands if isinstance(v, Tensor)]
    dtype = tensors[0].dtype if tensors else np.float32
    values = []
    for operand in operands:
        value = trace.operand(operand, dtype)
        if value is None:
            raise TessError(f"expected a tensor or a number, got {type(operand).__name__}")
        values.append(value)
    if not any(isinstance(v, SSAValue) for v in values):
        raise TessError(f"`{name}` needs at least one tensor operand")
    return Tensor(getattr(trace.builder, name)(*values, **options), trace)


# ---------------------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------------------


def _shape_args(shape: tuple[Any, ...]) -> tuple[int, ...]:
    """`f(2, 3)` or `f((2, 3))` -> (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    return tuple(int(d) for d in shape)


def _binary_method(name: str, reverse: bool = False) -> Callable[[Tensor, Any], Tensor]:
    """A Tensor method (or reflected operator) building `builder.<name>(self, other)`."""

    @_located
    def method(self: Tensor, other: Any) -> Tensor:
        return self._zip(name, other, reverse)

    method.__name__ = name
    method.__doc__ = f"`{name}` (tess.{name}), broadcasting; numbers take this dtype."
    return method


def _unary_method(name: str) -> Callable[[Tensor], Tensor]:
    @_located
    def method(self: Tensor) -> Tensor:
        return _apply(name, self)

    method.__name__ = name
    method.__doc__ = f"`tess.{name}`, elementwise."
    return method


class Tensor:
    """A traced tensor: the `tess` SSA value an operation on the input arrays produced."""

    __array_ufunc__ = None  # NumPy defers to our reflected operators (`array + tensor`)
    __hash__ = object.__hash__

    def __init__(self, value: SSAValue, trace: Trace):
        self.value = value
        self.trace = trace

    # -- what it is -----------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value)

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(element_type_of(self.value))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a rank-0 Tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Tensor({dtype_name(self.dtype)}{list(self.shape)}, traced)"

    @_located
    def __bool__(self) -> bool:
        raise TessError(
            "a traced Tensor has no truth value: Python control flow on tensor values "
            "cannot be traced (use tessc.where)"
        )

    @_located
    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TessError("a traced Tensor has no value yet; it cannot become a NumPy array")

    # -- operators and elementwise methods -------------------------------------------------

    def _zip(self, name: str, other: Any, reverse: bool = False) -> Tensor:
        if not _is_operand(other):
            return NotImplemented
        return _apply(name, other, self) if reverse else _apply(name, self, other)

    __add__ = _binary_method("add")
    __radd__ = _binary_method("add", reverse=True)
    __sub__ = _binary_method("sub")
    __rsub__ = _binary_method("sub", reverse=True)
    __mul__ = _binary_method("mul")
    __rmul__ = _binary_method("mul", reverse=True)
    __truediv__ = _binary_method("div")
    __rtruediv__ = _binary_method("div", reverse=True)
    __pow__ = _binary_method("pow")
    __rpow__ = _binary_method("pow", reverse=True)
    __matmul__ = _binary_method("matmul")
    __rmatmul__ = _binary_method("matmul", reverse=True)
    __lt__ = _binary_method("lt")
    __gt__ = _binary_method("gt")
    __le__ = _binary_method("le")
    __ge__ = _binary_method("ge")
    __eq__ = _binary_method("eq")  # type: ignore[assignment]
    __ne__ = _binary_method("ne")  # type: ignore[assignment]
    pow = _binary_method("pow")
    matmul = _binary_method("matmul")
    maximum = _binary_method("maximum")
    minimum = _binary_method("minimum")

    __neg__ = neg = _unary_method("neg")
    __abs__ = abs = _unary_method("abs")
    exp = _unary_method("exp")
    log = _unary_method("log")
    relu = _unary_method("relu")
    sigmoid = _unary_method("sigmoid")
    tanh = _unary_method("tanh")
    sqrt = _unary_method("sqrt")
    reciprocal = _unary_method("reciprocal")

    def __pos__(self) -> Tensor:
        return self

    # -- reductions: dim is None (all), an int or a tuple; negative dims count back --------

    @_located
    def sum(self, dim: DimsLike = None, keepdim: bool = False) -> Tensor:
        return _apply("sum", self, dims=dim, keepdim=keepdim)

    @_located
    def mean(self, dim: DimsLike = None, keepdim: bool = False) -> Tensor:
        return _apply("mean", self, dims=dim, keepdim=keepdim)

    @_located
    def max(self, dim: DimsLike = None, keepdim: bool = False) -> Tensor:
        """The max over `dim` (values only; the elementwise max is `maximum`)."""
        return _apply("reduce_max", self, dims=dim, keepdim=keepdim)

    @_located
    def min(self, dim: DimsLike = None, keepdim: bool = False) -> Tensor:
        return _apply("reduce_min", self, dims=dim, keepdim=keepdim)

    # -- shape ----------------------------------------------------------------------------

    @_located
    def reshape(self, *shape: Any) -> Tensor:
        """A view: `x.reshape(4, -1)` or `x.reshape((4, -1))`."""
        return _apply("reshape", self, shape=_shape_args(shape))

    view = reshape

    @_located
    def permute(self, *dims: Any) -> Tensor:
        return _apply("permute", self, dims=_shape_args(dims))

    @_located
    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        return _apply("transpose", self, dim0=dim0, dim1=dim1)

    @property
    @_located
    def T(self) -> Tensor:
        """All dims reversed (NumPy's `.T`); rank 0 and 1 are returned unchanged."""
        if self.ndim < 2:
            return self
        return _apply("permute", self, dims=tuple(reversed(range(self.ndim))))

    @_located
    def broadcast_to(self, *shape: Any) -> Tensor:
        return _apply("broadcast_to", self, shape=_shape_args(shape))

    expand = broadcast_to

    @_located
    def unsqueeze(self, dim: int) -> Tensor:
        return _apply("unsqueeze", self, dim=dim)


# ---------------------------------------------------------------------------------------
# function forms (`tessc.exp(x)`, `tessc.where(c, a, b)`, ...): made here, named in tessc
# ---------------------------------------------------------------------------------------


def tensor_function(name: str) -> Callable[..., Tensor]:
    """The Tensor method `name` as a function: `tessc.exp(x)`, `tessc.sum(x, dim=1)`, ...

    The first operand may be a number or an array too (`tessc.maximum(0.0, x)`); it takes
    the dtype of the other operands."""
    method = getattr(Tensor, name)

    @_located
    def function(x: Any, *args: Any, **kwargs: Any) -> Tensor:
        result = method(_lift(x, args), *args, **kwargs)
        if result is NotImplemented:
            raise TypeError(f"unsupported operand types for {name}: {type(args[0]).__name__}")
        return result

    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


def _lift(value: Any, others: Sequence[Any]) -> Tensor:
    if isinstance(value, Tensor):
        return value
    trace = _trace_of(*others)
    dtype = next((o.dtype for o in others if isinstance(o, Tensor)), np.dtype(np.float32))
    operand = trace.operand(value, dtype)
    if operand is None:
        raise TessError(f"expected a tensor or a number, got {type(value).__name__}")
    if not isinstance(operand, SSAValue):
        operand = trace.builder.fill(operand, (), dtype)
    return Tensor(operand, trace)


@_located
def where(cond: Any, lhs: Any, rhs: Any) -> Tensor:
    """`lhs` where `cond` is nonzero, else `rhs` (`tess.select`), broadcasting all three."""
    return _apply("select", cond, lhs, rhs)


@_located
def full(shape: Sequence[int], value: float, dtype: DTypeLike = "f32") -> Tensor:
    """A tensor of `shape` filled with `value` (`tess.fill`), inside a traced function."""
    trace = _trace_of()
    return Tensor(trace.builder.fill(value, _shape_args((shape,)), dtype), trace)


def zeros(shape: Sequence[int], dtype: DTypeLike = "f32") -> Tensor:
    return full(shape, 0.0, dtype)


def ones(shape: Sequence[int], dtype: DTypeLike = "f32") -> Tensor:
    return full(shape, 1.0, dtype)
