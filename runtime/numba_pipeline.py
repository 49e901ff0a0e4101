"""
How Numba compiles the functions of a generated module: its nopython pipeline minus the
work generated code never needs (`TesscCompiler`):

- no rewrites (`no_rewrites`): Numba's untyped and typed IR rewrites (constant getitems,
  array expressions, dead branch pruning) find nothing in scalar loop code, but cost ~5%
  of an MLP train step's compile, mostly exceptions they raise and catch for every
  non-constant index;
- no closure inlining in serial functions (`InlineClosureLikes`): generated code defines no
  closures or comprehensions (another ~5%). Functions with `parallel=True` keep it:
  Numba's parfor passes rely on it;
- error messages without terminal markup: Numba formats (with colorama) the message of
  every typing exception it raises internally, even those it catches and discards;
- no BLAS probe at start-up (`skip_blas_probe`, run when this module is imported): the
  first compile or cache load in a process imports `numba.np.arraymath`, which imports
  `scipy.linalg` to see whether BLAS is there (~0.15 s of every cold start, the compile
  worker's included); generated code calls no BLAS through Numba.

Measured and rejected: skipping Numba's per-function LLVM `-O3` pre-pass (optimising the
linked module once) saved 0.4 s of the MLP step and made it run faster, but left the tiled
zip+reduce (W2 at 512) unvectorised, 30x slower. LLVM's work is left as Numba does it.

Everything else stays Numba's default, so a function compiled this way is the function
Numba would compile, and a Numba disk-cache entry does not depend on the pipeline.
`tune(dispatcher)` makes a dispatcher compile with `TesscCompiler`; `tessc.runtime.cache`
applies it to every jitted function of a module it loads. A Numba without the internals
this relies on leaves dispatchers untouched (`tune` returns False).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from numba.core import errors
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import PassManager
from numba.core.registry import CPUDispatcher
from numba.core.untyped_passes import InlineClosureLikes


class _PlainColors:
    """Numba's error colour scheme with no markup (its `NOPColorScheme`)."""

    def code(self, message: str) -> str:
        return message

    errmsg = filename = indicate = highlight = reset = code


@contextmanager
def plain_error_messages() -> Iterator[None]:
    saved = errors._termcolor_inst
    errors._termcolor_inst = _PlainColors()
    try:
        yield
    finally:
        errors._termcolor_inst = saved


class TesscCompiler(CompilerBase):
    """Numba's nopython pipeline for generated code (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state.flags.no_rewrites = True

    def compile_extra(self, func: Any) -> Any:
        with plain_error_messages():
            return super().compile_extra(func)

    def define_pipelines(self) -> list[PassManager]:
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        if not self.state.flags.auto_parallel.enabled:
            pipeline.passes = [p for p in pipeline.passes if p[0] is not InlineClosureLikes]
        pipeline.finalize()
        return [pipeline]


def tune(dispatcher: Any) -> bool:
    """Make `dispatcher` compile with `TesscCompiler` if it is a CPU (`njit`) dispatcher;
    whether it did."""
    if not isinstance(dispatcher, CPUDispatcher):
        return False  # CUDA kernels keep their own pipeline
    compiler = getattr(dispatcher, "_compiler", None)
    if compiler is None or not hasattr(compiler, "pipeline_class"):
        return False
    compiler.pipeline_class = TesscCompiler
    return True


def skip_blas_probe() -> bool:
    """Import `numba.np.arraymath` with its import-time BLAS probe (`ensure_blas`, which
    imports `scipy.linalg.cython_blas`) answered by whether SciPy is installed, what the
    probe finds; whether it did. Numba's BLAS functions (`np.dot`, ...) still import SciPy
    when they are typed. Not done if arraymath is loaded already or Numba lacks the probe."""
    if "numba.np.arraymath" in sys.modules:
        return False
    import numba  # noqa: F401  (all of Numba before one of its modules)
    from numba.np import linalg

    probe = getattr(linalg, "ensure_blas", None)
    if probe is None:
        return False
    have_scipy = importlib.util.find_spec("scipy") is not None

    def answer() -> None:
        if not have_scipy:
            raise ImportError("scipy 0.16+ is required for linear algebra")

    linalg.ensure_blas = answer
    try:
        from numba.np import arraymath
    finally:
        linalg.ensure_blas = probe
    if getattr(arraymath, "ensure_blas", None) is answer:
        arraymath.ensure_blas = probe  # later callers get Numba's own
    return True


skip_blas_probe()

__all__ = ["TesscCompiler", "plain_error_messages", "skip_blas_probe", "tune"]
