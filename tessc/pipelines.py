"""
Named pipelines: which passes take a `tess` program to each stage, and which target runs it.

A pipeline is a sequence of stages (`STAGES`), each reached from the one before by a
pass-pipeline string in `xdsl-opt -p` syntax. For `cpu`:

    stage    the module holds                         passes that reach it
    tess     the program as written (levels 1-2)      -
    fused    linalg.generic on tensors (level 3)      dce, tess-widen-narrow,
                                                      tess-to-linalg, tess-fuse,
                                                      tess-attention-views,
                                                      tess-pack-narrow, tess-cse-generics,
                                                      tess-fuse-epilogue,
                                                      tess-fuse-horizontal
    buffers  memrefs, destination-passing (level 4)   tess-bufferize, tess-memory-plan
    loops    host funcs + scf kernels (level 5)       tess-merge-aliased-outputs,
                                                      tess-outline-kernels, tess-linalg-to-loops,
                                                      tess-pack-matmul,
                                                      tess-interchange-rows, tess-row-dots,
                                                      tess-tile, tess-tile-dot,
                                                      tess-parallel-columns,
                                                      tess-register-accumulate,
                                                      tess-expand-math,
                                                      tess-attention-kernels,
                                                      tess-hoist-constants,
                                                      tess-hoist-scratch, canonicalize,
                                                      cse, tess-sink-aliasing-views
    numba    Python source for Numba (level 6)        codegen: emit_numba

`cuda` shares the front (tess, fused, buffers; first `tess-decompose-attention`, the
attention ops its flash kernels do not take as the tess ops they compute) and then maps
each kernel onto the GPU (lowering/gpu/README.md is the level's contract with the CUDA
code generator):

    stage    the module holds                         passes that reach it
    gpu      host funcs launching `gpu.func`s of      tess-outline-kernels,
             one `gpu.module @kernels` (level 5g)     tess-gpu-fold-transposes,
                                                      tess-gpu-attention,
                                                      tess-gpu-partition, tess-gpu-rows,
                                                      tess-gpu-conv, tess-gpu-contract,
                                                      tess-gpu-reduce, tess-gpu-map,
                                                      tess-gpu-horizontal, canonicalize, cse
    numba    Python source for Numba's CUDA target    codegen: emit_cuda

It has no `loops` stage: the GPU passes read the outlined linalg kernels directly, where a
reduction's combiner and a contraction's operands are still explicit, and build each
thread's loops themselves (CPU tiling and polynomial math are not for GPUs).

`cpu-unfused` is `cpu` without the fusion passes (one kernel per tess op: the baseline
fusion is measured against); `cpu-basic` is the minimal lowering (to-linalg, bufferize,
outline, loops), to bisect a miscompile to an optional pass. `reference` has no passes:
its target interprets the `tess` level with NumPy (`tessc.reference.interpret`), the
oracle of every test.

Every compiling pipeline starts with xDSL's `dce`: a traced function may compute values it
never returns (`y = x * 3` left unused), and tess ops are `Pure`, so, as in JAX and MLIR,
they cost nothing; fusion would otherwise carry them as extra kernel outputs.

`cuda` runs `tess-fuse-horizontal` without its segmented reductions (`segmented=false`):
the gpu passes do not lower `tess.row_ranges` loops, so a Lamb step there keeps a
reduction kernel per parameter norm (correct, not fused). It packs updates of arguments
that are not donated too: on the GPU a launch per parameter costs more than packing (a
device-to-device copy), and an output arena given back on the next call (`params, state
= step(params, grads, state)`) is passed without repacking (`tessc.runtime.cuda`), so an
Adam step without donation is one arena launch, as with it. It does not group a train
step's updates (`computed-groups=false`: `tess-gpu-partition` would split the group into
a launch per member anyway) or stack products sharing a right operand
(`tess-fuse{horizontal-fc=false}`: the gpu passes are not tested on its row slices), nor
compute a conv inside its pool's windows (`pool-windows=false`: the conv's own kernel
stages its input tiles in shared memory).

In `cpu`, `tess-fuse-horizontal` packs only updates of donated arguments (`donated-only`):
an optimizer's parameters and states, which the caller keeps across calls and can keep in
`tessc.arena` views. Independent ops on arrays a caller passes separately would cost a
packing copy per call (2x slower measured on two 4M-float updates), so they stay apart.

xDSL's `canonicalize` and `cse` run last on the loop level, where they fold the index
constants each kernel repeats, the constants `tess-expand-math` introduces, and duplicate
loads (`tess-hoist-constants` first moves constants out of loop nests in one walk, where
canonicalize took one sweep of the module per loop level); tests/test_cpu_differential.py
runs every pipeline against the reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.transforms import get_all_passes
from xdsl.utils.exceptions import DiagnosticException

from tessc import timing
from tessc.passes import pass_loaders

STAGES: tuple[str, ...] = ("tess", "fused", "buffers", "loops", "numba")
"""The CPU pipelines' stages, in pipeline order."""

