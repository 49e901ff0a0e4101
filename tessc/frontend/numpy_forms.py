"""
The function forms whose meaning NumPy and PyTorch disagree on: `tessc.<name>` is NumPy's
(and `jax.numpy`'s), the `Tensor` method of the same name PyTorch's.

    tessc.<function> (NumPy)          Tensor method (PyTorch)
    ts.transpose(x, axes=None)        x.transpose(d0, d1): two dims swapped
    ts.var(x, axis, ddof=0): / n      x.var(dim): / (n - 1)
    ts.max(x, axis): values           x.max(dim): (values, indices)
    ts.repeat(x, r, axis): elements   x.repeat(*sizes): tiled (ts.tile)

A function form given PyTorch's spelling of an argument whose meaning differs (`dim=` of
`ts.max`, `dim=` of `ts.var` without `ddof`/`correction`) raises a `TessError` naming the
unambiguous spellings: tessc never picks one of two meanings silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tessc.dialects.builder_types import DimsLike, TessError
from tessc.frontend.function_forms import lift
from tessc.frontend.tracer import Tensor
from tessc.frontend.user_location import located


def _tensor(x: Any) -> Tensor:
    return lift(x, ())


@located
def transpose(x: Any, axes: Sequence[int] | None = None) -> Tensor:
    """NumPy's `transpose`: all dims reversed, or reordered so that result dim i is
    input dim `axes[i]`. (PyTorch's `transpose(x, d0, d1)` is `x.transpose(d0, d1)` or
    `tessc.swapaxes(x, d0, d1)`.)"""
    x = _tensor(x)
    if axes is None:
        return x.permute(tuple(reversed(range(x.ndim))))
    if not isinstance(axes, Sequence):
        raise TessError(
            f"tessc.transpose(x, axes): axes must be a sequence of all {x.ndim} dims, got "
            f"{axes!r}; to swap two dims use tessc.swapaxes(x, d0, d1)"
        )
    return x.permute(tuple(axes))


def _ddof(name: str, ddof: float | None, options: dict[str, Any]) -> float:
    correction = options.pop("correction", None)
    if ddof is not None and correction is not None:
        raise TessError(f"tessc.{name}: pass ddof= or correction=, not both")
    if ddof is None and correction is None and ("dim" in options or "keepdim" in options):
        raise TessError(
            f"tessc.{name}(x, dim=...) is ambiguous: tessc.{name} follows NumPy (divides by "
            f"n) and torch.{name} divides by n - 1; pass ddof=0 (NumPy) or correction=1 "
            f"(PyTorch), or spell the dim axis="
        )
    value = ddof if ddof is not None else correction
    return 0.0 if value is None else float(value)


def _axis(name: str, axis: DimsLike, keepdims: bool, options: dict[str, Any]) -> tuple:
    if "dim" in options:
        if axis is not None:
            raise TessError(f"tessc.{name}: pass axis= or dim=, not both")
        axis = options.pop("dim")
    keepdims = bool(options.pop("keepdim", keepdims))
    if options:
        raise TessError(f"tessc.{name}: unexpected keyword arguments {', '.join(sorted(options))}")
    return tuple(axis) if isinstance(axis, list) else axis, keepdims


@located
def var(
    x: Any, axis: DimsLike = None, *, ddof: float | None = None, keepdims: bool = False, **options
) -> Tensor:
    """NumPy's `var`: the mean squared deviation over `axis`, divided by `n - ddof`
    (`ddof=0` by default; the array API's `correction=` is the same number)."""
    correction = _ddof("var", ddof, options)
    axis, keepdims = _axis("var", axis, keepdims, options)
    return _tensor(x).var(axis, keepdims, correction=correction)


@located
def std(
    x: Any, axis: DimsLike = None, *, ddof: float | None = None, keepdims: bool = False, **options
) -> Tensor:
    """NumPy's `std`: the square root of `var` (`ddof=0` by default)."""
    return var(x, axis, ddof=ddof, keepdims=keepdims, **options).sqrt()


def _extreme(name: str, x: Any, axis: DimsLike, keepdims: bool, options: dict[str, Any]) -> Tensor:
    if "dim" in options:
        raise TessError(
            f"tessc.{name}(x, dim=...) is ambiguous: tessc.{name} follows NumPy (the "
            f"values) and torch.{name} over a dim returns (values, indices): spell it "
            f"tessc.{name}(x, axis) for the values, or x.{name}(dim) for both"
        )
    axis, keepdims = _axis(name, axis, keepdims, options)
    tensor = _tensor(x)
    return tensor.amax(axis, keepdims) if name == "max" else tensor.amin(axis, keepdims)


@located
def max(x: Any, axis: DimsLike = None, keepdims: bool = False, **options: Any) -> Tensor:  # noqa: A001
    """NumPy's `max`: the max over `axis` (all elements if None), values only; the
    elementwise max is `tessc.maximum`."""
    return _extreme("max", x, axis, keepdims, options)


@located
def min(x: Any, axis: DimsLike = None, keepdims: bool = False, **options: Any) -> Tensor:  # noqa: A001
    """NumPy's `min` (see `max`)."""
    return _extreme("min", x, axis, keepdims, options)


@located
def repeat(x: Any, repeats: int, axis: int | None = None) -> Tensor:
    """NumPy's `repeat`: each element repeated `repeats` times along `axis` (the flattened
    array if None). PyTorch's `x.repeat(*sizes)` is `tessc.tile`."""
    return _tensor(x).repeat_interleave(repeats, axis)


@located
def tile(x: Any, reps: int | Sequence[int]) -> Tensor:
    """NumPy's `tile`: `x` repeated `reps[i]` times along dim i (PyTorch's `x.repeat`)."""
    x = _tensor(x)
    counts = tuple(reps) if isinstance(reps, Sequence) else (reps,)
    return x.repeat(*(1,) * (x.ndim - len(counts)), *counts)


__all__ = ["max", "min", "repeat", "std", "tile", "transpose", "var"]
