"""
`grad` and `value_and_grad`: gradients of traced Python functions, by the `tess-autodiff` pass.

There is no second autodiff here. `grad(f, argnums)` traces `f` into a `tess` function
(`tessc.frontend.trace_function.trace`), runs `tess-autodiff` on it, and splices the resulting
`@f_grad` — primal and backward, all `tess` ops — into the program being traced:

- called inside a trace (within `jit`, or within another `grad`), on `Tensor`s: the
  gradient ops are inserted into that trace, only those the caller's outputs need;
- called on NumPy arrays: it is itself a `jit` function (one trace and compilation per
  input signature) whose body is the spliced gradient, compiled by the same machinery as
  any other program, so gradients are fused and lowered like everything else.

Hence `jit(grad(f))`, `grad(jit(f))` (the jit wrapper is looked through, its target kept)
and `grad(grad(...))` compose. Arguments follow `jit`: arrays, or tuples/lists/dicts of
arrays (a parameter dict's gradient is a dict of the same keys); other arguments are
static. `f` must return a one-element Tensor, or `(loss, aux)` with `has_aux=True`, where
`aux` is any Tensor structure returned alongside without being differentiated.

The conventions at non-differentiable points are those of the VJP rules
(`tessc.lowering.autodiff.vjp_rules`): PyTorch's.

A function traced by `grad` cannot use Tensors of the enclosing trace other than through
its arguments (no closing over an outer `Tensor`): pass them as arguments and pick the
differentiated ones with `argnums`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tessc.context import make_context
from tessc.dialects.builder_types import TessError, shape_of
from tessc.dialects.dynamic_dims import DYNAMIC_HINT, SymDim, type_dim
from tessc.frontend.jit import JitFunction

# jit's own argument flattening, so leaf order is the same by design
from tessc.frontend.pytree import flatten_tree, unflatten_tree
from tessc.frontend.trace_function import (
    TracedFunction,
    flatten_arguments,
    trace,
    trace_signature,
)
from tessc.frontend.tracer import DynamicSize, Tensor, Trace
from tessc.lowering.autodiff.autodiff import TessAutodiffPass


def _is_leaf(value: Any) -> bool:
    """What the tracer turns into a function argument (an array), or a traced Tensor."""
    return isinstance(value, Tensor | np.ndarray | np.floating)


def _contains_tensor(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    _, leaves = flatten_tree((tuple(args), kwargs), _is_leaf, "")
    return any(isinstance(leaf, Tensor) for _, leaf in leaves)


def _has_static(tree: tuple[Any, ...]) -> bool:
    if tree[0] == "static":
        return True
    if tree[0] == "object":  # its static attributes come back as they are
        return False
    return any(isinstance(child, tuple) and _has_static(child) for child in tree[1:])


def _positional_leaf_ranges(
    fn: Callable, args: Sequence[Any], kwargs: dict[str, Any]
) -> list[tuple[range, tuple[Any, ...]]]:
    """For each positional argument: the positions of its leaves among the traced
    function's arguments (the tracer binds parameters in order and flattens each), and
    its structure."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    parameters = inspect.signature(fn).parameters
    ranges: list[tuple[range, tuple[Any, ...]]] = []
    start = 0
    for name, value in bound.arguments.items():
        kind = parameters[name].kind
        items = value if kind is inspect.Parameter.VAR_POSITIONAL else (value,)
        for item in items:
            tree, leaves = flatten_tree(item, _is_leaf, name)
            positional = kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.VAR_POSITIONAL,
            )
            if positional and len(ranges) < len(args):
                ranges.append((range(start, start + len(leaves)), tree))
            start += len(leaves)
    return ranges


def _example(value: Any, dynamic: dict[int, tuple[int, ...]]) -> Any:
    """`value` with each Tensor replaced by zeros of its shape and dtype (to trace with);
    the type shape of each one with a `?` dim in `dynamic`, by the id of its zeros."""
    tree, leaves = flatten_tree(value, _is_leaf, "")
    examples = []
    for _, leaf in leaves:
        if isinstance(leaf, Tensor):
            example = np.zeros(leaf.shape, leaf.dtype)
            if any(isinstance(d, SymDim) for d in leaf.shape):
                dynamic[id(example)] = tuple(type_dim(d) for d in leaf.shape)
            leaf = example
        examples.append(leaf)
    return unflatten_tree(tree, examples)


