"""Zero-size tensors on the `cuda` target in the simulator: every case and gradient of
`helpers.zero_size` against the reference interpreter, as `tests/test_zero_size.py` runs
them on the CPU pipelines; and no launch of an empty grid, which the simulator runs (no
thread) but CUDA refuses (`CUDA_ERROR_INVALID_VALUE`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tessc as ts
from tessc import TraceError

from helpers.zero_size import CASES, EMPTY, ERRORS, GRADIENTS, check_case, check_gradient


@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_size_op_cuda(name: str) -> None:
    check_case(name, "cuda")


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_zero_size_gradient_cuda(name: str) -> None:
    check_gradient(name, "cuda")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_extremum_of_an_empty_dim_is_refused_cuda(name: str) -> None:
    fn, message = ERRORS[name]
    with pytest.raises(TraceError, match=message):
        ts.jit(fn, target="cuda")(EMPTY)


def test_no_launch_of_an_empty_grid() -> None:
    product = ts.jit(lambda a, b: (a @ b).sum(0), target="cuda")
    a, b = EMPTY, np.ones((3, 4), np.float32)
    source = product.ir(a, b, stage="numba")
    grids = re.findall(r"\w+\[(?:fixed|strided)_grid\(([^)]*)\), \(", source)
    assert grids, source
    assert all("0" not in [g.strip() for g in grid.split(",")] for grid in grids), source
    assert "an empty grid, not launched" in source
    np.testing.assert_array_equal(product(a, b), np.zeros(4, np.float32))
