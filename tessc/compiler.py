"""
The compiler's front door: print a program at any stage, or compile it to a callable.

- `lower(module, stage, pipeline="cpu")`: the textual IR of `module` at `stage` (one of
  `STAGES`), or, at `numba`, the generated Python source;
- `compile_module(module, entry, target="cpu")`: a callable taking NumPy arrays and
  returning the tuple of `entry`'s results. `target` is a pipeline name from
  `tessc.pipelines.PIPELINES`: `cpu` (and `cpu-unfused`) run the passes, generate Numba
  source and load it through the runtime's disk cache; `reference` interprets the `tess`
  level with NumPy.

A program compiled once is found again, in any later process, without running the compiler:
`compile_module` looks its key up in the warm-start index first (see `compile_module`).
Every phase (each pass, codegen, loading) is timed in the active `tessc.timing` report.

The caller's module is never modified: every lowering works on a clone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from io import StringIO
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException

from tessc import timing
from tessc.dialects.functions import lookup_function, module_functions
from tessc.pipelines import IR_STAGES, STAGES, get_pipeline, run_passes

Outputs = tuple[np.ndarray, ...]
LLVM_KERNELS_VARIABLE = "TESSC_LLVM_KERNELS"
WORKER_MIN_OPS = 32
"""Ops of a `tess` program from which its compile starts the compile worker early."""


def print_module(module: ModuleOp) -> str:
    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


def verify_module(module: ModuleOp) -> None:
    """xDSL's verifiers, and SSA dominance, which they do not check (a value used in its
    own definition would make passes loop)."""
    from tessc.dialects.dominance import verify_dominance

    module.verify()
    verify_dominance(module)


def lower_module(module: ModuleOp, stage: str, *, pipeline: str = "cpu") -> ModuleOp:
    """A verified copy of `module` taken to IR stage `stage` by `pipeline`'s passes."""
    spec = get_pipeline(pipeline).passes_to(stage)
    verify_module(module)
    lowered = module.clone()
    with timing.phase("passes"):
        run_passes(lowered, spec, original=module)
    with timing.phase("verify"):
        try:
            lowered.verify()
        except DiagnosticException as error:  # the passes broke a verified module
            from tessc.diagnostics import internal_error

            raise internal_error(f"pipeline '{pipeline}'", error, module, spec) from error
    return lowered


def with_llvm_setting(codegen_options: dict[str, Any]) -> dict[str, Any]:
    """`codegen_options` with `llvm_kernels` from `$TESSC_LLVM_KERNELS` unless given:
    `TESSC_LLVM_KERNELS=0` keeps every kernel Numba's (`codegen.to_llvm`)."""
    if "llvm_kernels" in codegen_options:
        return codegen_options
    setting = os.environ.get(LLVM_KERNELS_VARIABLE, "1").strip().lower()
    return {**codegen_options, "llvm_kernels": setting not in ("0", "no", "false")}


def numba_source(module: ModuleOp, *, pipeline: str = "cpu", **codegen_options: Any) -> str:
    """The Python source `pipeline` generates for `module` (`codegen_options` go to
    `emit_numba`: `fastmath`, `parallel_threshold`; a `cuda` pipeline's `emit_cuda` takes
    none)."""
    target = get_pipeline(pipeline).target
    if target == "cuda":
        if codegen_options:
            raise ValueError(f"pipeline '{pipeline}' takes no codegen options")
        from tessc.lowering.codegen.to_cuda import emit_cuda

        return emit_cuda(lower_module(module, "gpu", pipeline=pipeline))
    if target != "numba":
        raise ValueError(f"pipeline '{pipeline}' does not generate code")
    from tessc.lowering.codegen.to_numba import emit_numba

    lowered = lower_module(module, "loops", pipeline=pipeline)
    with timing.phase("codegen"):
        try:
            return emit_numba(lowered, **with_llvm_setting(codegen_options))
        except (DiagnosticException, TypeError):
            raise  # an op codegen does not support; bad codegen options
        except Exception as error:
            from tessc.diagnostics import internal_error

            raise internal_error("codegen (emit_numba)", error, lowered) from error


