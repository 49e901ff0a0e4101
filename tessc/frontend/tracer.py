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
    DTypeLike,
    TessError,
    dtype_name,
    numpy_dtype,
    promote_types,
    shape_of,
    tensor_type,
)
from tessc.dialects.dynamic_dims import SymDim
from tessc.dialects.tess import element_type_of
from tessc.frontend import composites
from tessc.frontend.debug_print import DebugPrint
from tessc.frontend.numpy_protocol import numpy_function, numpy_ufunc, require_numpy_forms
from tessc.frontend.tensor_indexing import TensorIndexing
from tessc.frontend.tensor_reductions import TensorReductions
from tessc.frontend.tensor_shape import TensorShape
from tessc.frontend.user_location import located


class DynamicSize:
    """A captured constant standing for N (`Trace.dynamic_size`): `jit` passes N as a 0-d
    array of `dtype` in its place at every call."""

    def __init__(self, dtype: object) -> None:
        self.dtype = np.dtype(dtype)  # type: ignore[call-overload]

    def __repr__(self) -> str:
        return f"DynamicSize({self.dtype})"

    def value(self, size: int) -> np.ndarray:
        return np.asarray(size, dtype=self.dtype)


# ---------------------------------------------------------------------------------------
# a trace in progress
# ---------------------------------------------------------------------------------------

_CURRENT_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "tessc_current_trace", default=None
)


class Trace:
    """The function being built: its entry block, a builder, and the captured constants."""

    def __init__(self, capture: bool = False) -> None:
        """With `capture` (vmap's trace), a Tensor of an enclosing trace used here becomes
        an argument of this one (`captures`), as a closure over it does in JAX."""
        require_numpy_forms()
        self.captures: dict[SSAValue, Tensor] | None = {} if capture else None
        self.block = Block()
        self.builder = TessBuilder.at_end(self.block)
        self.constants: list[np.ndarray] = []
        self.size_inputs: dict[np.dtype, SSAValue] = {}  # `dynamic_size`, by dtype
        self.concretized: set[SSAValue] = set()  # weak inputs whose value was asked for
        self.debug: list[DebugPrint] = []  # `ts.debug.print`s, returned as extra outputs
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
        if isinstance(value, SymDim):
            return self.dynamic_size(dtype)
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

    def dynamic_size(self, dtype: DTypeLike) -> SSAValue:
        """N, the dynamic size (a `SymDim` used as a number), as a 0-d tensor of `dtype`:
        an argument `jit` fills with N at every call (its constant is a `DynamicSize`)."""
        dtype = numpy_dtype(dtype)
        if dtype not in self.size_inputs:
            self.constants.append(DynamicSize(dtype))  # type: ignore[arg-type]
            self.size_inputs[dtype] = self.input((), dtype, "n").value
        return self.size_inputs[dtype]

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
        if tensor.trace is not self and self.captures is not None and tensor.trace.active:
            for argument, captured in self.captures.items():
                if captured.value is tensor.value:
                    return argument
            argument = self.input(tensor.shape, tensor.dtype, "captured", tensor.weak).value
            self.captures[argument] = tensor
            return argument
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
    current = _CURRENT_TRACE.get()
    for value in values:
        if isinstance(value, Tensor):
            if not value.trace.active:
                raise TessError("this Tensor belongs to a finished trace")
            if current is not None and current.captures is not None:
                return current  # vmap's trace takes its enclosing traces' Tensors
            return value.trace
    trace = current
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


class Tensor(TensorIndexing, TensorReductions, TensorShape):
    """A traced tensor: the `tess` SSA value an operation on the input arrays produced.

    Its indexing, reductions and shape methods are its base classes' (`tensor_indexing`,
    `tensor_reductions`, `tensor_shape`); the operators and elementwise methods are here."""

    __hash__ = object.__hash__

    @located
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """`np.exp(t)`, `array + t`, `np.maximum(t, 0)`: NumPy's ufuncs on a traced Tensor
        build the tess op of the same meaning (`numpy_protocol.NUMPY_UFUNCS`); any other is
        a TessError naming what to write instead."""
        return numpy_ufunc(ufunc, method, inputs, kwargs)

    @located
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """`np.sum(t, axis=1)`, `np.concatenate([t, u])`, `np.where(c, t, 0)`: NumPy's
        functions on a traced Tensor map to tessc's (`numpy_protocol.NUMPY_FUNCTIONS`)."""
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

    def _build(self, name: str | Callable[..., SSAValue], *operands: Any, **options: Any) -> Tensor:
        """`build_in_trace(name, self, *operands, **options)`: how the base classes' methods
        build (their modules cannot import this one, which imports them)."""
        return build_in_trace(name, self, *operands, **options)

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
