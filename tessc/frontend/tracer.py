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
import warnings
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
from tessc.frontend import composites
from tessc.frontend.advanced_index import IndexUpdateHelper, advanced_index, is_array_index
from tessc.frontend.torch_semantics import is_int, max_or_min, var_correction
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


def build_in_trace(name: str | Callable[..., SSAValue], *operands: Any, **options: Any) -> Tensor:
    """`builder.<name>(*operands, **options)` with operands converted in their trace (or
    `name(builder, *operands, **options)` for a `composites` function)."""
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
        raise TessError(f"`{getattr(name, '__name__', name)}` needs at least one tensor operand")
    if not isinstance(name, str):
        return Tensor(name(trace.builder, *values, **options), trace)
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


def _binary_method(
    name: str | Callable[..., SSAValue], reverse: bool = False
) -> Callable[[Tensor, Any], Tensor]:
    """A Tensor method (or reflected operator) building `builder.<name>(self, other)`."""

    @located
    def method(self: Tensor, other: Any) -> Tensor:
        return self._zip(name, other, reverse)

    method.__name__ = getattr(name, "__name__", name)
    method.__doc__ = f"`{method.__name__}`, broadcasting; numbers take this dtype."
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

    def __str__(self) -> str:
        """What `print(x)` shows while tracing: the type, and why there is no value."""
        return (
            f"Tensor({dtype_name(self.dtype)}{list(self.shape)}, traced: no value while "
            "tracing, as the function runs once to build the program; return it from the "
            "jit function to see its value)"
        )

    @located
    def __format__(self, spec: str) -> str:
        if spec:
            raise TessError(
                f"cannot format a traced Tensor with {spec!r}: it has no value while "
                "tracing; return it from the jit function to see its value"
            )
        return str(self)

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

    def _zip(
        self, name: str | Callable[..., SSAValue], other: Any, reverse: bool = False
    ) -> Tensor:
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
    # `**`, `//`, `%`: integers stay integers (NumPy's promotion; `composites`)
    __pow__ = _binary_method(composites.power)
    __rpow__ = _binary_method(composites.power, reverse=True)
    __floordiv__ = _binary_method(composites.floor_divide)
    __rfloordiv__ = _binary_method(composites.floor_divide, reverse=True)
    __mod__ = _binary_method(composites.remainder)
    __rmod__ = _binary_method(composites.remainder, reverse=True)
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
    pow = _binary_method(composites.power)
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

    @located
    def floor(self) -> Tensor:
        """`tess.floor`; integer tensors are returned as they are (PyTorch's rule)."""
        return self if self.dtype.kind in "iub" else build_in_trace("floor", self)

    @located
    def ceil(self) -> Tensor:
        return self if self.dtype.kind in "iub" else build_in_trace("ceil", self)

    @located
    def round(self, decimals: int = 0) -> Tensor:
        """To `decimals` places, halves to even (NumPy's and PyTorch's `round`:
        `round(x * 10**decimals) / 10**decimals`); integer tensors as they are."""
        if self.dtype.kind in "iub":
            return self
        if not decimals:
            return build_in_trace("round", self)
        scale = 10.0 ** int(decimals)
        return build_in_trace("round", self * scale) / scale

    __floor__ = floor
    __ceil__ = ceil

    def __round__(self, ndigits: int | None = None) -> Tensor:
        return self.round(ndigits or 0)

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
    def max(self, dim: Any = None, keepdim: bool = False, **aliases: Any) -> Any:
        """PyTorch's `max`: over all elements, the max; over one `dim`, the named tuple
        `(values, indices)`; with a Tensor, the elementwise `maximum`. (Several dims:
        `amax`; NumPy's `axis=` spelling is refused, as NumPy's max returns values only.)"""
        if isinstance(dim, Tensor):
            return _elementwise_extreme(self, "max", dim, keepdim, aliases)
        return max_or_min(self, "max", dim, keepdim, aliases)

    @located
    def min(self, dim: Any = None, keepdim: bool = False, **aliases: Any) -> Any:
        """PyTorch's `min` (see `max`)."""
        if isinstance(dim, Tensor):
            return _elementwise_extreme(self, "min", dim, keepdim, aliases)
        return max_or_min(self, "min", dim, keepdim, aliases)

    @located
    def amax(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The max over `dim` (an int, a tuple, or None for all): values only."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("max_over", self, dims=dim, keepdim=keepdim)

    @located
    def amin(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("min_over", self, dims=dim, keepdim=keepdim)

    @located
    def prod(self, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The product over `dim` (its gradient is NaN where a reduced element is 0)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return build_in_trace("prod", self, dims=dim, keepdim=keepdim)

    @located
    def var(self, dim: DimsLike = None, keepdim: bool = False, **options: Any) -> Tensor:
        """PyTorch's `var`: the squared deviations summed over `dim` and divided by
        `n - correction`, `correction=1` by default (`unbiased=False` is 0; NumPy's `ddof=`
        is accepted when given). NumPy's `axis=` without `correction`/`ddof` is refused:
        NumPy's default divides by n."""
        correction = var_correction(options)
        dim, keepdim = _axis_aliases(dim, keepdim, options)
        x = self if self.dtype.kind == "f" else self.astype(np.float32)
        centered = x - x.mean(dim, keepdim=True)
        squares = (centered * centered).sum(dim, keepdim=keepdim)
        count = x.size // max(_kept_size(x, dim), 1)
        return squares / float(count - correction)

    @located
    def std(self, dim: DimsLike = None, keepdim: bool = False, **options: Any) -> Tensor:
        """The square root of `var` (same arguments, `correction=1` by default)."""
        return self.var(dim, keepdim, **options).sqrt()

    # -- shape ----------------------------------------------------------------------------

    @located
    def reshape(self, *shape: Any) -> Tensor:
        """A view: `x.reshape(4, -1)` or `x.reshape((4, -1))`."""
        return build_in_trace("reshape", self, shape=shape_args(shape))

    @located
    def view(self, *shape: Any) -> Tensor:
        """PyTorch's `view(*shape)`: `reshape` (tess values have no layout to respect).
        `view(dtype)`, a reinterpretation of the bits, is refused."""
        if len(shape) == 1 and not isinstance(shape[0], Sequence | int | np.integer):
            raise TessError(
                f"view({shape[0]!r}): reinterpreting the bits as another dtype is not "
                "supported; convert the values with astype"
            )
        return build_in_trace("reshape", self, shape=shape_args(shape))

    @located
    def permute(self, *dims: Any) -> Tensor:
        return build_in_trace("permute", self, dims=shape_args(dims))

    @located
    def transpose(self, *dims: Any) -> Tensor:
        """PyTorch's `transpose(dim0, dim1)`: dims `dim0` and `dim1` swapped. Any other
        arguments are refused: `permute(*dims)` reorders all dims, `ts.transpose(x, axes)`
        is NumPy's."""
        if len(dims) != 2 or not all(is_int(d) for d in dims):
            raise TessError(
                f"Tensor.transpose(dim0, dim1) swaps two dims (PyTorch), got "
                f"transpose{tuple(dims)!r}; to reorder all dims use x.permute(*dims) or "
                "tessc.transpose(x, axes) (NumPy)"
            )
        return build_in_trace("transpose", self, dim0=int(dims[0]), dim1=int(dims[1]))

    swapaxes = swapdims = transpose

    @located
    def squeeze(self, dim: DimsLike = None, *, axis: DimsLike = None) -> Tensor:
        """Drop the size-1 dims (only `dim`, if given)."""
        return build_in_trace("squeeze", self, dims=axis if axis is not None else dim)

    @located
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """PyTorch's `flatten`: dims `start_dim..end_dim` merged into one (all by default:
        a 1-D tensor, as NumPy's `flatten()`). NumPy's `order=` is refused."""
        for name, value in (("start_dim", start_dim), ("end_dim", end_dim)):
            if not is_int(value):
                raise TessError(
                    f"flatten: {name} must be an int (PyTorch's flatten(start_dim, end_dim)), "
                    f"got {value!r}; NumPy's order= is not supported"
                )
        return build_in_trace("flatten", self, start=start_dim, end=end_dim)

    ravel = flatten

    @property
    @located
    def T(self) -> Tensor:
        """All dims reversed, as in PyTorch (and NumPy); rank 0 and 1 unchanged. On other
        ranks than 2, PyTorch warns that `.T` is deprecated; so does this."""
        if self.ndim != 2:
            warnings.warn(
                "x.T on a tensor of rank other than 2 reverses its dims, which PyTorch "
                "deprecates: use x.mT to transpose the last two dims, or x.permute(...)",
                UserWarning,
                stacklevel=3,
            )
        if self.ndim < 2:
            return self
        return build_in_trace("permute", self, dims=tuple(reversed(range(self.ndim))))

    @property
    @located
    def mT(self) -> Tensor:
        """The last two dims swapped (PyTorch's `.mT`: a batch of matrices transposed)."""
        if self.ndim < 2:
            raise TessError(f"x.mT needs a tensor of rank 2 or more, got rank {self.ndim}")
        return build_in_trace("transpose", self, dim0=-2, dim1=-1)

    @located
    def repeat(self, *sizes: Any) -> Tensor:
        """PyTorch's `repeat`: the tensor tiled `sizes[i]` times along dim i (NumPy's `tile`;
        NumPy's `repeat` is `repeat_interleave`)."""
        return build_in_trace(composites.tile, self, reps=shape_args(sizes))

    @located
    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        """Each element repeated `repeats` times along `dim` (the flattened tensor if None):
        PyTorch's `repeat_interleave` with an int, NumPy's `repeat`."""
        if not is_int(repeats):
            raise TessError(f"repeat_interleave: repeats must be an int, got {repeats!r}")
        x = self.flatten() if dim is None else self
        return build_in_trace(composites.repeat_elements, x, repeats=int(repeats), dim=dim or 0)

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


def _elementwise_extreme(
    x: Tensor, which: str, other: Tensor, keepdim: bool, aliases: dict[str, Any]
) -> Tensor:
    """PyTorch's `x.max(other)`: the elementwise `maximum` (`minimum`)."""
    if keepdim or aliases:
        raise TessError(f"x.{which}(other) is elementwise; it takes no other arguments")
    return build_in_trace("maximum" if which == "max" else "minimum", x, other)


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
