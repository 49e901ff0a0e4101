"""
NumPy's everyday functions on traced Tensors, built from existing tess ops (issue 22 §4).

- constants (`arange linspace eye`, `zeros_like ones_like full_like`): their values are
  known from static shapes, so they are constant tensors of the trace (`Trace.constant`:
  a `tess.fill`, or a captured array);
- masks and tests (`triu tril any all isnan isfinite sign`): comparisons, casts, sums and
  `tess.select`; `floor ceil round` are the tess ops of the name;
- reordering (`flip roll split moveaxis`): `tess.slice`, `tess.concat`, `tess.permute`;
- scans (`cumsum cumprod`): a log-step (Hillis-Steele) scan, log2(n) shifted adds or
  multiplies of the whole tensor. Not a matmul with a triangular constant: that takes
  floats only, has no product form, and does n^2 work with an n^2 constant captured;
  the scan takes every dtype, fuses into elementwise kernels and differentiates through
  slices and adds (`cumprod`'s gradient has no division, so zeros are exact);
- `norm` (`tessc.linalg.norm`): NumPy's vector and matrix norms except those needing an SVD.

They follow NumPy where NumPy and PyTorch disagree (README "NumPy or PyTorch").
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessc.dialects.builder_types import DimsLike, DTypeLike, TessError, numpy_dtype
from tessc.frontend.function_forms import concatenate, lift, where
from tessc.frontend.numpy_protocol import register_numpy_forms
from tessc.frontend.tracer import Tensor, trace_of
from tessc.frontend.user_location import located

# ---------------------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------------------


def _constant(values: np.ndarray, dtype: DTypeLike | None) -> Tensor:
    """`values` as a constant of the current trace, in `dtype` (NumPy's for ints, the
    trace's default float, f32, for floats, when None)."""
    trace = trace_of()
    if dtype is None:
        dtype = np.int64 if values.dtype.kind in "iu" else np.float32
    if values.dtype.kind == "b" or np.dtype(numpy_dtype(dtype)).kind == "b":
        values = values.astype(bool)
    return Tensor(trace.constant(np.asarray(values), dtype), trace)


@located
def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None) -> Tensor:
    """NumPy's `arange`: `start, start + step, ...` below `stop` (int64 for integer
    arguments, f32 for float ones unless `dtype` says)."""
    return _constant(np.arange(start, stop, step), dtype)


@located
def linspace(
    start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None
) -> Tensor:
    """NumPy's `linspace`: `num` evenly spaced values (f32 unless `dtype` says)."""
    return _constant(np.linspace(start, stop, num, endpoint=endpoint), dtype or np.float32)


@located
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = np.float32) -> Tensor:  # noqa: N803
    """NumPy's `eye`: ones on diagonal `k` of an `N x M` matrix."""
    return _constant(np.eye(N, M, k), dtype)


