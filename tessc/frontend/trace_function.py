"""
Tracing a Python function into a `tess` module for one input signature (`trace`).

`flatten_arguments` binds a call's arguments to the function's parameters and reads its
`Signature`: the structure of the arguments, the shape and dtype of each array leaf, the
values of the static ones, which leaves are donated and which Python numbers are weakly
typed. `trace_signature` runs the function once with `Tensor`s standing in for the array
leaves and returns the `TracedFunction`: the module, its entry, the constants the trace
captured and the output structure. `jit` (`jit.py`) caches and runs what this builds;
`grad` traces with it too.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp

from tessc.dialects import contract
from tessc.dialects.builder import finish_function
from tessc.dialects.dynamic_dims import DYNAMIC_HINT
from tessc.frontend import function_forms, vocabulary  # noqa: F401  (register Tensor's NumPy forms)
from tessc.frontend.debug_print import DebugPrint, debug_values
from tessc.frontend.pytree import (
    CONTAINERS,
    REGISTERED,
    SIMPLE_STATICS,
    TreeDef,
    flatten_tree,
    is_weak_scalar,
    object_fields,
    unflatten_tree,
)
from tessc.frontend.tracer import Tensor, Trace
from tessc.runtime.cuda import is_device_array

ARRAY_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.float32, np.float64, ml_dtypes.bfloat16, np.float16, np.int16, np.int32, np.int64,
        np.bool_,
    )
)  # fmt: skip
"""The dtypes of array arguments (`tess` element types f32, f64, bf16, f16, i16, i32, i64,
i1)."""


def _is_array(value: Any) -> bool:
    """An array leaf: a NumPy array or float, a device array, or another library's array
    (PyTorch, JAX, anything exporting `__dlpack__` or `__array_interface__`)."""
    if isinstance(value, np.ndarray | np.generic):
        return isinstance(value, np.ndarray | np.floating)  # NumPy ints stay static
    kind = type(value)
    return (
        hasattr(kind, "__dlpack__")
        or hasattr(value, "__array_interface__")  # may be an instance attribute
        or hasattr(kind, "__cuda_array_interface__")
        or is_device_array(value)
    )


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"


def host_array(value: Any, path: str) -> np.ndarray:
    """A host array leaf as a NumPy array, without a copy where its layout allows: through
    DLPack (PyTorch and JAX CPU arrays) or `__array_interface__`. An array that cannot be
    read so (one that requires grad, an unsupported dtype) is a TypeError naming the
    argument, its type and what to do."""
    if type(value) is np.ndarray:
        return value
    if hasattr(type(value), "__dlpack__") and not isinstance(value, np.generic):
        device = getattr(value, "__dlpack_device__", None)
        if device is not None and int(device()[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise TypeError(
                f"argument `{path}` ({_type_name(value)}) is an array on device "
                f"{device()}, not on the host, and has no `__cuda_array_interface__`: copy "
                'it to the host first, or pass target="cuda" an array that exports the '
                "interface (a CuPy, PyTorch or Numba array; cupy.from_dlpack(x) wraps a "
                "DLPack one without a copy)"
            )
        try:
            return np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError, ValueError) as error:
            hint = (
                "pass x.detach()"
                if "gradient" in str(error)
                else "convert it to float32, float64, int32, int64 or bool first"
            )
            raise TypeError(
                f"argument `{path}` ({_type_name(value)}) cannot be read as a NumPy array "
                f"without a copy: {error}; {hint}"
            ) from None
    return np.asarray(value)


def leaf_type(leaf: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of an array leaf: a host array, a Numba device array, or another
    `__cuda_array_interface__` exporter (CuPy, PyTorch: its interface names the dtype)."""
    if not is_device_array(leaf):
        array = np.asarray(leaf)
        return array.shape, array.dtype
    interface = getattr(leaf, "__cuda_array_interface__", None)
    if interface is not None and not getattr(type(leaf), "__cuda_ndarray__", False):
        return tuple(interface["shape"]), np.dtype(interface["typestr"])
    return tuple(leaf.shape), np.dtype(leaf.dtype)


def _is_output_leaf(value: Any) -> bool:
    """A function's result is Tensors in containers and objects (a dataclass, or an
    instance holding Tensors: `pytree`'s object nodes); plain values in them come back as
    they are."""
    return isinstance(value, Tensor) or not (
        isinstance(value, (*CONTAINERS, *SIMPLE_STATICS))
        or object_fields(value) is not None
        or type(value) in REGISTERED
    )


def _static_outside_objects(tree: TreeDef) -> bool:
    """Whether a result has a plain value other than in an object's fields."""
    kind = tree[0]
    if kind == "static":
        return True
    if kind in ("leaf", "object"):
        return False
    children = tree[2] if kind is dict else tree[1]
    return any(_static_outside_objects(child) for child in children)


