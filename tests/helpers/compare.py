"""
Inputs for a func and comparison of its results: `random_inputs` (deterministic arrays of
the declared argument shapes and dtypes), `assert_allclose_by_dtype` /
`assert_results_match` (tolerances chosen by dtype), `assert_compiles_like_reference` (a
program's `@f`, compiled, against the reference interpreter on random inputs), and
`central_difference`, the numerical gradient that gradients are checked against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func

from tessc.dialects.tess import format_shape
from tessc.reference import interpret, parse_module, shape_and_dtype


def random_inputs(
    func_op: func.FuncOp,
    seed: int,
    *,
    positive: bool = False,
    low: float = -2.0,
    high: float = 2.0,
) -> list[np.ndarray]:
    """
    Arrays of `func_op`'s argument shapes and dtypes, uniform in [low, high).

    With `positive=True` the values are in [0.5, max(high, 1.0)) instead (for ops such as
    `log`, `sqrt` or `pow` that need positive inputs). Deterministic in `seed`.
    """
    rng = np.random.default_rng(seed)
    if positive:
        low, high = 0.5, max(high, 1.0)
    arrays = []
    for typ in func_op.function_type.inputs.data:
        shape, dtype = shape_and_dtype(typ)
        if dtype.kind == "b":
            arrays.append(rng.random(size=shape) < 0.5)
        elif dtype.kind in "iu":  # integers in [low, high]: negative indices too
            bounds = int(np.floor(low)), int(np.ceil(high)) + 1
            arrays.append(rng.integers(*bounds, size=shape).astype(dtype))
        else:
            arrays.append(rng.uniform(low, high, size=shape).astype(dtype))
    return arrays


TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-13),
}
"""(rtol, atol) by dtype; atol is scaled by the magnitude of the expected array."""


def assert_allclose_by_dtype(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    err_msg: str = "",
) -> None:
    """
    Assert `actual` matches `expected` in shape, dtype and value, with tolerances by dtype.

    The absolute tolerance is `atol * max(1, max |expected|)`: a sum of terms of size 100
    that cancels to 0 is only as exact as its terms, not as its result. NaNs must match.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(
            f"shape {format_shape(actual.shape)} != expected {format_shape(expected.shape)}"
            f" {err_msg}"
        )
    if actual.dtype != expected.dtype:
        raise AssertionError(f"dtype {actual.dtype} != expected {expected.dtype} {err_msg}")
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    default_rtol, default_atol = TOLERANCES.get(expected.dtype, (1e-7, 0.0))
    finite = expected[np.isfinite(expected)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    np.testing.assert_allclose(
        actual,
        expected,
        rtol=default_rtol if rtol is None else rtol,
        atol=(default_atol if atol is None else atol) * scale,
        equal_nan=True,
        err_msg=err_msg,
    )


def assert_results_match(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], **tolerances: float
) -> None:
    """`assert_allclose_by_dtype` on each pair of a func's results; the counts must match."""
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} results, expected {len(expected)}")
    for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_allclose_by_dtype(a, e, err_msg=f"(result {index})", **tolerances)  # type: ignore[arg-type]


def assert_compiles_like_reference(text: str, seed: int, **codegen_options: object) -> None:
    """`@f` of the `tess` program `text`, compiled (`tessc.compiler.compile_module` with
    `codegen_options`), gives the reference interpreter's results on `random_inputs(seed)`."""
    from tessc.compiler import compile_module

    module = parse_module(text)
    args = random_inputs(next(iter(module.ops)), seed)
    expected = interpret(module, "f", args)
    assert_results_match(compile_module(module, "f", **codegen_options)(*args), expected)


def central_difference(
    f: Callable[[np.ndarray], object], x: np.ndarray, eps: float = 1e-6
) -> np.ndarray:
    """The gradient of the scalar `f` at `x` by central differences, element by element
    ((f(x + eps) - f(x - eps)) / 2 eps); give float64 arrays."""
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        gradient[index] = (float(f(up)) - float(f(down))) / (2 * eps)  # type: ignore[arg-type]
    return gradient
