"""Zero-size tensors on the CPU pipelines (`cpu`, `cpu-unfused`, `cpu-basic`), every op and
its gradient against the reference interpreter (the cases: `helpers.zero_size`; the `cuda`
target's run is `tests/cuda/test_zero_size_cuda.py`).

The regression: `ts.jit(lambda t: -t)` on a `(0, 3)` array emitted a host whose body was
only the `# <kernel>` comment of an inlined kernel whose loops never run (IndentationError
when loading it); a zero-byte workspace was not passed to the host that takes one; a
concat of empty operands tripped an assertion; an empty mean's gradient divided by 0."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts
from tessc import TraceError

from helpers.zero_size import CASES, EMPTY, ERRORS, GRADIENTS, check_case, check_gradient

PIPELINES = ("cpu", "cpu-unfused", "cpu-basic")


def test_negation_of_an_empty_array_compiles() -> None:
    source = ts.jit(lambda t: -t).ir(EMPTY, stage="numba")
    compile(source, "<generated>", "exec")  # was: IndentationError, a comment-only body
    assert ts.jit(lambda t: -t)(EMPTY).shape == (0, 3)


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_size_op(name: str, pipeline: str) -> None:
    check_case(name, pipeline)


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_zero_size_gradient(name: str, pipeline: str) -> None:
    check_gradient(name, pipeline)


@pytest.mark.parametrize("target", ["cpu", "reference"])
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_extremum_of_an_empty_dim_is_refused_as_numpy_does(name: str, target: str) -> None:
    fn, message = ERRORS[name]
    with pytest.raises(ValueError):  # NumPy: "zero-size array to reduction operation"
        np.max(EMPTY, axis=0)
    with pytest.raises(TraceError, match=message):
        ts.jit(fn, target=target)(EMPTY)
