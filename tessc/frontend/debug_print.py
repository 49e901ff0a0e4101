"""
`ts.debug.print`: runtime values printed from inside a compiled function, as
`jax.debug.print`.

A traced function has no values while it is traced, so `debug.print(fmt, *args, **kwargs)`
records a `DebugPrint` in the trace: the format string, the structure of its arguments and
the `tess` values among them. `jit` returns those values as extra outputs of the program
(after the user's), and prints `fmt.format(...)` with them after every call. A returned
value is never dead code, and no side-effecting op reaches the lowering: every target
(cpu, reference, cuda) prints the same, and the fusion passes only keep the printed values
in memory (a fused intermediate that is printed is stored, nothing else changes).

`grad` carries the prints of the function it differentiates into the enclosing trace (the
primal values, cloned beside the gradient), and `vmap` batches them: a batched print runs
once per batch element, in order, as JAX's does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from tessc.frontend.pytree import TreeDef, flatten_tree, unflatten_tree
from tessc.runtime.cuda import is_device_array


def _is_leaf(value: Any) -> bool:
    return not isinstance(value, tuple | list | dict)


@dataclass(frozen=True)
class DebugPrint:
    """One `debug.print` in a trace: `values` are the SSA values of its Tensor arguments,
    `statics` its other arguments, `slots` which leaf is which (an index into `values`, or
    -1 for the next static); the first `batch_dims` dims of every value are vmap's batch."""

    fmt: str
    tree: TreeDef
    slots: tuple[int, ...]
    statics: tuple[Any, ...]
    values: tuple[SSAValue, ...]
    batch_dims: int = 0

    def with_values(self, values: Sequence[SSAValue], batch_dims: int | None = None) -> DebugPrint:
        return DebugPrint(
            self.fmt,
            self.tree,
            self.slots,
            self.statics,
            tuple(values),
            self.batch_dims if batch_dims is None else batch_dims,
        )

    def emit(self, arrays: Sequence[Any]) -> None:
        """Print the message for these values of `values` (host or device arrays)."""
        host = [a.copy_to_host() if is_device_array(a) else np.asarray(a) for a in arrays]
        batch = host[0].shape[: self.batch_dims] if host else ()
        for index in np.ndindex(*batch):
            statics: Iterator[Any] = iter(self.statics)
            leaves = [host[slot][index] if slot >= 0 else next(statics) for slot in self.slots]
            args, kwargs = unflatten_tree(self.tree, leaves)
            print(self.fmt.format(*args, **kwargs), flush=True)


def record(fmt: str, args: tuple[Any, ...], kwargs: dict[str, Any], is_tensor: type) -> DebugPrint:
    """The `DebugPrint` of a call `debug.print(fmt, *args, **kwargs)` in a trace."""
    tree, leaves = flatten_tree((tuple(args), kwargs), _is_leaf, "")
    slots: list[int] = []
    statics: list[Any] = []
    values: list[SSAValue] = []
    for _, leaf in leaves:
        if isinstance(leaf, is_tensor):
            slots.append(len(values))
            values.append(leaf.value)
        else:
            slots.append(-1)
            statics.append(leaf)
    return DebugPrint(fmt, tree, tuple(slots), tuple(statics), tuple(values))


def debug_values(prints: Sequence[DebugPrint]) -> list[SSAValue]:
    """The values a traced function returns after its own outputs for its prints."""
    return [value for entry in prints for value in entry.values]


def printer(prints: Sequence[DebugPrint]) -> Callable[[Sequence[Any]], None]:
    """A function of the program's extra outputs (in `debug_values` order) that prints
    every message."""

    def emit_all(extra: Sequence[Any]) -> None:
        offset = 0
        for entry in prints:
            entry.emit(extra[offset : offset + len(entry.values)])
            offset += len(entry.values)

    return emit_all


__all__ = ["DebugPrint", "debug_values", "printer", "record"]