def _ssa_name(path: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_$.-]", "_", path)
    return name if name and not name[0].isdigit() else f"arg{name}"


def _symbol_name(fn: Callable) -> str:
    name = re.sub(r"\W", "_", getattr(fn, "__name__", "") or "")
    return name if name and not name[0].isdigit() else f"f{name}"


"""The func-argument attribute of a donated input (`tessc.lowering.buffers.memory_plan`)."""


@dataclass(frozen=True)
class Signature:
    """What a trace depends on: the argument structure, static values, array types and
    which array leaves are donated (their indices in `arrays`)."""

    tree: TreeDef
    arrays: tuple[tuple[tuple[int, ...], str], ...]
    donated: tuple[int, ...] = ()
    weak: tuple[int, ...] = ()
    """The array leaves that are traced Python numbers."""


@dataclass
class TracedFunction:
    """One trace of a function: its `tess` module and how to call the compiled entry."""

    module: ModuleOp
    entry: str
    signature: Signature
    constants: tuple[np.ndarray, ...]
    output_tree: TreeDef
    debug: tuple[DebugPrint, ...] = ()
    """The `ts.debug.print`s of the trace (their values in the function's body); with
    `trace_signature(debug_outputs=True)` returned after the user's outputs."""

    def ir(self) -> str:
        return str(self.module)


def _donated_leaves(
    parameters: inspect.Signature,
    bound: inspect.BoundArguments,
    children: list[tuple[TreeDef, list]],
    donate_argnums: frozenset[int],
    scalars: bool = False,
) -> tuple[int, ...]:
    """The indices, among all array leaves, of those inside a donated positional argument:
    a parameter at a donated position (passed by position or keyword) or an element of
    `*args` at one."""
    donated: list[int] = []
    leaf = position = 0
    for (name, value), (_, leaves) in zip(bound.arguments.items(), children, strict=True):
        kind = parameters.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            for item in value:
                count = len(flatten_tree(item, _is_array, name, scalars)[1])
                if position in donate_argnums:
                    donated.extend(range(leaf, leaf + count))
                leaf, position = leaf + count, position + 1
            continue
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if position in donate_argnums:
                donated.extend(range(leaf, leaf + len(leaves)))
            position += 1
        leaf += len(leaves)
    return tuple(donated)


def _weak_float_dtype(leaves: Sequence[Any]) -> np.dtype:
    """The dtype traced Python floats get: f64 beside an f64 array, else f32 (the
    function's float type, which a weak float takes anyway)."""
    for leaf in leaves:
        if not is_weak_scalar(leaf) and leaf_type(leaf)[1] == np.float64:
            return np.dtype(np.float64)
    return np.dtype(np.float32)


def _typed_weak(tree: TreeDef, float_dtype: np.dtype) -> TreeDef:
    """`tree` with each `("weak", type)` node given the dtype its number is passed in."""
    kind = tree[0]
    if kind == "weak":
        return ("weak", tree[1], float_dtype if tree[1] is float else np.dtype(np.int64))
    if kind in ("leaf", "static", "object"):  # an object's numbers are static
        return tree
    if kind == "arguments" or kind is dict:
        return (kind, tree[1], tuple(_typed_weak(c, float_dtype) for c in tree[2]))
    return (kind, tuple(_typed_weak(c, float_dtype) for c in tree[1]))


