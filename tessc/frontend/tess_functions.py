"""
The `.tess` built-ins that reuse the Python frontend: `tessc.nn`, indexing, and `grad`.

`.tess` builds IR through a `TessBuilder`, the Python tracer through `Tensor`s over one. So
that the two frontends cannot drift apart, the composites the tracer already has are not
rewritten here: `SourceTrace` is a `Trace` over the `.tess` function's own builder, the
arguments are wrapped as its `Tensor`s, the `tessc.nn` function (or `Tensor.__getitem__`)
runs, and its result's SSA value is what the `.tess` expression evaluates to. Both print the
same IR for the same program.

`grad(f, wrt=w)(x, w)` is the gradient of the `def f` of the file with respect to its
parameters `wrt` (a name, a position, or a tuple of them; default: the first), as JAX's
`grad(f, argnums)`: `f` is built as a function of its own, `tess-autodiff` differentiates
it, and the ops of `@f_grad` that the gradients need are cloned into the caller on the
call's arguments, which is how `tessc.grad` splices a gradient into a trace.
`value_and_grad` returns `(f(...), gradients)`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import TessError, numel, shape_of


def _source_trace(builder: TessBuilder) -> Any:
    from tessc.frontend import function_forms, vocabulary  # noqa: F401  (register NumPy forms)
    from tessc.frontend.tracer import Trace

    class SourceTrace(Trace):
        """A `Trace` whose ops go where the `.tess` function is being built."""

        def __init__(self, builder: TessBuilder):
            super().__init__()
            self.builder = builder

        def constant(self, value: Any, dtype: Any) -> SSAValue:
            # `.tess` has numbers, never arrays: an array here would become a hidden
            # argument of the function.
            raise TessError("a .tess function cannot capture an array constant")

    return SourceTrace(builder)


def _unwrap(result: Any) -> Any:
    from tessc.frontend.tracer import Tensor

    if isinstance(result, Tensor):
        return result.value
    if isinstance(result, tuple | list):
        return tuple(_unwrap(item) for item in result)
    return result


def through_tensors(function: Callable[..., Any], b: TessBuilder, *args: Any, **kwargs: Any) -> Any:
    """`function` applied to the `.tess` values as `Tensor`s of a trace over `b`."""
    from tessc.frontend.tracer import Tensor
    from tessc.frontend.user_location import TraceError

    trace = _source_trace(b)

    def wrap(value: Any) -> Any:
        if isinstance(value, SSAValue):
            return Tensor(value, trace)
        if isinstance(value, tuple):
            return tuple(wrap(item) for item in value)
        return value

    try:
        return _unwrap(function(*map(wrap, args), **{k: wrap(v) for k, v in kwargs.items()}))
    except TraceError as error:
        # Located in Python code (tessc's own): the caller locates it in the .tess file.
        raise TessError(error.message) from None


def _nn_builtin(name: str) -> Callable[..., Any]:
    """The `tessc.nn` function `name` as a `.tess` built-in (same parameters)."""
    import tessc.nn

    function = getattr(tessc.nn, name)

    def builtin(b: TessBuilder, *args: Any, **kwargs: Any) -> Any:
        return through_tensors(function, b, *args, **kwargs)

    signature = inspect.signature(function)
    # `.tess` has no strings: `reduction` and `approximate` keep their defaults.
    parameters = [
        inspect.Parameter("b", inspect.Parameter.POSITIONAL_ONLY),
        *(p for p in signature.parameters.values() if p.name not in ("reduction", "approximate")),
    ]
    builtin.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return builtin


NN_FUNCTIONS = (
    "softmax",
    "log_softmax",
    "logsumexp",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "gelu",
    "conv1d",
    "conv2d",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "silu",
    "leaky_relu",
    "layer_norm",
    "rms_norm",
    "embedding",
    "scaled_dot_product_attention",
)


TENSOR_FUNCTIONS = (
    "sin",
    "cos",
    "erf",
    "floor",
    "ceil",
    "round",
    "prod",
    "var",
    "std",
    "argmax",
    "argmin",
    "clip",
    "squeeze",
    "flatten",
    "astype",
    "take",
    "one_hot",
    "concatenate",
    "stack",
    "stop_gradient",
    "pad",
)
"""The tracer's function forms offered as they are (`tessc.<name>`)."""