def _trace_examples(fn: Callable, args: Sequence[Any], kwargs: dict[str, Any]) -> TracedFunction:
    """`trace` of `fn` on examples of `args`, its `?` dims kept `?` (`dynamic_shapes`)."""
    dynamic: dict[int, tuple[int, ...]] = {}
    examples = [_example(a, dynamic) for a in args]
    keywords = _example(kwargs, dynamic)
    if not dynamic:
        return trace(fn, *examples, **keywords)
    signature, arrays = flatten_arguments(inspect.signature(fn), examples, keywords)
    shapes = tuple(
        (dynamic.get(id(array), shape), dtype)
        for (shape, dtype), (_, array) in zip(signature.arrays, arrays, strict=True)
    )
    signature = replace(signature, arrays=shapes)
    names = [name for name, _ in arrays]
    return trace_signature(fn, signature, names, dynamic_hint=DYNAMIC_HINT.get())


def live_ops(block_ops: Sequence[Operation], outputs: Sequence[SSAValue]) -> list[Operation]:
    """The ops of a straight-line block that `outputs` depend on, in block order."""
    needed = set(outputs)
    live: list[Operation] = []
    for op in reversed(block_ops):
        if any(result in needed for result in op.results):
            live.append(op)
            needed.update(op.operands)
    return live[::-1]


