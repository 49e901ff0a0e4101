"""
Tracing Python functions on NumPy arrays into `tess` IR: `Tensor` and the `Trace` it is in.

`jit` (`tessc.frontend.jit`) runs a function with `Tensor`s standing in for its array
arguments. Every operator and method of a `Tensor` emits one `tess` op through the trace's
`TessBuilder`, so the trace is the `tess` program of the function. The function forms
(`tessc.exp(x)`, `tessc.where(c, a, b)`, `tessc.full(...)`, `tessc.frontend.function_forms`)
build into the same trace.

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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Block, SSAValue

from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import (
    DimsLike,
    DTypeLike,
    TessError,
    dtype_name,
    numpy_dtype,
    promote_types,
    shape_of,
    tensor_type,
)
from tessc.dialects.tess import element_type_of
from tessc.frontend.advanced_index import IndexUpdateHelper, advanced_index, is_array_index
from tessc.frontend.user_location import located

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


def trace_of(*values: Any) -> Trace:
    for value in values:
        if isinstance(value, Tensor):
            if not value.trace.active:
                raise TessError("this Tensor belongs to a finished trace")
            return value.trace
    trace = _CURRENT_TRACE.get()
    if trace is None:
        raise TessError("expected a traced Tensor: call this inside a @tessc.jit function")
    return trace


def build_in_trace(name: str, *operands: Any, **options: Any) -> Tensor:
    """`builder.<name>(*operands, **options)` with operands converted in their trace."""
    trace = trace_of(*operands)
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


def shape_args(shape: tuple[Any, ...]) -> tuple[int, ...]:
    """`f(2, 3)` or `f((2, 3))` -> (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    return tuple(int(d) for d in shape)


def _binary_method(name: str, reverse: bool = False) -> Callable[[Tensor, Any], Tensor]:
    """A Tensor method (or reflected operator) building `builder.<name>(self, other)`."""

    @located
    def method(self: Tensor, other: Any) -> Tensor:
        return self._zip(name, other, reverse)

    method.__name__ = name
    method.__doc__ = f"`{name}` (tess.{name}), broadcasting; numbers take this dtype."
    return method


def _unary_method(name: str) -> Callable[[Tensor], Tensor]:
    @located
    def method(self: Tensor) -> Tensor:
        return build_in_trace(name, self)

    method.__name__ = name
    method.__doc__ = f"`tess.{name}`, elementwise."
    return method


class Tensor:
    """A traced tensor: the `tess` SSA value an operation on the input arrays produced."""

    __hash__ = object.__hash__

    @located
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """`np.exp(t)`, `array + t`, `np.maximum(t, 0)`: NumPy's ufuncs on a traced Tensor
        build the tess op of the same meaning (`NUMPY_UFUNCS`); any other is a TessError
        naming what to write instead."""
        from tessc.frontend.function_forms import numpy_ufunc

        return numpy_ufunc(ufunc, method, inputs, kwargs)

    @located
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """`np.sum(t, axis=1)`, `np.concatenate([t, u])`, `np.where(c, t, 0)`: NumPy's
        functions on a traced Tensor map to tessc's (`NUMPY_FUNCTIONS`)."""
        from tessc.frontend.function_forms import numpy_function

        return numpy_function(func, args, kwargs)

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

    @located
    def __bool__(self) -> bool:
        raise TessError(
            "a traced Tensor has no truth value: Python control flow on tensor values "
            "cannot be traced (use tessc.where)"
        )

    @located
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

    @located
    def __float__(self) -> float:
        return float(self.__index__())

    @located
    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TessError("a traced Tensor has no value yet; it cannot become a NumPy array")

    # -- operators and elementwise methods -------------------------------------------------

    def _zip(self, name: str, other: Any, reverse: bool = False) -> Tensor:
        if not _is_operand(other):
            return NotImplemented
        return build_in_trace(name, other, self) if reverse else build_in_trace(name, self, other)

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
    erf = _unary_method("erf")

    __invert__ = logical_not = _unary_method("logical_not")

    def __pos__(self) -> Tensor:
        return self

    @located
    def astype(self, dtype: DTypeLike) -> Tensor:
        """This tensor converted to `dtype` (`tess.cast`): float to int truncates toward zero,
        anything to bool is `!= 0`."""
        return build_in_trace("cast", self, dtype=dtype)

    @located
    def clip(self, min: Any = None, max: Any = None) -> Tensor:
        """`min(max(x, min), max)`; either bound may be None (NumPy's `clip`)."""
        result = self
        if min is not None:
            result = build_in_trace("maximum", result, min)
        if max is not None:
            result = build_in_trace("minimum", result, max)
        return result

    # -- indexing ---------------------------------------------------------------------------

    @located
    def take(self, indices: Any, dim: int = 0, *, axis: int | None = None) -> Tensor:
        """Gather along `dim` at integer `indices` (a Tensor or an array; NumPy's `take`)."""
        dim = axis if axis is not None else dim
        return Tensor(
            self.trace.builder.take(self.value, self.trace.indices(indices), dim), self.trace
        )

    @located
    def argmax(self, dim: int | None = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The int64 index of the first maximum along `dim` (the flattened tensor if None)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("argmax", self, dim=dim, keepdim=keepdim)

    @located
    def argmin(self, dim: int | None = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("argmin", self, dim=dim, keepdim=keepdim)

    @located
    def __getitem__(self, key: Any) -> Tensor:
        """NumPy indexing: ints, slices (any step), `None`, `...` as `tess.slice` views and
        reshapes; integer arrays (or integer Tensors) as a gather (`tess.take`)."""
        return _getitem(self, key)

    @property
    def at(self) -> IndexUpdateHelper:
        """JAX's functional updates: `x.at[idx].set(v)`, `.add`, `.mul`, `.min`, `.max`."""
        return IndexUpdateHelper(self)

    # -- reductions: dim is None (all), an int or a tuple; negative dims count back --------

    @located
    def sum(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """Sum over `dim` (`axis=`/`keepdims=` are accepted as NumPy spells them)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("sum", self, dims=dim, keepdim=keepdim)

    @located
    def mean(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("mean", self, dims=dim, keepdim=keepdim)

    @located
    def max(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The max over `dim` (values only; the elementwise max is `maximum`)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("reduce_max", self, dims=dim, keepdim=keepdim)

    @located
    def min(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("reduce_min", self, dims=dim, keepdim=keepdim)

    @located
    def prod(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The product over `dim` (its gradient is NaN where a reduced element is 0)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("prod", self, dims=dim, keepdim=keepdim)

    @located
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

    @located
    def std(
        self, dim: DimsLike = None, keepdim: bool = False, *, ddof: int = 0, **aliases: Any
    ) -> Tensor:
        """The square root of `var` (same arguments)."""
        return self.var(dim, keepdim, ddof=ddof, **aliases).sqrt()

    # -- shape ----------------------------------------------------------------------------

    @located
    def reshape(self, *shape: Any) -> Tensor:
        """A view: `x.reshape(4, -1)` or `x.reshape((4, -1))`."""
        return build_in_trace("reshape", self, shape=shape_args(shape))

    view = reshape

    @located
    def permute(self, *dims: Any) -> Tensor:
        return build_in_trace("permute", self, dims=shape_args(dims))

    @located
    def transpose(self, *axes: Any) -> Tensor:
        """`x.transpose(1, 0, 2)` or `x.transpose((1, 0, 2))` permutes the dims (NumPy);
        `x.transpose(d0, d1)` on a tensor of rank > 2 swaps two (PyTorch); `x.transpose()`
        swaps the last two (the reversal for a matrix; `.T` reverses all dims)."""
        if not axes:
            return build_in_trace("transpose", self)
        dims = shape_args(axes)
        if len(dims) == 2 and self.ndim != 2:
            return build_in_trace("transpose", self, dim0=dims[0], dim1=dims[1])
        return build_in_trace("permute", self, dims=dims)

    @located
    def squeeze(self, dim: DimsLike = None, *, axis: DimsLike = None) -> Tensor:
        """Drop the size-1 dims (only `dim`, if given)."""
        return build_in_trace("squeeze", self, dims=axis if axis is not None else dim)

    @located
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Dims `start_dim..end_dim` merged into one (all: a 1-D tensor, NumPy's flatten)."""
        return build_in_trace("flatten", self, start=start_dim, end=end_dim)

    ravel = flatten

    @property
    @located
    def T(self) -> Tensor:
        """All dims reversed (NumPy's `.T`); rank 0 and 1 are returned unchanged."""
        if self.ndim < 2:
            return self
        return build_in_trace("permute", self, dims=tuple(reversed(range(self.ndim))))

    @located
    def broadcast_to(self, *shape: Any) -> Tensor:
        return build_in_trace("broadcast_to", self, shape=shape_args(shape))

    expand = broadcast_to

    @located
    def unsqueeze(self, dim: int) -> Tensor:
        return build_in_trace("unsqueeze", self, dim=dim)


# ---------------------------------------------------------------------------------------
# Tensor helpers
# ---------------------------------------------------------------------------------------


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
    if sum(is_array_index(item, Tensor) for item in items) > 1:
        return advanced_index(x, items)
    if sum(item is Ellipsis for item in items) > 1:
        raise TessError("an index can only have a single ellipsis ('...')")
    consumed = sum(item is not None and item is not Ellipsis for item in items)
    if consumed > x.ndim:
        raise TessError(f"too many indices for a tensor of rank {x.ndim}")
    if any(item is Ellipsis for item in items):
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items[at : at + 1] = [slice(None)] * (x.ndim - consumed)
    arrays = [i for i, item in enumerate(items) if is_array_index(item, Tensor)]
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