def lower(module: ModuleOp, stage: str, *, pipeline: str = "cpu", **codegen_options: Any) -> str:
    """`module` at `stage` as text: IR for `tess`..`loops`, Python source for `numba`."""
    if stage == "numba":
        return numba_source(module, pipeline=pipeline, **codegen_options)
    if stage not in IR_STAGES:
        raise ValueError(f"unknown stage '{stage}' (choose from {', '.join(STAGES)})")
    return print_module(lower_module(module, stage, pipeline=pipeline))


def _check_entry(module: ModuleOp, entry: str) -> func.FuncOp:
    found = lookup_function(module, entry)
    if found is not None:
        return found
    names = [f.sym_name.data for f in module_functions(module)]
    raise ValueError(
        f"no function '@{entry}' in the module (it defines: {', '.join(names) or 'none'})"
    )


class ReferenceProgram:
    """`entry` of a `tess` module, run by the NumPy reference interpreter."""

    def __init__(self, module: ModuleOp, entry: str):
        verify_module(module)
        _check_entry(module, entry)
        self.module = module.clone()
        self.entry = entry

    def __call__(self, *args: np.ndarray) -> Outputs:
        from tessc.reference import interpret

        return interpret(self.module, self.entry, args)


def compile_module(
    module: ModuleOp,
    entry: str,
    target: str = "cpu",
    *,
    warm_start: bool = True,
    **codegen_options: Any,
) -> Callable[..., Outputs]:
    """`entry` of `module` compiled by pipeline `target`, as a callable on NumPy arrays.

    The callable checks its inputs (count, shapes, dtypes: ValueError naming the argument)
    and returns a tuple of new output arrays.

    With `warm_start`, a program compiled before (by any process sharing the cache
    directory) skips the compiler: its key (`tessc.program_key`: the module's text, the
    pipeline, codegen options, the compiler's sources and library versions) finds the
    generated module in the warm-start index (`tessc.runtime.program_cache`), so only
    loading remains.
    """
    pipeline = get_pipeline(target)
    if pipeline.target == "reference":
        if codegen_options:
            raise ValueError(f"target '{target}' takes no codegen options")
        return ReferenceProgram(module, entry)
    _check_entry(module, entry)
    from tessc.runtime import executable, load_source, program_cache

    if pipeline.target == "numba":  # the setting is part of the program's key
        codegen_options = with_llvm_setting(codegen_options)

    key = source = None
    if warm_start:
        with timing.phase("warm-start lookup"):
            from tessc.program_key import program_key

            key = program_key(print_module(module), target, pipeline.spec, codegen_options)
            source = program_cache.lookup(key)
    hit = source is not None
    if source is None:
        if pipeline.target == "numba" and sum(1 for _ in module.walk()) >= WORKER_MIN_OPS:
            # Likely several kernels to compile: the compile worker
            # (`tessc.runtime.external`) imports Numba while the passes run.
            from tessc.runtime.external import start_worker

            with timing.phase("start compile worker"):
                start_worker()
        source = numba_source(module, pipeline=target, **codegen_options)
    if pipeline.target == "cuda":
        from tessc.runtime.cuda import require_cuda

        require_cuda()  # a clear error, not Numba's, when there is no GPU and no simulator
    with timing.phase("load module"):
        loaded = load_source(source)
    if key is not None and not hit:
        program_cache.record(key, source)
    return executable(loaded, entry)


def run(module: ModuleOp, entry: str, args: Sequence[np.ndarray], target: str = "cpu") -> Outputs:
    """Compile and call once: `compile_module(module, entry, target)(*args)`."""
    return compile_module(module, entry, target)(*args)


__all__ = [
    "STAGES",
    "ReferenceProgram",
    "compile_module",
    "lower",
    "lower_module",
    "numba_source",
    "print_module",
    "run",
    "verify_module",
    "with_llvm_setting",
]