def _tensor_builtin(name: str) -> Callable[..., Any]:
    def builtin(b: TessBuilder, *args: Any, **kwargs: Any) -> Any:
        import tessc

        try:
            return through_tensors(getattr(tessc, name), b, *args, **kwargs)
        except TypeError as error:  # wrong arguments: the caller locates it
            raise TessError(f"`{name}`: {error}") from None

    return builtin


@functools.cache
def nn_builtins() -> dict[str, Callable[..., Any]]:
    """`softmax(x, dim=1)`, `cross_entropy(logits, labels)`, ...: `tessc.nn`'s functions,
    and the tracer's `sin`, `prod`, `var`, `argmax`, `clip`, `astype`, `take`, ..."""
    return {
        **{name: _nn_builtin(name) for name in NN_FUNCTIONS},
        **{name: _tensor_builtin(name) for name in TENSOR_FUNCTIONS},
    }


def subscript(b: TessBuilder, value: Any, index: Sequence[Any]) -> Any:
    """`shape[i]` of a tuple (`x.shape[0]`), or `x[i, j]` of a tensor (a `tess.slice` view,
    as the tracer's basic indexing)."""
    if isinstance(value, tuple):
        if len(index) != 1 or not isinstance(index[0], int) or isinstance(index[0], bool):
            raise TessError("a list is indexed by one integer")
        if not -len(value) <= index[0] < len(value):
            raise TessError(f"index {index[0]} is out of range for a list of {len(value)}")
        return value[index[0]]
    if isinstance(value, SSAValue):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in index):
            raise TessError("a tensor is indexed by integers")
        return through_tensors(lambda x: x[tuple(index)], b, value)
    raise TessError("only a tensor or a list can be indexed")


# ---------------------------------------------------------------------------------------
# grad
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gradient:
    """`grad(f, wrt=...)` before it is called: a function value of the language."""

    function: str
    wrt: tuple[int, ...]
    single: bool
    with_value: bool


def splice_gradient(
    b: TessBuilder, gradient: Gradient, primal: func.FuncOp, arguments: Sequence[SSAValue]
) -> Any:
    """The gradient of `primal` (built from `gradient.function`) at `arguments`, its ops
    inserted by `b`: one tensor, a tuple of them, or `(value, gradients)`."""
    from tessc.context import make_context
    from tessc.frontend.grad import live_ops
    from tessc.lowering.autodiff.autodiff import TessAutodiffPass

    outputs = primal.function_type.outputs.data
    if len(outputs) != 1 or numel(shape_of(primal.body.block.last_op.operands[0])) != 1:  # type: ignore[union-attr]
        raise TessError(
            f"grad needs `{gradient.function}` to return one scalar (a one-element tensor)"
        )
    module = ModuleOp([primal])
    TessAutodiffPass(func=gradient.function, wrt=gradient.wrt, results=(0,)).apply(
        make_context(), module
    )
    backward = module.body.block.last_op
    assert isinstance(backward, func.FuncOp)
    returned = list(backward.body.block.last_op.operands)  # type: ignore[union-attr]
    wanted = returned if gradient.with_value else returned[1:]
    mapping: dict[SSAValue, SSAValue] = dict(zip(backward.body.block.args, arguments, strict=True))
    for op in live_ops(list(backward.body.block.ops)[:-1], wanted):
        b.insert(op.clone(value_mapper=mapping))
    values = [mapping.get(v, v) for v in wanted]
    grads = values[1:] if gradient.with_value else values
    result = grads[0] if gradient.single else tuple(grads)
    return (values[0], result) if gradient.with_value else result


__all__ = ["Gradient", "nn_builtins", "splice_gradient", "subscript", "through_tensors"]
