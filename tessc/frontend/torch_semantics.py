"""
The Tensor methods whose meaning is PyTorch's where NumPy's differs: `max`/`min` over a
dim return `(values, indices)`, `var`/`std` divide by `n - 1`.

`max_or_min` and `var_correction` read the arguments of those methods (`tracer.Tensor`'s)
and refuse NumPy's spellings whose meaning would differ (`axis=`, `keepdims=`), naming the
unambiguous forms: tessc never picks one of two meanings silently. They work on any
Tensor through its public methods (`amax`, `argmax`, ...), so this module does not import
the tracer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tessc.dialects.builder_types import TessError


class ValuesIndices(NamedTuple):
    """What `Tensor.max(dim)` and `Tensor.min(dim)` return (PyTorch's
    `torch.return_types.max`): the extreme values and the index of the first of each."""

    values: Any
    indices: Any


def is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def max_or_min(x: Any, which: str, dim: Any, keepdim: bool, aliases: dict[str, Any]) -> Any:
    """`Tensor.max`/`Tensor.min` over no dim (the value) or one int dim (`ValuesIndices`)."""
    numpy_spelling = sorted(set(aliases) & {"axis", "keepdims"})
    if numpy_spelling:
        raise TessError(
            f"x.{which}({numpy_spelling[0]}=...) is ambiguous: Tensor.{which} follows PyTorch "
            f"(over a dim it returns (values, indices)), NumPy's {which} returns the values: "
            f"use x.a{which}(dim) or tessc.{which}(x, axis) for the values, "
            f"x.{which}(dim) for both"
        )
    if aliases:
        raise TessError(f"unexpected keyword arguments: {', '.join(sorted(aliases))}")
    values = x.amax if which == "max" else x.amin
    if dim is None:
        if keepdim:
            raise TessError(f"x.{which}(keepdim=True) needs a dim")
        return values()
    if not is_int(dim):
        raise TessError(
            f"x.{which}(dim) takes one int dim (PyTorch), got {dim!r}; over several dims "
            f"use x.a{which}(dims)"
        )
    indices = x.argmax if which == "max" else x.argmin
    return ValuesIndices(values(dim, keepdim), indices(dim, keepdim))


def var_correction(options: dict[str, Any]) -> float:
    """`var`'s divisor offset from `correction=`, `unbiased=` or `ddof=` (popped from
    `options`): 1 by default (PyTorch); NumPy's `axis=` alone is ambiguous."""
    given = {k: options.pop(k) for k in ("correction", "unbiased", "ddof") if k in options}
    if len(given) > 1:
        raise TessError(f"var/std: pass one of {' and '.join(sorted(given))}, not both")
    if "unbiased" in given:
        return 1 if given["unbiased"] else 0
    if given:
        return float(next(iter(given.values())))
    if "axis" in options or "keepdims" in options:
        raise TessError(
            "x.var(axis=...)/x.std(axis=...) is ambiguous: Tensor.var follows PyTorch "
            "(divides by n - 1) and NumPy's var divides by n; pass correction=1 "
            "(PyTorch) or ddof=0 (NumPy), or use tessc.var(x, axis) (NumPy's)"
        )
    return 1


__all__ = ["ValuesIndices", "is_int", "max_or_min", "var_correction"]