def flatten_arguments(
    parameters: inspect.Signature,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    donate_argnums: frozenset[int] = frozenset(),
    scalars: bool = False,
    static: frozenset[str] = frozenset(),
) -> tuple[Signature, list[tuple[str, np.ndarray]]]:
    """The call's signature and its array leaves, named by parameter path (`params_w1`);
    the leaves of the positional arguments `donate_argnums` are marked donated. With
    `scalars`, Python ints and floats are traced too (weakly typed 0-d arrays); the
    parameters named in `static` are static whatever they hold."""
    bound = parameters.bind(*args, **kwargs)
    bound.apply_defaults()
    children = [
        flatten_tree(value, _is_array, name, scalars)
        if name not in static
        else flatten_tree(value, lambda _: False, name)
        for name, value in bound.arguments.items()
    ]
    tree = ("arguments", tuple(bound.arguments), tuple(c[0] for c in children))
    donated = (
        _donated_leaves(parameters, bound, children, donate_argnums, scalars)
        if donate_argnums
        else ()
    )
    leaves = [leaf for c in children for leaf in c[1]]
    weak = tuple(i for i, (_, leaf) in enumerate(leaves) if is_weak_scalar(leaf))
    float_dtype = np.dtype(np.float32)
    if weak:
        float_dtype = _weak_float_dtype([leaf for _, leaf in leaves])
        tree = _typed_weak(tree, float_dtype)
    arrays: list[tuple[str, np.ndarray]] = []
    types: list[tuple[tuple[int, ...], str]] = []
    for path, leaf in leaves:
        original = leaf
        if is_weak_scalar(leaf):
            leaf = np.asarray(leaf, float_dtype if type(leaf) is float else np.int64)
        elif type(leaf) is not np.ndarray and not is_device_array(leaf):
            leaf = host_array(leaf, path)
        try:
            shape, dtype = leaf_type(leaf)
        except Exception as error:  # noqa: BLE001 - an exporter's own refusal
            raise TypeError(
                f"argument `{path}` ({_type_name(original)}) cannot be read as an array: {error}"
            ) from None
        if dtype.byteorder not in ("=", "|") and dtype.newbyteorder("=") in ARRAY_DTYPES:
            # A byte-swapped (big-endian) array: computed on in native order.
            leaf = np.asarray(leaf).astype(dtype.newbyteorder("="))
            dtype = leaf.dtype
        if dtype not in ARRAY_DTYPES:
            raise TypeError(
                f"argument `{path}` has dtype {dtype} ({_type_name(original)}); tessc "
                "computes in float32, float64, bfloat16, float16, int16, int32, int64 and bool "
                "(convert it with .astype)"
            )
        # Device arrays (the cuda target's) stay where they are.
        arrays.append((path, leaf if is_device_array(leaf) else np.asarray(leaf)))
        # ml_dtypes' bfloat16 has no type code of its own (`dtype.str` is "<V2"): its name.
        types.append((shape, dtype.name if dtype.kind == "V" else dtype.str))
    signature = Signature(tree, tuple(types), donated, weak)
    return signature, arrays


def trace(fn: Callable, *args: Any, **kwargs: Any) -> TracedFunction:
    """Trace `fn` on example arguments into a verified `tess` module with one function."""
    signature, arrays = flatten_arguments(inspect.signature(fn), args, kwargs)
    return trace_signature(fn, signature, [name for name, _ in arrays])


def trace_signature(
    fn: Callable,
    signature: Signature,
    names: Sequence[str],
    debug_outputs: bool = False,
    dynamic_hint: int | None = None,
) -> TracedFunction:
    """Trace `fn` with one input Tensor per array of `signature` (named by `names`); with
    `debug_outputs`, the values of its `ts.debug.print`s are returned after its outputs.
    A `?` dim of `signature` (a generic one, `dynamic_shapes`) reads as a `SymDim` of
    `dynamic_hint` while `fn` runs."""
    token = DYNAMIC_HINT.set(dynamic_hint)
    try:
        return _trace_signature(fn, signature, names, debug_outputs)
    finally:
        DYNAMIC_HINT.reset(token)


def _trace_signature(
    fn: Callable, signature: Signature, names: Sequence[str], debug_outputs: bool
) -> TracedFunction:
    tracer = Trace()
    weak = set(signature.weak)
    inputs = [
        tracer.input(shape, np.dtype(dtype), _ssa_name(name), i in weak)
        for i, ((shape, dtype), name) in enumerate(zip(signature.arrays, names, strict=True))
    ]
    values = unflatten_tree(signature.tree, inputs)
    bound = inspect.BoundArguments(
        inspect.signature(fn), dict(zip(signature.tree[1], values, strict=True))
    )
    with tracer:
        try:
            result = fn(*bound.args, **bound.kwargs)
        except Exception as error:
            # Which traced numbers the function needed the value of (for `jit`'s fallback).
            error.tessc_concretized = [  # type: ignore[attr-defined]
                arg.index for arg in tracer.block.args if arg in tracer.concretized
            ]
            raise
    output_tree, outputs = flatten_tree(result, _is_output_leaf, "result")
    if (
        not outputs
        or not all(isinstance(tensor, Tensor) for _, tensor in outputs)
        or _static_outside_objects(output_tree)
    ):
        found = ", ".join(type(v).__name__ for _, v in outputs) or "nothing"
        if _static_outside_objects(output_tree):
            found += " and a plain value"
        raise TypeError(
            f"`{getattr(fn, '__name__', fn)}` must return a Tensor or a tuple/list/dict of "
            f"Tensors, got {found}"
        )
    printed = debug_values(tracer.debug) if debug_outputs else []
    tracer.builder.ret(*(tracer.own(tensor) for _, tensor in outputs), *printed)
    entry = _symbol_name(fn)
    function = finish_function(entry, tracer.block)
    if signature.donated:
        # Captured constants follow the user's arrays; they are never donated.
        donated = set(signature.donated)
        function.properties["arg_attrs"] = ArrayAttr(
            [contract.DONATED.dict(k in donated) for k in range(len(function.body.block.args))]
        )
    module = ModuleOp([function])
    module.verify()
    return TracedFunction(
        module, entry, signature, tuple(tracer.constants), output_tree, tuple(tracer.debug)
    )
