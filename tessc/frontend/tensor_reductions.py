"""
`Tensor`'s reductions: `sum`, `mean`, `prod`, `amax`/`amin`, `argmax`/`argmin`, PyTorch's
`max`/`min`/`var`/`std` (`torch_semantics`), and the stable forms `logsumexp`, `softmax` and
`log_softmax` (`tessc.nn`'s functions of the same names call these).

A mixin of `tessc.frontend.tracer.Tensor` (its base class), in a module of its own so the
tracer stays about tracing. `dim` is None (all dims), an int or a tuple; negative dims
count back; NumPy's `axis=`/`keepdims=` spellings are accepted where their meaning is the
same. Each method builds through `Tensor._build`, so this module does not import the
tracer (the tracer imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tessc.dialects.builder_types import DimsLike, TessError
from tessc.frontend.torch_semantics import max_or_min, var_correction
from tessc.frontend.user_location import located

if TYPE_CHECKING:
    from tessc.frontend.tracer import Tensor


class TensorReductions:
    """The reductions of `Tensor` (its base class)."""

    @located
    def argmax(
        self: Tensor, dim: int | None = None, keepdim: bool = False, **aliases: Any
    ) -> Tensor:
        """The int64 index of the first maximum along `dim` (the flattened tensor if None)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("argmax", dim=dim, keepdim=keepdim)

    @located
    def argmin(
        self: Tensor, dim: int | None = None, keepdim: bool = False, **aliases: Any
    ) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("argmin", dim=dim, keepdim=keepdim)

    @located
    def sum(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """Sum over `dim` (`axis=`/`keepdims=` are accepted as NumPy spells them)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("sum", dims=dim, keepdim=keepdim)

    @located
    def mean(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("mean", dims=dim, keepdim=keepdim)

    @located
    def max(self: Tensor, dim: Any = None, keepdim: bool = False, **aliases: Any) -> Any:
        """PyTorch's `max`: over all elements, the max; over one `dim`, the named tuple
        `(values, indices)`; with a Tensor, the elementwise `maximum`. (Several dims:
        `amax`; NumPy's `axis=` spelling is refused, as NumPy's max returns values only.)"""
        if isinstance(dim, type(self)):
            return _elementwise_extreme(self, "max", dim, keepdim, aliases)
        return max_or_min(self, "max", dim, keepdim, aliases)

    @located
    def min(self: Tensor, dim: Any = None, keepdim: bool = False, **aliases: Any) -> Any:
        """PyTorch's `min` (see `max`)."""
        if isinstance(dim, type(self)):
            return _elementwise_extreme(self, "min", dim, keepdim, aliases)
        return max_or_min(self, "min", dim, keepdim, aliases)

    @located
    def amax(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The max over `dim` (an int, a tuple, or None for all): values only."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("max_over", dims=dim, keepdim=keepdim)

    @located
    def amin(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("min_over", dims=dim, keepdim=keepdim)

    @located
    def prod(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **aliases: Any) -> Tensor:
        """The product over `dim` (its gradient is NaN where a reduced element is 0)."""
        dim, keepdim = _axis_aliases(dim, keepdim, aliases)
        return self._build("prod", dims=dim, keepdim=keepdim)

    @located
    def logsumexp(self: Tensor, dim: int, keepdim: bool = False) -> Tensor:
        """`log(sum(exp(x), dim))`, computed as `m + log(sum(exp(x - m)))` with `m` the max."""
        shift = self._stable_shift(dim)
        result = shift + (self - shift).exp().sum(dim, keepdim=True).log()
        return result if keepdim else result.sum(dim)  # a sum over one element: drops the dim

    @located
    def softmax(self: Tensor, dim: int) -> Tensor:
        """`exp(x) / sum(exp(x), dim)`, the max over `dim` subtracted first (PyTorch's
        `Tensor.softmax`: `dim` is required)."""
        e = (self - self._stable_shift(dim)).exp()
        return e / e.sum(dim, keepdim=True)

    @located
    def log_softmax(self: Tensor, dim: int) -> Tensor:
        return self - self.logsumexp(dim, keepdim=True)

    def _stable_shift(self: Tensor, dim: int) -> Any:
        """The max over `dim` that the stable forms subtract, as a constant to `grad` (the
        forms' value does not depend on it); 0 over an empty dim, which has no max."""
        if -self.ndim <= dim < self.ndim and self.shape[dim] == 0:
            return 0.0
        return self.amax(dim, keepdim=True)._build("stop_gradient")

    @located
    def var(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **options: Any) -> Tensor:
        """PyTorch's `var`: the squared deviations summed over `dim` and divided by
        `n - correction`, `correction=1` by default (`unbiased=False` is 0; NumPy's `ddof=`
        is accepted when given). NumPy's `axis=` without `correction`/`ddof` is refused:
        NumPy's default divides by n."""
        correction = var_correction(options)
        dim, keepdim = _axis_aliases(dim, keepdim, options)
        x = self if self.dtype.kind == "f" else self.astype(np.float32)
        centered = x - x.mean(dim, keepdim=True)
        squares = (centered * centered).sum(dim, keepdim=keepdim)
        count = x.size // max(_kept_size(x, dim), 1)
        return squares / float(count - correction)

    @located
    def std(self: Tensor, dim: DimsLike = None, keepdim: bool = False, **options: Any) -> Tensor:
        """The square root of `var` (same arguments, `correction=1` by default)."""
        return self.var(dim, keepdim, **options).sqrt()


def _elementwise_extreme(
    x: Tensor, which: str, other: Tensor, keepdim: bool, aliases: dict[str, Any]
) -> Tensor:
    """PyTorch's `x.max(other)`: the elementwise `maximum` (`minimum`)."""
    if keepdim or aliases:
        raise TessError(f"x.{which}(other) is elementwise; it takes no other arguments")
    return x._build("maximum" if which == "max" else "minimum", other)


def _axis_aliases(dim: Any, keepdim: bool, aliases: dict[str, Any]) -> tuple[Any, bool]:
    """`dim`/`keepdim` with NumPy's `axis=`/`keepdims=` spellings folded in."""
    if "axis" in aliases:
        if dim is not None:
            raise TessError("pass either dim= or axis=, not both")
        dim = aliases.pop("axis")
    keepdim = bool(aliases.pop("keepdims", keepdim))
    if aliases:
        raise TessError(f"unexpected keyword arguments: {', '.join(sorted(aliases))}")
    if isinstance(dim, list):
        dim = tuple(dim)
    return dim, keepdim


def _kept_size(x: Tensor, dim: DimsLike) -> int:
    """The number of elements left after reducing `dim` (all dims if None)."""
    if dim is None:
        return 1
    dims = {d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim)}
    return int(np.prod([n for d, n in enumerate(x.shape) if d not in dims], dtype=np.int64))