@located
def full_like(x: Any, fill_value: float, dtype: Any = None) -> Tensor:
    """A tensor of `x`'s shape filled with `fill_value`, in `x`'s dtype unless `dtype`."""
    x = lift(x, ())
    target = x.dtype if dtype is None else dtype
    return Tensor(x.trace.builder.fill(fill_value, x.shape, target), x.trace)


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    return full_like(x, 0.0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    return full_like(x, 1.0, dtype)


def _triangle(x: Any, k: int, upper: bool) -> Tensor:
    x = lift(x, ())
    if x.ndim < 2:
        raise TessError(f"{'triu' if upper else 'tril'} needs a tensor of rank 2 or more")
    rows, cols = x.shape[-2:]
    mask = (
        np.triu(np.ones((rows, cols), bool), k)
        if upper
        else np.tril(np.ones((rows, cols), bool), k)
    )
    if mask.all():
        return x
    return where(_constant(mask, np.bool_), x, 0)


@located
def triu(x: Any, k: int = 0) -> Tensor:
    """NumPy's `triu`: the elements on and above diagonal `k` of the last two dims, else 0."""
    return _triangle(x, k, upper=True)


@located
def tril(x: Any, k: int = 0) -> Tensor:
    """NumPy's `tril`: the elements on and below diagonal `k` of the last two dims, else 0."""
    return _triangle(x, k, upper=False)


# ---------------------------------------------------------------------------------------
# tests and rounding
# ---------------------------------------------------------------------------------------


@located
def any(x: Any, axis: DimsLike = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether any element over `axis` is nonzero (a bool tensor)."""
    count = (lift(x, ()) != 0).astype(np.int64).sum(axis, keepdim=keepdims)
    return count > 0


@located
def all(x: Any, axis: DimsLike = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether every element over `axis` is nonzero (a bool tensor)."""
    count = (lift(x, ()) == 0).astype(np.int64).sum(axis, keepdim=keepdims)
    return count == 0


@located
def isnan(x: Any) -> Tensor:
    x = lift(x, ())
    return x != x


@located
def isfinite(x: Any) -> Tensor:
    x = lift(x, ())
    if x.dtype.kind != "f":
        return full_like(x, 1.0, np.bool_)
    return abs(x) < float("inf")


@located
def sign(x: Any) -> Tensor:
    """-1, 0 or 1 (NaN for NaN), as NumPy's `sign`; its gradient is zero."""
    x = lift(x, ())
    if x.dtype.kind == "b":
        raise TessError("tessc.sign of a bool tensor is not defined (NumPy refuses it too)")
    signs = (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)
    return where(x != x, x, signs) if x.dtype.kind == "f" else signs


@located
def floor(x: Any) -> Tensor:
    """The largest integral value not above `x` (integer tensors are returned as they are)."""
    return lift(x, ()).floor()


@located
def ceil(x: Any) -> Tensor:
    """The smallest integral value not below `x` (integer tensors unchanged)."""
    return lift(x, ()).ceil()


@located
def round(x: Any, decimals: int = 0) -> Tensor:  # noqa: A001
    """NumPy's `round`: to `decimals` places, halves to even (`rint(x * 10**d) / 10**d`)."""
    return lift(x, ()).round(decimals)


# ---------------------------------------------------------------------------------------
# reordering
# ---------------------------------------------------------------------------------------


def _axes(x: Tensor, axis: DimsLike) -> tuple[int, ...]:
    axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise TessError(f"axis {a} is out of range for a tensor of rank {x.ndim}")
    return tuple(a % x.ndim for a in axes)


@located
def flip(x: Any, axis: DimsLike = None) -> Tensor:
    """NumPy's `flip`: the order of elements along `axis` (all axes if None) reversed."""
    x = lift(x, ())
    flipped = set(_axes(x, axis))
    return x[tuple(slice(None, None, -1) if d in flipped else slice(None) for d in range(x.ndim))]


@located
def roll(x: Any, shift: int | Sequence[int], axis: DimsLike = None) -> Tensor:
    """NumPy's `roll`: elements shifted by `shift` along `axis`, wrapping around (the
    flattened tensor if `axis` is None)."""
    x = lift(x, ())
    if axis is None:
        return roll(x.flatten(), shift, 0).reshape(x.shape)
    axes = _axes(x, axis)
    shifts = (shift,) * len(axes) if isinstance(shift, int) else tuple(shift)
    if len(shifts) != len(axes):
        raise TessError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for a, s in zip(axes, shifts, strict=True):
        n = x.shape[a]
        s = s % n if n else 0
        if s:
            head = (slice(None),) * a
            x = concatenate([x[(*head, slice(n - s, None))], x[(*head, slice(0, n - s))]], a)
    return x


@located
def split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """NumPy's `split`: `sections` equal parts along `axis`, or parts cut at `indices`."""
    x = lift(x, ())
    (axis,) = _axes(x, axis)
    n = x.shape[axis]
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0 or n % sections:
            raise TessError(f"split: {sections} sections do not divide axis {axis} of size {n}")
        cuts = [n // sections * i for i in range(1, sections)]
    else:
        cuts = [builtins.min(builtins.max(int(c), 0), n) for c in indices_or_sections]
    bounds = [0, *cuts, n]
    head = (slice(None),) * axis
    return [
        x[(*head, slice(lo, builtins.max(lo, hi)))]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]


@located
def moveaxis(x: Any, source: DimsLike, destination: DimsLike) -> Tensor:
    """NumPy's `moveaxis`: axes `source` moved to positions `destination`."""
    x = lift(x, ())
    sources, destinations = _axes(x, source), _axes(x, destination)
    if len(sources) != len(destinations):
        raise TessError("moveaxis: source and destination must have the same number of axes")
    order = [d for d in range(x.ndim) if d not in sources]
    for target, moved in sorted(zip(destinations, sources, strict=True)):
        order.insert(target, moved)
    return x.permute(*order)


# ---------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------


def _scan(x: Any, axis: int | None, dtype: Any, product: bool) -> Tensor:
    x = lift(x, ())
    if axis is None:
        x, axis = x.flatten(), 0
    if dtype is not None:
        x = x.astype(dtype)
    elif x.dtype.kind in "biu":
        x = x.astype(np.int64)  # NumPy accumulates small integers in the platform int
    (axis,) = _axes(x, axis)
    n = x.shape[axis]
    head = (slice(None),) * axis
    step = 1
    while step < n:
        identity = full_like(x[(*head, slice(0, step))], 1.0 if product else 0.0)
        shifted = concatenate([identity, x[(*head, slice(0, n - step))]], axis)
        x = x * shifted if product else x + shifted
        step *= 2
    return x


@located
def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    """NumPy's `cumsum` (the flattened tensor if `axis` is None; module docstring)."""
    return _scan(x, axis, dtype, product=False)


@located
def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    """NumPy's `cumprod` (see `cumsum`)."""
    return _scan(x, axis, dtype, product=True)


# ---------------------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------------------


@located
def norm(x: Any, ord: Any = None, axis: DimsLike = None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """NumPy's `linalg.norm`: the 2-norm of the flattened tensor by default; over one
    axis a vector norm (`ord` a number, inf or -inf); over two axes (or a matrix with
    `ord` given) a matrix norm (`'fro'`, 1, -1, inf, -inf; 2, -2 and `'nuc'` need an
    SVD and are refused)."""
    x = lift(x, ())
    if x.dtype.kind != "f":
        x = x.astype(np.float32)
    if axis is None and ord is not None and x.ndim == 2:
        axis = (0, 1)
    if ord is None or ord == "fro":
        return ((x * x).sum(axis, keepdim=keepdims)).sqrt()
    if axis is None:
        axis = tuple(range(x.ndim))
    magnitude = abs(x)
    if isinstance(axis, int) or len(axis) == 1:
        axes = _axes(x, axis)
        if ord == float("inf"):
            return magnitude.amax(axes, keepdim=keepdims)
        if ord == -float("inf"):
            return magnitude.amin(axes, keepdim=keepdims)
        if ord == 0:
            return (x != 0).astype(x.dtype).sum(axes, keepdim=keepdims)
        if ord == 1:
            return magnitude.sum(axes, keepdim=keepdims)
        if isinstance(ord, str):
            raise TessError(f"norm: ord={ord!r} is a matrix norm; give two axes")
        return (magnitude ** float(ord)).sum(axes, keepdim=keepdims) ** (1.0 / float(ord))
    rows, cols = _axes(x, axis)
    if ord in (1, -1):
        sums, over = magnitude.sum(rows, keepdim=True), cols
    elif ord in (float("inf"), -float("inf")):
        sums, over = magnitude.sum(cols, keepdim=True), rows
    else:
        raise TessError(f"norm: the matrix norm ord={ord!r} needs an SVD, which tessc has not")
    result = sums.amax(over, keepdim=True) if ord > 0 else sums.amin(over, keepdim=True)
    return result if keepdims else result.squeeze((rows, cols))


__all__ = [
    "all", "any", "arange", "ceil", "cumprod", "cumsum", "eye", "flip", "floor", "full_like",
    "isfinite", "isnan", "linspace", "moveaxis", "norm", "ones_like", "roll", "round", "sign",
    "split", "tril", "triu", "zeros_like",
]  # fmt: skip


NUMPY_NAMES = (
    "all", "any", "around", "ceil", "cumprod", "cumsum", "flip", "floor", "full_like",
    "moveaxis", "norm", "ones_like", "roll", "round", "split", "tril", "triu", "zeros_like",
)  # fmt: skip
"""NumPy's functions (and `np.linalg.norm`) on a traced Tensor that are this module's."""

register_numpy_forms(
    {"sign": sign},
    {name: globals()["round" if name == "around" else name] for name in NUMPY_NAMES},
)
