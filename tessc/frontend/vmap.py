"""
`vmap`: a function of one example mapped over a batch dim, as `jax.vmap`.

`vmap(f, in_axes=0, out_axes=0)` traces `f` once on one example's shapes (the mapped axis
of each argument removed) into a trace of its own, then rebuilds that trace's ops into the
enclosing one with the batch dim added (`batching.batch_block`: a rule per `tess` op). So
the batched program is one `tess` program, fused and compiled like any other, not a Python
loop; and it composes: `jit(vmap(f))`, `vmap(grad(loss), in_axes=(None, 0, 0))` (per-example
gradients), `grad(vmap(f))` and `vmap(vmap(f))` each trace into one program.

`in_axes` is an int or None (every positional argument), or a tuple with one entry per
positional argument, each an int, None (not mapped) or a tuple/list/dict prefix of that
argument's structure; keyword arguments are mapped over axis 0, as in JAX. `out_axes` is
the same for the result: where the batch dim goes, None for an output that does not depend
on the batch. Called on arrays (outside a trace), a `vmap` function is jit-compiled, once
per signature. A vmapped function may close over Tensors of the enclosing trace (unmapped,
as in JAX).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError, dtype_name
from tessc.frontend.batching import BatchedBlock, batch_block
from tessc.frontend.jit import JitFunction
from tessc.frontend.pytree import REGISTERED, TreeDef, flatten_tree, object_fields, unflatten_tree
from tessc.frontend.tracer import Tensor, Trace, trace_of

AxisSpec = Any
"""An int, None, or a tuple/list/dict of them (a prefix of a pytree)."""


def _is_leaf(value: Any) -> bool:
    return isinstance(value, Tensor | np.ndarray | np.floating)


def _leaf_count(value: Any) -> int:
    return len(flatten_tree(value, _is_leaf, "")[1])


def _leaf_axes(spec: AxisSpec, value: Any, what: str) -> list[int | None]:
    """One axis (or None) per array leaf of `value`, in flatten order, from the prefix
    `spec` of its structure."""
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        return [spec] * _leaf_count(value)
    if isinstance(spec, tuple | list) and isinstance(value, tuple | list):
        if len(spec) != len(value):
            raise ValueError(
                f"{what} is a {type(spec).__name__} of {len(spec)} entries for a "
                f"{type(value).__name__} of {len(value)}"
            )
        return [a for s, v in zip(spec, value, strict=True) for a in _leaf_axes(s, v, what)]
    if isinstance(spec, dict) and isinstance(value, dict):
        if set(spec) != set(value):
            raise ValueError(f"{what} has keys {sorted(spec)}, the argument {sorted(value)}")
        return [a for k in sorted(value, key=repr) for a in _leaf_axes(spec[k], value[k], what)]
    if type(spec) is type(value) and (
        object_fields(value) is not None or type(value) in REGISTERED
    ):
        # the same class with an axis (or None) for each array field
        _, spec_leaves = flatten_tree(spec, lambda v: v is None or type(v) is int, "")
        if len(spec_leaves) == _leaf_count(value):
            return [leaf for _, leaf in spec_leaves]
    raise ValueError(
        f"{what} ({spec!r}) must be an int, None, or a tuple/list/dict matching the "
        f"argument's structure ({type(value).__name__})"
    )


def _describe(tensor: Tensor) -> str:
    return f"{dtype_name(tensor.dtype)}{list(tensor.shape)}"


class VmapFunction:
    """`vmap(f, in_axes, out_axes)`: see the module docstring."""

    def __init__(
        self, fn: Callable, in_axes: AxisSpec, out_axes: AxisSpec, target: str | None
    ) -> None:
        if not callable(fn):
            raise TypeError(f"vmap expects a function, got {type(fn).__name__}")
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)  # JAX reads a list of axes as the tuple of them
        functools.update_wrapper(self, fn)
        self.fn, self.in_axes, self.out_axes = fn, in_axes, out_axes
        self.__name__ = f"vmap_{getattr(fn, '__name__', 'f')}"
        self.__qualname__ = self.__name__
        self.target = target or getattr(fn, "target", None) or "cpu"

        @functools.wraps(fn)
        def traced_body(*args: Any, **kwargs: Any) -> Any:
            return self._splice(args, kwargs)

        traced_body.__name__ = self.__name__
        self.jit = JitFunction(traced_body, target=self.target)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", self.fn)
        return f"<tessc.vmap {name} in_axes={self.in_axes!r} out_axes={self.out_axes!r}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _, leaves = flatten_tree((tuple(args), kwargs), _is_leaf, "")
        if any(isinstance(leaf, Tensor) for _, leaf in leaves):
            return self._splice(args, kwargs)
        return self.jit(*args, **kwargs)

    def ir(self, *args: Any, stage: str = "tess", **kwargs: Any) -> str:
        """The batched program for these arrays at `stage`, as `JitFunction.ir`."""
        return self.jit.ir(*args, stage=stage, **kwargs)

    # -- the work ----------------------------------------------------------------------------

    def _argument_names(self, count: int) -> list[str]:
        try:
            parameters = list(inspect.signature(self.fn).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        names = []
        for i in range(count):
            p = parameters[i] if i < len(parameters) else None
            if p is None or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(f"args[{i}]")
            else:
                names.append(p.name)
        return names

    def _in_axes(self, args: Sequence[Any]) -> list[AxisSpec]:
        spec = self.in_axes
        if spec is None or isinstance(spec, int):
            return [spec] * len(args)
        if not isinstance(spec, tuple) or len(spec) != len(args):
            count = len(spec) if isinstance(spec, tuple) else "?"
            raise ValueError(
                f"vmap in_axes must be an int, None, or a tuple with one entry per "
                f"positional argument: got {count} entries for {len(args)} arguments"
            )
        return list(spec)

    def _splice(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Trace `fn` on one example and rebuild it, batched, into the current trace."""
        _, all_leaves = flatten_tree((tuple(args), kwargs), _is_leaf, "")
        outer = trace_of(*(leaf for _, leaf in all_leaves if isinstance(leaf, Tensor)))
        names = self._argument_names(len(args))
        # Each argument's structure, leaves and their axes; keyword arguments at axis 0.
        parts: list[tuple[TreeDef, list[tuple[str, Any]], list[int | None]]] = []
        for name, value, spec in zip(names, args, self._in_axes(args), strict=True):
            tree, leaves = flatten_tree(value, _is_leaf, name)
            parts.append((tree, leaves, _leaf_axes(spec, value, f"in_axes for `{name}`")))
        for key in sorted(kwargs):
            tree, leaves = flatten_tree(kwargs[key], _is_leaf, key)
            parts.append((tree, leaves, [0] * len(leaves)))

        size, sized_by = None, ""
        outer_leaves: list[tuple[Tensor, int | None, str]] = []
        for _, leaves, axes in parts:
            for (path, leaf), axis in zip(leaves, axes, strict=True):
                tensor = leaf if isinstance(leaf, Tensor) else _constant(outer, leaf)
                if axis is not None:
                    if not -tensor.ndim <= axis < tensor.ndim:
                        raise TessError(
                            f"vmap in_axes maps argument `{path}` ({_describe(tensor)}) over "
                            f"axis {axis}, but it has rank {tensor.ndim}"
                        )
                    axis %= tensor.ndim
                    if size is None:
                        size, sized_by = tensor.shape[axis], path
                    elif tensor.shape[axis] != size:
                        raise TessError(
                            "vmap got inconsistent sizes for the mapped axis: argument "
                            f"`{path}` ({_describe(tensor)}) has size {tensor.shape[axis]} at "
                            f"axis {axis}, but `{sized_by}` has size {size}"
                        )
                outer_leaves.append((tensor, axis, path))
        if size is None:
            raise TessError("vmap needs at least one argument mapped over an axis (in_axes)")

        inner = Trace(capture=True)
        block = BatchedBlock(outer.builder, size)
        inner_leaves = []
        for tensor, axis, path in outer_leaves:
            shape = tensor.shape if axis is None else tensor.shape[:axis] + tensor.shape[axis + 1 :]
            example = inner.input(shape, tensor.dtype, path, tensor.weak)
            value = outer.own(tensor)
            if axis is not None and axis != 0:
                order = [axis, *(d for d in range(tensor.ndim) if d != axis)]
                value = outer.builder.permute(value, order)
            block.values[example.value] = (value, axis is not None)
            inner_leaves.append(example)

        rebuilt, offset = [], 0
        for tree, leaves, _ in parts:
            rebuilt.append(unflatten_tree(tree, inner_leaves[offset : offset + len(leaves)]))
            offset += len(leaves)
        inner_args, inner_kwargs = (
            rebuilt[: len(args)],
            dict(zip(sorted(kwargs), rebuilt[len(args) :], strict=True)),
        )
        with inner:
            result = self.fn(*inner_args, **inner_kwargs)
        constants = iter(inner.constants)
        captures = inner.captures or {}
        for argument in inner.block.args[len(inner_leaves) :]:
            if argument in captures:  # a closure over a Tensor of an enclosing trace
                block.values[argument] = (outer.own(captures[argument]), False)
            else:
                constant = next(constants)
                block.values[argument] = (outer.constant(constant, constant.dtype), False)
        batch_block(block, list(inner.block.ops))
        for entry in inner.debug:  # printed once per batch element, as JAX's
            values = [block.materialized(v) for v in entry.values]
            outer.debug.append(entry.with_values(values, entry.batch_dims + 1))
        return self._outputs(outer, block, result)

    def _outputs(self, outer: Trace, block: BatchedBlock, result: Any) -> Any:
        tree, leaves = flatten_tree(result, lambda v: isinstance(v, Tensor), "result")
        axes = _leaf_axes(self.out_axes, result, "out_axes")
        outputs = []
        for (path, tensor), axis in zip(leaves, axes, strict=True):
            entry = block.values.get(tensor.value)
            value, batched = entry if entry is not None else (outer.own(tensor), False)
            if axis is None:
                if batched:
                    raise TessError(
                        f"vmap out_axes is None for output `{path}`, but it depends on the "
                        "mapped axis"
                    )
                outputs.append(Tensor(value, outer))
                continue
            if not batched:
                value = block.materialized(tensor.value)
            rank = tensor.ndim + 1
            if not -rank <= axis < rank:
                raise TessError(f"vmap out_axes {axis} is out of range for output `{path}`")
            axis %= rank
            if axis:
                order = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
                value = outer.builder.permute(value, order)
            outputs.append(Tensor(value, outer))
        return unflatten_tree(tree, outputs)


def _constant(outer: Trace, array: Any) -> Tensor:
    array = np.asarray(array)
    return Tensor(outer.constant(array, array.dtype), outer)


def vmap(
    fn: Callable,
    in_axes: AxisSpec = 0,
    out_axes: AxisSpec = 0,
    *,
    target: str | None = None,
) -> VmapFunction:
    """`fn` mapped over axis `in_axes` of its arguments, results stacked along `out_axes`
    (JAX's `vmap`; see the module docstring). `target` is used when called on arrays:
    a jit function's own by default, else "cpu"."""
    if isinstance(fn, JitFunction):
        target = target or fn.target
    return VmapFunction(fn, in_axes, out_axes, target)


__all__ = ["VmapFunction", "vmap"]