class GradFunction:
    """`grad(f)` / `value_and_grad(f)`: see the module docstring."""

    def __init__(
        self,
        fn: Callable,
        argnums: int | Sequence[int],
        *,
        has_aux: bool,
        with_value: bool,
        target: str | None,
    ):
        if isinstance(fn, JitFunction):
            target = target or fn.target
            fn = fn.fn
        # A bound method: `self` becomes the first argument, its arrays read at every call
        # (pytree object nodes), never baked in at the first trace.
        instance: Any = None
        if inspect.ismethod(fn) and not isinstance(fn.__self__, type):
            instance, fn = fn.__self__, fn.__func__
            numbers = (argnums,) if isinstance(argnums, int | np.integer) else argnums
            shifted = tuple(int(a) + 1 if a >= 0 else int(a) for a in numbers)  # type: ignore[union-attr]
            argnums = shifted[0] if isinstance(argnums, int | np.integer) else shifted
        if not callable(fn):
            raise TypeError(f"grad expects a function, got {type(fn).__name__}")
        # First, as it copies `fn.__dict__` (a GradFunction's own fields, for grad of grad).
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.instance = instance
        self.single = isinstance(argnums, int | np.integer)
        self.argnums = (int(argnums),) if self.single else tuple(int(a) for a in argnums)  # type: ignore[arg-type, union-attr]
        if not self.argnums:
            raise ValueError("argnums names no argument")
        self.has_aux = has_aux
        self.with_value = with_value
        self.target = target or "cpu"
        kind = "value_and_grad" if with_value else "grad"
        self.__name__ = f"{getattr(fn, '__name__', 'f')}_{kind}"
        self.__qualname__ = self.__name__

        @functools.wraps(fn)
        def traced_body(*args: Any, **kwargs: Any) -> Any:
            return self._splice(args, kwargs)

        traced_body.__name__ = self.__name__
        self.jit = JitFunction(traced_body, target=self.target)

    def __repr__(self) -> str:
        kind = "value_and_grad" if self.with_value else "grad"
        return f"<tessc.{kind} {getattr(self.fn, '__qualname__', self.fn)} argnums={self.argnums}>"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """As a method (`@grad` in a class body): `self` is argument 0, as in JAX."""
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.instance is not None:
            args = (self.instance, *args)
        if _contains_tensor(args, kwargs):
            return self._splice(args, kwargs)
        return self.jit(*args, **kwargs)

    def ir(self, *args: Any, stage: str = "tess", **kwargs: Any) -> str:
        """The gradient program for these arrays at `stage`, as `JitFunction.ir`."""
        if self.instance is not None:
            args = (self.instance, *args)
        return self.jit.ir(*args, stage=stage, **kwargs)

    # -- the work ----------------------------------------------------------------------------

    def _name(self) -> str:
        return f"`{getattr(self.fn, '__name__', self.fn)}`"

    def _wrt_leaves(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> list[tuple[range, tuple[Any, ...]]]:
        ranges = _positional_leaf_ranges(self.fn, args, kwargs)
        chosen = []
        for argnum in self.argnums:
            if not -len(ranges) <= argnum < len(ranges):
                raise ValueError(
                    f"argnums {argnum} is out of range: {self._name()} was called with "
                    f"{len(ranges)} positional arguments"
                )
            leaves, tree = ranges[argnum]
            if not leaves or _has_static(tree):
                raise TypeError(
                    f"argument {argnum} of {self._name()} is not an array or a "
                    "tuple/list/dict of arrays, so it has no gradient"
                )
            chosen.append((leaves, tree))
        return chosen

    def _check_output(self, traced: TracedFunction, outputs: Sequence[SSAValue]) -> None:
        tree = traced.output_tree
        if self.has_aux:
            if tree[0] not in (tuple, list) or len(tree[1]) != 2 or tree[1][0] != ("leaf",):
                raise TypeError(
                    f"with has_aux=True, {self._name()} must return a pair (loss, aux) "
                    "whose loss is one Tensor"
                )
        elif tree != ("leaf",):
            raise TypeError(
                f"{self._name()} must return one Tensor to be differentiated "
                "(use has_aux=True to return more)"
            )
        shape = shape_of(outputs[0])
        if int(np.prod(shape)) != 1:
            raise TessError(
                f"grad needs a scalar loss, but {self._name()} returns shape {shape} "
                "(reduce it, e.g. with .sum())"
            )

    def _splice(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Trace `fn`, differentiate it, and insert the gradient into the current trace."""
        _, leaves = flatten_tree((tuple(args), kwargs), _is_leaf, "")
        outer = next(leaf.trace for _, leaf in leaves if isinstance(leaf, Tensor))
        traced = _trace_examples(self.fn, args, kwargs)
        wrt = self._wrt_leaves(args, kwargs)
        primal = traced.module.body.block.first_op
        assert isinstance(primal, func.FuncOp)
        primal_outputs = list(primal.body.block.last_op.operands)  # type: ignore[union-attr]
        self._check_output(traced, primal_outputs)

        wrt_leaves = tuple(i for leaf_range, _ in wrt for i in leaf_range)
        TessAutodiffPass(func=traced.entry, wrt=wrt_leaves, results=(0,)).apply(
            make_context(), traced.module
        )
        gradient = traced.module.body.block.last_op
        assert isinstance(gradient, func.FuncOp)

        # The gradient function's arguments: the argument leaves, then captured constants.
        _, argument_leaves = flatten_tree(_argument_values(self.fn, args, kwargs), _is_leaf, "")
        inputs = [
            outer.own(leaf)
            if isinstance(leaf, Tensor)
            else outer.constant(leaf, np.asarray(leaf).dtype)
            for _, leaf in argument_leaves
        ]
        inputs += [
            outer.dynamic_size(c.dtype)
            if isinstance(c, DynamicSize)
            else outer.constant(c, c.dtype)
            for c in traced.constants
        ]
        returned = list(gradient.body.block.last_op.operands)  # type: ignore[union-attr]
        primal_count = len(primal_outputs)
        wanted = returned if self.with_value or self.has_aux else returned[primal_count:]
        values = _clone_into(outer, gradient, inputs, wanted)
        by_result = dict(zip(wanted, values, strict=True))

        for entry in traced.debug:  # the function's prints, on the primal values
            outer.debug.append(entry.with_values(_clone_into(outer, primal, inputs, entry.values)))
        gradient_tensors = [Tensor(by_result[v], outer) for v in returned[primal_count:]]
        grads, offset = [], 0
        for leaf_range, tree in wrt:
            grads.append(unflatten_tree(tree, gradient_tensors[offset : offset + len(leaf_range)]))
            offset += len(leaf_range)
        grads_out = grads[0] if self.single else tuple(grads)
        if not (self.with_value or self.has_aux):
            return grads_out
        value = unflatten_tree(
            traced.output_tree, [Tensor(by_result[v], outer) for v in returned[:primal_count]]
        )
        if self.with_value:
            return value, grads_out
        return grads_out, value[1]


def _argument_values(fn: Callable, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The bound argument values in the tracer's order (parameters, defaults applied)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return list(bound.arguments.values())


def _clone_into(
    outer: Trace, function: func.FuncOp, inputs: Sequence[SSAValue], wanted: Sequence[SSAValue]
) -> list[SSAValue]:
    """Insert the ops of `function` that `wanted` needs into `outer`, on `inputs`."""
    block = function.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, inputs, strict=True))
    for op in live_ops(list(block.ops)[:-1], wanted):
        outer.builder.insert(op.clone(value_mapper=mapping))
    return [mapping[value] for value in wanted]


def grad(
    fn: Callable,
    argnums: int | Sequence[int] = 0,
    *,
    has_aux: bool = False,
    target: str | None = None,
) -> GradFunction:
    """The gradient of `fn`'s scalar result with respect to its positional arguments
    `argnums` (an int: that argument's gradient; a tuple: a tuple of them). With
    `has_aux`, `fn` returns `(loss, aux)` and this returns `(gradients, aux)`. `target`
    defaults to a jit function's own, else "cpu"."""
    return GradFunction(fn, argnums, has_aux=has_aux, with_value=False, target=target)


def value_and_grad(
    fn: Callable,
    argnums: int | Sequence[int] = 0,
    *,
    has_aux: bool = False,
    target: str | None = None,
) -> GradFunction:
    """Like `grad`, returning `(value, gradients)`; with `has_aux`,
    `((loss, aux), gradients)`."""
    return GradFunction(fn, argnums, has_aux=has_aux, with_value=True, target=target)


__all__ = ["GradFunction", "grad", "value_and_grad"]