GPU_STAGES: tuple[str, ...] = ("tess", "fused", "buffers", "gpu", "numba")
"""The `cuda` pipeline's stages, in pipeline order."""

IR_STAGES: tuple[str, ...] = ("tess", "fused", "buffers", "loops", "gpu")
"""Every stage that is IR (the last one of each pipeline, `numba`, is Python source)."""


@dataclass(frozen=True)
class Pipeline:
    """A named pipeline: `passes[k]` takes the module from `STAGES[k]` to `STAGES[k + 1]`."""

    name: str
    passes: tuple[str, ...]
    target: str  # "numba"/"cuda": compiled by codegen + runtime; "reference": interpreted
    description: str
    all_stages: tuple[str, ...] = STAGES

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages this pipeline reaches (a `reference` pipeline stays at `tess`)."""
        if self.target == "reference":
            return self.all_stages[:1]
        return self.all_stages

    @property
    def ir_stage(self) -> str:
        """The last IR stage, the code generator's input."""
        return self.stages[-2] if len(self.stages) > 1 else self.stages[0]

    def passes_to(self, stage: str) -> str:
        """The pass-pipeline string that takes a `tess` module to IR stage `stage`."""
        if stage not in IR_STAGES:
            raise ValueError(f"unknown IR stage '{stage}' (choose from {', '.join(IR_STAGES)})")
        if stage not in self.stages:
            raise ValueError(f"pipeline '{self.name}' does not reach stage '{stage}'")
        steps = self.passes[: self.stages.index(stage)]
        return ",".join(step for step in steps if step)

    @property
    def spec(self) -> str:
        """All of the pipeline's passes, as one `-p` string."""
        return ",".join(step for step in self.passes if step)


_FUSE = (
    "dce,tess-widen-narrow,tess-to-linalg,tess-fuse,tess-attention-views,tess-pack-narrow,"
    "tess-cse-generics,"
    "tess-fuse-epilogue,"
    "tess-fuse-horizontal{donated-only=true}"
)
_GPU_FUSE = (
    "dce,tess-widen-narrow,tess-decompose-attention{fallback-only=true},tess-to-linalg,"
    "tess-fuse{horizontal-fc=false pool-windows=false},tess-fuse-epilogue,"
    "tess-fuse-horizontal{segmented=false computed-groups=false}"
)
_BUFFERS = "tess-bufferize,tess-memory-plan"
_LOOPS = (
    "tess-merge-aliased-outputs,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles,"
    "tess-pack-matmul,"
    "tess-interchange-rows,"
    "tess-row-dots,tess-tile,tess-tile-dot,"
    "tess-parallel-columns,tess-register-accumulate,"
    "tess-attention-kernels,tess-expand-math,tess-hoist-constants,tess-hoist-scratch,"
    "canonicalize,cse,tess-sink-aliasing-views"
)
_BASIC_LOOPS = (
    "tess-outline-kernels,tess-linalg-to-loops,tess-attention-kernels,canonicalize,cse,"
    "tess-sink-aliasing-views"
)
_GPU = (
    "tess-outline-kernels,tess-gpu-fold-transposes,tess-gpu-attention,tess-gpu-partition,"
    "tess-gpu-rows,"
    "tess-gpu-conv,tess-gpu-contract,tess-gpu-reduce,tess-gpu-map,tess-gpu-horizontal,"
    "canonicalize,cse"
)

