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
    promote_types,
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
        self.concretized: set[SSAValue] = set()  # weak inputs whose value was asked for
        self.active = True
        self._token: contextvars.Token[Trace | None] | None = None

    def input(
        self, shape: Sequence[int], dtype: DTypeLike, name: str | None, weak: bool = False
    ) -> Tensor:
        """A new argument of the function; `weak` for a Python number `jit` traces (a 0-d
        array that takes the dtype of the tensors it meets, as the number would)."""
        arg = self.block.insert_arg(tensor_type(shape, dtype), len(self.block.args))
        if name is not None and SSAValue.is_valid_name(name):
            arg.name_hint = name
        return Tensor(arg, self, weak)

    def constant(self, value: Any, dtype: DTypeLike) -> SSAValue:
        """A non-scalar constant: a `tess.fill` if it is one repeated value, else captured."""
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TessError(f"cannot use an array of dtype {array.dtype} as a tensor")
        if array.dtype.kind == "f" and numpy_dtype(dtype).kind != "f":
            dtype = np.float32  # floats next to integer tensors: promoted, never truncated
        array = np.ascontiguousarray(array, dtype=numpy_dtype(dtype))
        if array.size and np.all(array == array.flat[0]):
            return self.builder.fill(float(array.flat[0]), array.shape, dtype)
        self.constants.append(array)
        return self.input(array.shape, dtype, "const").value

    def operand(self, value: Any, dtype: DTypeLike) -> SSAValue | float | int | None:
        """`value` as a builder operand of `dtype` (None if it cannot be one). A number stays
        a Python number (bool, int or float): the builder types it weakly."""
        if isinstance(value, Tensor):
            return self.own(value)
        if isinstance(value, np.number | np.bool_):
            return value.item()
        if isinstance(value, bool | int | float):
            return value
        if isinstance(value, np.ndarray | list | tuple):
            array = np.asarray(value)
            if array.ndim == 0 and array.dtype.kind in "biuf":
                return array.item()
            return self.constant(array, dtype)
        return None

    def indices(self, value: Any) -> SSAValue:
        """Integer indices: a Tensor, or an array captured in its own integer dtype."""
        if isinstance(value, Tensor):
            return self.own(value)
        array = np.asarray(value)
        if array.dtype.kind not in "iu" or (array.dtype.kind == "u" and array.dtype.itemsize > 4):
            if array.dtype.kind == "b":
                raise TessError(
                    "boolean mask indexing gives a data-dependent shape, which tessc cannot "
                    "trace; use tessc.where"
                )
            raise TessError(f"indices must be integers, got an array of dtype {array.dtype}")
        dtype = np.int32 if array.dtype.itemsize <= 4 and array.dtype.kind == "i" else np.int64
        array = np.ascontiguousarray(array, dtype=dtype)
        if array.ndim == 0:
            return self.builder.fill(float(array), (), dtype)
        self.constants.append(array)
        return self.input(array.shape, dtype, "indices").value

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
    if any(isinstance(v, Tensor) and v.weak for v in operands):
        operands = _weak_cast(trace, operands)
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


