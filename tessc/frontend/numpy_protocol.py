"""
NumPy's functions and ufuncs called on a traced `Tensor`: the table they dispatch through.

`np.exp(t)` and `np.sum(t, axis=1)` reach `Tensor.__array_ufunc__` and
`Tensor.__array_function__` (`tessc.frontend.tracer`), which look NumPy's name up here at
call time. The entries are tessc's function forms, which build Tensors, so the tracer
cannot import them: `tessc.frontend.function_forms` fills this table when it is imported
(`register_numpy_forms`). Whoever makes a `Trace` (`trace_function`, `tess_functions`)
imports the forms first, and `Trace()` checks that it did (`require_numpy_forms`), so
the table is full before any Tensor exists. A NumPy name not in the table is a
`TessError` listing what tessc has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tessc.dialects.builder_types import TessError
from tessc.frontend.user_location import located

NUMPY_UFUNCS: dict[str, Callable[..., Any]] = {}
"""NumPy ufunc name -> the tessc function (a Tensor method or a module-level form) it is."""

NUMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {}
"""NumPy function name -> tessc function; `axis`/`keepdims` pass through (aliases)."""


def register_numpy_forms(
    ufuncs: Mapping[str, Callable[..., Any]], functions: Mapping[str, Callable[..., Any]]
) -> None:
    """Add the forms NumPy's ufuncs and functions on a traced Tensor dispatch to."""
    NUMPY_UFUNCS.update(ufuncs)
    NUMPY_FUNCTIONS.update(functions)


def require_numpy_forms() -> None:
    """Raise unless the forms are registered: a Tensor made before then would meet NumPy
    with an empty table, and every `np.<f>(t)` would read as unsupported."""
    if not NUMPY_UFUNCS or not NUMPY_FUNCTIONS:
        raise RuntimeError(
            "import tessc.frontend.function_forms before making a Trace: it registers the "
            "forms NumPy's functions on a Tensor dispatch to (tessc.frontend.numpy_protocol)"
        )


def numpy_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = getattr(ufunc, "__name__", str(ufunc))
    if method != "__call__" or kwargs.get("out") is not None:
        raise TessError(
            f"np.{name}.{method} (or out=) on a traced Tensor has no tessc form; "
            "use the Tensor methods (x.sum(axis=...), ...)"
        )
    function = NUMPY_UFUNCS.get(name)
    if function is None:
        raise TessError(
            f"np.{name} on a traced Tensor has no tessc equivalent; tessc has "
            f"{', '.join('np.' + n for n in sorted(NUMPY_UFUNCS))}"
        )
    return located(function)(*inputs)


def numpy_function(func: Any, args: Any, kwargs: Any) -> Any:
    name = getattr(func, "__name__", str(func))
    function = NUMPY_FUNCTIONS.get(name)
    if function is None:
        raise TessError(
            f"np.{name} on a traced Tensor has no tessc equivalent; tessc maps "
            f"{', '.join('np.' + n for n in sorted(NUMPY_FUNCTIONS))} (and NumPy's ufuncs)"
        )
    return located(function)(*args, **kwargs)