PIPELINES: dict[str, Pipeline] = {
    pipeline.name: pipeline
    for pipeline in (
        Pipeline(
            "cpu",
            (_FUSE, _BUFFERS, _LOOPS),
            "numba",
            "fused, memory-planned, tiled kernels as parallel Numba loops",
        ),
        Pipeline(
            "cpu-unfused",
            ("dce,tess-widen-narrow,tess-to-linalg", _BUFFERS, _LOOPS),
            "numba",
            "cpu without fusion: one kernel per tess op (the baseline fusion is measured by)",
        ),
        Pipeline(
            "cpu-basic",
            ("dce,tess-widen-narrow,tess-to-linalg", "tess-bufferize", _BASIC_LOOPS),
            "numba",
            "the minimal lowering: no fusion, memory plan, tiling or math expansion",
        ),
        Pipeline(
            "cuda",
            (_GPU_FUSE, _BUFFERS, _GPU),
            "cuda",
            "fused, memory-planned kernels mapped onto the GPU (Numba CUDA)",
            GPU_STAGES,
        ),
        Pipeline("reference", (), "reference", "the NumPy reference interpreter"),
    )
}


def get_pipeline(name: str) -> Pipeline:
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline '{name}' (choose from {', '.join(PIPELINES)})")
    return PIPELINES[name]


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """xDSL's passes and tessc's, by name (loaded lazily)."""
    passes = dict(get_all_passes())
    passes.update(pass_loaders())
    return passes


def run_passes(
    module: ModuleOp, spec: str, ctx: Context | None = None, *, original: ModuleOp | None = None
) -> None:
    """Apply the pass-pipeline string `spec` to `module` in place.

    A pass failing with anything but a diagnostic (a `DiagnosticException`) is an internal
    compiler error: `InternalCompilerError` names the pass and, when the caller passes the
    module as it was before `spec` (`original`), saves a reproducer — the module before the
    failing pass, made again from `original` by the passes before it, so that compiling
    costs no copy when nothing fails. With `$TESSC_VERIFY_PASSES=1` (the fuzzer sets it) the
    module is verified after every pass, and a pass leaving invalid IR is an ICE too."""
    if not spec:
        return
    if ctx is None:
        from tessc.context import make_context

        ctx = make_context()
    passes = PassPipeline.parse_spec(available_passes(), spec).passes
    # One pass at a time, as `PassPipeline.apply` does, each a phase of the timing report.
    verify_each = os.environ.get("TESSC_VERIFY_PASSES", "") not in ("", "0")
    for index, module_pass in enumerate(passes):
        try:
            with timing.phase(module_pass.name):
                module_pass.apply(ctx, module)
            if verify_each:  # invalid IR from a pass is an ICE, not a miscompile later
                module.verify()
        except DiagnosticException as error:
            if not verify_each or original is None:
                raise
            raise _internal_error(passes, index, error, original, ctx) from error
        except Exception as error:
            raise _internal_error(passes, index, error, original, ctx) from error


def _internal_error(
    passes: tuple[ModulePass, ...],
    index: int,
    error: Exception,
    original: ModuleOp | None,
    ctx: Context,
) -> Exception:
    from tessc.diagnostics import internal_error, pass_spec

    before = None
    if original is not None:
        before = original.clone()
        try:
            for module_pass in passes[:index]:
                module_pass.apply(ctx, before)
        except Exception:
            before = None
    failing = passes[index]
    return internal_error(f"pass '{failing.name}'", error, before, pass_spec(failing))


__all__ = [
    "GPU_STAGES",
    "IR_STAGES",
    "PIPELINES",
    "STAGES",
    "Pipeline",
    "available_passes",
    "get_pipeline",
    "run_passes",
]