def _weak_cast(trace: Trace, operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """Weak Tensors (traced Python numbers) cast to the dtype the numbers would give with
    the other operands (`promote_types`), so `x * step` has `x`'s dtype as `x * 3` has."""
    strong = [v for v in operands if isinstance(v, Tensor) and not v.weak]
    if not strong:
        return operands
    numbers = [
        (0.0 if v.dtype.kind == "f" else 0) if isinstance(v, Tensor) and v.weak else v
        for v in operands
        if not isinstance(v, Tensor) or v.weak
    ]
    builder = trace.builder
    dtype = promote_types(
        [element_type_of(trace.own(v)) for v in strong], numbers, builder.default_float
    )
    return tuple(
        Tensor(builder.cast(trace.own(v), dtype), trace) if isinstance(v, Tensor) and v.weak else v
        for v in operands
    )


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

    __hash__ = object.__hash__

    @_located
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """`np.exp(t)`, `array + t`, `np.maximum(t, 0)`: NumPy's ufuncs on a traced Tensor
        build the tess op of the same meaning (`NUMPY_UFUNCS`); any other is a TessError
        naming what to write instead."""
        return _numpy_ufunc(ufunc, method, inputs, kwargs)

    @_located
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """`np.sum(t, axis=1)`, `np.concatenate([t, u])`, `np.where(c, t, 0)`: NumPy's
        functions on a traced Tensor map to tessc's (`NUMPY_FUNCTIONS`)."""
        return _numpy_function(func, args, kwargs)

    def __init__(self, value: SSAValue, trace: Trace, weak: bool = False):
        self.value = value
        self.trace = trace
        self.weak = weak

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
    def __index__(self) -> int:
        if self.weak:
            self.trace.concretized.add(self.value)
            raise TessError(
                "a Python number given to a jit function is traced (its value is not known "
                "while tracing): to use it as a Python value (a shape, a dim, an index, a "
                "loop count), name it in jit's static_argnums or static_argnames"
            )
        raise TypeError("a traced Tensor has no value yet; it cannot be a Python number")

    __int__ = __index__

    @_located
    def __float__(self) -> float:
        return float(self.__index__())

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
    __and__ = logical_and = _binary_method("logical_and")
    __rand__ = _binary_method("logical_and", reverse=True)
    __or__ = logical_or = _binary_method("logical_or")
    __ror__ = _binary_method("logical_or", reverse=True)
    __xor__ = logical_xor = _binary_method("logical_xor")
    __rxor__ = _binary_method("logical_xor", reverse=True)
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
    sin = _unary_method("sin")
    cos = _unary_method("cos")

    __invert__ = logical_not = _unary_method("logical_not")

    def __pos__(self) -> Tensor:
        return self

    @_located
    def astype(self, dtype: DTypeLike) -> Tensor:
        """This tensor converted to `dtype` (`tess.cast`): float to int truncates toward zero,
        anything to bool is `!= 0`."""
        return _apply("cast", self, dtype=dtype)

    @_located
    def clip(self, min: Any = None, max: Any = None) -> Tensor:
        """`min(max(x, min), max)`; either bound may be None (NumPy's `clip`)."""
        result = self
        if min is not None:
            result = _apply("maximum", result, min)
        if max is not None:
            result = _apply("minimum", result, max)
        return result

    # -- indexing ---------------------------------------------------------------------------

    @_located
    def take(self, indices: Any, dim: int = 0, *, axis: int | None = None) -> Tensor:
        """Gather along `dim` at integer `indices` (a Tensor or an array; NumPy's `take`)."""
        dim = axis if axis is not None else dim
        return Tensor(
            self.trace.builder.take(self.value, self.trace.indices(indices), dim), self.trace
        )

    @_located
    def argmax(self, dim: int | None = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The int64 index of the first maximum along `dim` (the flattened tensor if None)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("argmax", self, dim=dim, keepdim=keepdim)

    @_located
    def argmin(self, dim: int | None = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("argmin", self, dim=dim, keepdim=keepdim)

    @_located
    def __getitem__(self, key: Any) -> Tensor:
        """NumPy indexing: ints, slices (any step), `None`, `...` as `tess.slice` views and
        reshapes; one integer array (or integer Tensor) as a gather (`tess.take`)."""
        return _getitem(self, key)

    # -- reductions: dim is None (all), an int or a tuple; negative dims count back --------

    @_located
    def sum(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """Sum over `dim` (`axis=`/`keepdims=` are accepted as NumPy spells them)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("sum", self, dims=dim, keepdim=keepdim)

    @_located
    def mean(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("mean", self, dims=dim, keepdim=keepdim)

    @_located
    def max(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The max over `dim` (values only; the elementwise max is `maximum`)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("reduce_max", self, dims=dim, keepdim=keepdim)

    @_located
    def min(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("reduce_min", self, dims=dim, keepdim=keepdim)

    @_located
    def prod(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The product over `dim` (its gradient is NaN where a reduced element is 0)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return _apply("prod", self, dims=dim, keepdim=keepdim)

    @_located
    def var(
        self, dim: DimsLike = None, keepdim: bool = False, *, ddof: int = 0, **aliases: Any
    ) -> Tensor:
        """The variance over `dim`: the mean squared deviation, divided by `n - ddof` (NumPy's
        default ddof=0; torch's `var` is ddof=1, `correction=` is accepted for it)."""
        ddof = aliases.pop("correction", ddof)
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        x = self if self.dtype.kind == "f" else self.astype(np.float32)
        centered = x - x.mean(dim, keepdim=True)
        squares = (centered * centered).sum(dim, keepdim=keepdim)
        count = x.size // max(_kept_size(x, dim), 1)
        return squares / float(count - ddof)

    @_located
    def std(
        self, dim: DimsLike = None, keepdim: bool = False, *, ddof: int = 0, **aliases: Any
    ) -> Tensor:
        """The square root of `var` (same arguments)."""
        return self.var(dim, keepdim, ddof=ddof, **aliases).sqrt()

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
    def transpose(self, *axes: Any) -> Tensor:
        """`x.transpose(1, 0, 2)` or `x.transpose((1, 0, 2))` permutes the dims (NumPy);
        `x.transpose(d0, d1)` on a tensor of rank > 2 swaps two (PyTorch); `x.transpose()`
        swaps the last two (the reversal for a matrix; `.T` reverses all dims)."""
        if not axes:
            return _apply("transpose", self)
        dims = _shape_args(axes)
        if len(dims) == 2 and self.ndim != 2:
            return _apply("transpose", self, dim0=dims[0], dim1=dims[1])
        return _apply("permute", self, dims=dims)

    @_located
    def squeeze(self, dim: DimsLike = None, *, axis: DimsLike = None) -> Tensor:
        """Drop the size-1 dims (only `dim`, if given)."""
        return _apply("squeeze", self, dims=axis if axis is not None else dim)

    @_located
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Dims `start_dim..end_dim` merged into one (all: a 1-D tensor, NumPy's flatten)."""
        return _apply("flatten", self, start=start_dim, end=end_dim)

    ravel = flatten

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


# NumPy ufunc name -> the tessc function (a Tensor method or a module-level form) it is.
def _binary_ufunc(name: str) -> Callable[[Any, Any], Tensor]:
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
            ("power", "pow"),
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
}

# NumPy function name -> tessc function; `axis`/`keepdims` pass through (aliases).
NUMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sum": lambda a, axis=None, keepdims=False: a.sum(axis=axis, keepdims=keepdims),
    "prod": lambda a, axis=None, keepdims=False: a.prod(axis=axis, keepdims=keepdims),
    "mean": lambda a, axis=None, keepdims=False: a.mean(axis=axis, keepdims=keepdims),
    "max": lambda a, axis=None, keepdims=False: a.max(axis=axis, keepdims=keepdims),
    "amax": lambda a, axis=None, keepdims=False: a.max(axis=axis, keepdims=keepdims),
    "min": lambda a, axis=None, keepdims=False: a.min(axis=axis, keepdims=keepdims),
    "amin": lambda a, axis=None, keepdims=False: a.min(axis=axis, keepdims=keepdims),
    "var": lambda a, axis=None, keepdims=False, ddof=0: a.var(
        axis=axis, keepdims=keepdims, ddof=ddof
    ),
    "std": lambda a, axis=None, keepdims=False, ddof=0: a.std(
        axis=axis, keepdims=keepdims, ddof=ddof
    ),
    "argmax": lambda a, axis=None, keepdims=False: a.argmax(axis=axis, keepdims=keepdims),
    "argmin": lambda a, axis=None, keepdims=False: a.argmin(axis=axis, keepdims=keepdims),
    "reshape": lambda a, shape, *rest: a.reshape(shape),
    "transpose": lambda a, axes=None: a.T if axes is None else a.transpose(*axes),
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
    "matmul": lambda a, b: _lift(a, (b,)) @ b,
    "dot": lambda a, b: _lift(a, (b,)) @ b,
    "broadcast_to": lambda a, shape: _lift(a, ()).broadcast_to(shape),
}


def _numpy_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = getattr(ufunc, "__name__", str(ufunc))
    if method != "__call__" or kwargs.get("out") is not None:
        raise TessError(
            f"np.{name}.{method} (or out=) on a traced Tensor has no tessc form; "
            "use the Tensor methods (x.sum(axis=...), ...)"
        )
    function = NUMPY_UFUNCS.get(name)
    if function is None:
        raise TessError(
            f"np.{name} on a traced Tensor has no tessc equivalent; tessc has "
            f"{', '.join('np.' + n for n in sorted(NUMPY_UFUNCS))}"
        )
    return _located(function)(*inputs)


def _numpy_function(func: Any, args: Any, kwargs: Any) -> Any:
    name = getattr(func, "__name__", str(func))
    function = NUMPY_FUNCTIONS.get(name)
    if function is None:
        raise TessError(
            f"np.{name} on a traced Tensor has no tessc equivalent; tessc maps "
            f"{', '.join('np.' + n for n in sorted(NUMPY_FUNCTIONS))} (and NumPy's ufuncs)"
        )
    return _located(function)(*args, **kwargs)


def _axis_aliases(dim: Any, keepdim: bool, aliases: dict[str, Any]) -> tuple[Any, bool]:
    """`dim`/`keepdim` with NumPy's `axis=`/`keepdims=` spellings folded in."""
    if "axis" in aliases:
        if dim is not None:
            raise TessError("pass either dim= or axis=, not both")
        dim = aliases.pop("axis")
    keepdim = bool(aliases.pop("keepdims", keepdim))
    if aliases:
        raise TessError(f"unexpected keyword arguments: {', '.join(sorted(aliases))}")
    if isinstance(dim, list):
        dim = tuple(dim)
    return dim, keepdim


def _kept_size(x: Tensor, dim: DimsLike) -> int:
    """The number of elements left after reducing `dim` (all dims if None)."""
    if dim is None:
        return 1
    dims = {d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim)}
    return int(np.prod([n for d, n in enumerate(x.shape) if d not in dims], dtype=np.int64))


def _getitem(x: Tensor, key: Any) -> Tensor:
    """`x[key]` for NumPy's basic indexing plus one integer-array index (see __getitem__)."""
    items = list(key) if isinstance(key, tuple) else [key]
    arrays = [
        i
        for i, item in enumerate(items)
        if isinstance(item, Tensor | np.ndarray | list)
        or (isinstance(item, np.generic) and not isinstance(item, np.integer))
    ]
    if len(arrays) > 1:
        raise TessError("only one integer-array index per subscript is supported (use take)")
    if sum(item is Ellipsis for item in items) > 1:
        raise TessError("an index can only have a single ellipsis ('...')")
    consumed = sum(item is not None and item is not Ellipsis for item in items)
    if consumed > x.ndim:
        raise TessError(f"too many indices for a tensor of rank {x.ndim}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (x.ndim - consumed)
    items += [slice(None)] * (x.ndim - sum(item is not None for item in items))
    offsets: list[int] = []
    strides: list[int] = []
    sizes: list[int] = []
    result_shape: list[int] = []
    gather_dim: int | None = None
    dim = 0
    for position, item in enumerate(items):
        if item is None:
            result_shape.append(1)
            continue
        n = x.shape[dim]
        if position in arrays:
            gather_dim = len(result_shape)
            start, step, count = 0, 1, n
            result_shape.append(n)
        elif isinstance(item, slice):
            start, _, step = item.indices(n)
            count = len(range(*item.indices(n)))
            start = start if count else 0
            result_shape.append(count)
        elif isinstance(item, int | np.integer) and not isinstance(item, bool):
            if not -n <= int(item) < n:
                raise TessError(f"index {int(item)} is out of range for dim {dim} of size {n}")
            start, step, count = int(item) % n, 1, 1
        else:
            raise TessError(f"cannot index a Tensor with {type(item).__name__}")
        offsets.append(start)
        strides.append(step)
        sizes.append(count)
        dim += 1
    builder = x.trace.builder
    value = builder.slice(x.value, offsets, strides, sizes)
    if tuple(result_shape) != tuple(sizes):
        value = builder.reshape(value, result_shape)
    if gather_dim is not None:
        # The gathered dim was kept whole: take replaces it with the index dims.
        value = builder.take(value, x.trace.indices(items[arrays[0]]), gather_dim)
    return Tensor(value, x.trace)


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


def _tensors(xs: Sequence[Any]) -> tuple[Trace, list[SSAValue]]:
    trace = _trace_of(*xs)
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


@_located
def concatenate(xs: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """The tensors one after another along `dim` (`tess.concat`)."""
    trace, values = _tensors(list(xs))
    return Tensor(trace.builder.concatenate(values, axis if axis is not None else dim), trace)


@_located
def stack(xs: Sequence[Any], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """The tensors (of one shape) along a new dim `dim`."""
    trace, values = _tensors(list(xs))
    return Tensor(trace.builder.stack(values, axis if axis is not None else dim), trace)


@_located
def one_hot(labels: Any, classes: int, dtype: DTypeLike = "f32") -> Tensor:
    """`(..., classes)` of `dtype`: 1 where the last index is the label (an integer), else 0."""
    trace = _trace_of(labels)
    return Tensor(trace.builder.one_hot(trace.indices(labels), classes, dtype), trace)


@_located
def take(x: Any, indices: Any, dim: int = 0, *, axis: int | None = None) -> Tensor:
    """`x` gathered along `dim` at integer `indices` (NumPy's `take`; see `Tensor.take`)."""
    return _lift(x, (indices,)).take(indices, dim, axis=axis)


@_located
def stop_gradient(x: Tensor) -> Tensor:
    """`x`, as a constant to `grad` (JAX's `stop_gradient`)."""
    return _apply("stop_gradient", x)


@_located
def clip(x: Any, min: Any = None, max: Any = None) -> Tensor:
    """`x` clipped to [min, max] (NumPy's `clip`; either bound may be None)."""
    return _lift(x, (min, max)).clip(min, max)


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
