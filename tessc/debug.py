"""
`tessc.debug`: `ts.debug.print(fmt, *args, **kwargs)`, as `jax.debug.print`.

    @ts.jit
    def step(x):
        y = x * 2
        ts.debug.print("y={y}, sum={s}", y=y, s=y.sum())   # printed at every call
        return y + 1

Inside a traced function the message is printed when the compiled program runs (every
call, on every target; `tessc.frontend.debug_print`), with `str.format` of the runtime
values; called on plain values it prints at once. `print(x)` of a traced Tensor, by
contrast, shows its type while tracing (it has no value then).
"""

from __future__ import annotations

import builtins
from typing import Any

from tessc.frontend.debug_print import record
from tessc.frontend.pytree import flatten_tree
from tessc.frontend.tracer import Tensor, trace_of


def print(fmt: str, *args: Any, **kwargs: Any) -> None:  # noqa: A001 - JAX's name
    """Print `fmt.format(*args, **kwargs)` with the runtime values of the Tensors among
    the arguments (any nest of tuples, lists and dicts), at every call of the compiled
    function; at once when no argument is a traced Tensor."""
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print expects a format string first, got {type(fmt).__name__}")
    _, leaves = flatten_tree(
        (args, kwargs), lambda v: not isinstance(v, tuple | list | dict), "debug.print"
    )
    tensors = [leaf for _, leaf in leaves if isinstance(leaf, Tensor)]
    if not tensors:
        builtins.print(fmt.format(*args, **kwargs), flush=True)
        return
    trace = trace_of(*tensors)
    for tensor in tensors:
        trace.own(tensor)
    trace.debug.append(record(fmt, args, kwargs, Tensor))


__all__ = ["print"]
