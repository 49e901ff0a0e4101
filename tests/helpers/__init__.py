"""
Shared helpers for tessc's differential tests: shapes, inputs, tolerances, programs.

Every lowering is checked the same way: build a `tess` program, run it through the
compiler and through `tessc.reference.interpret`, compare. This package supplies the parts:

- `helpers.shapes`: tensor types, and hypothesis strategies for shapes that broadcast by
  the seed rules (`broadcastable_pair`, `broadcastable_triple`), reduction dim lists,
  batched matmul shapes;
- `helpers.compare`: `random_inputs` (deterministic arrays of a func's declared argument
  shapes and dtypes), `assert_allclose_by_dtype` / `assert_results_match` (tolerances
  chosen by dtype), `assert_compiles_like_reference` (a program's `@f` compiled against the
  reference interpreter) and `central_difference` (the numerical gradient);
- `helpers.programs`: `build_single_op_module` (a func with one tess op) and
  `random_program` (a hypothesis strategy for small random tess programs), and
  `compiled_examples` (settings for tests that compile kernels).

It lives under `tests/` because it needs hypothesis, a test-only dependency; the package
`tessc` never imports it. Test modules import it as `helpers` (pytest puts `tests/`, the
directory of the root `conftest.py`, on `sys.path`).
"""

from helpers.compare import (
    TOLERANCES,
    assert_allclose_by_dtype,
    assert_compiles_like_reference,
    assert_results_match,
    central_difference,
    random_inputs,
)
from helpers.programs import (
    MAGNITUDE_LIMIT,
    MAX_RESULTS,
    STEP_KINDS,
    build_single_op_module,
    compiled_examples,
    random_program,
)
from helpers.shapes import (
    broadcastable_pair,
    broadcastable_shapes,
    broadcastable_triple,
    element_type,
    matmul_shapes,
    reduce_dims,
    shapes,
    tensor_type,
)

__all__ = [
    "MAGNITUDE_LIMIT",
    "MAX_RESULTS",
    "STEP_KINDS",
    "TOLERANCES",
    "assert_compiles_like_reference",
    "assert_allclose_by_dtype",
    "assert_results_match",
    "broadcastable_pair",
    "broadcastable_shapes",
    "broadcastable_triple",
    "build_single_op_module",
    "central_difference",
    "compiled_examples",
    "element_type",
    "matmul_shapes",
    "random_inputs",
    "random_program",
    "reduce_dims",
    "shapes",
    "tensor_type",
]
