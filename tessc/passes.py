"""
Every pass tessc adds to xDSL's, by name, and the named pipelines.

Passes are imported lazily (`module:Class`) so that `tessc-opt` starts fast and a pass's
dependencies load only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.passes import ModulePass

TESS_PASSES: dict[str, str] = {
    "tess-autodiff": "tessc.lowering.autodiff.autodiff:TessAutodiffPass",
    "tess-to-linalg": "tessc.lowering.linalg.to_linalg:TessToLinalgPass",
    "tess-fuse": "tessc.lowering.fusion.fuse:TessFusePass",
    "tess-pack-narrow": "tessc.lowering.fusion.pack_narrow:TessPackNarrowPass",
    "tess-cse-generics": "tessc.lowering.fusion.cse_generics:TessCseGenericsPass",
    "tess-fuse-epilogue": "tessc.lowering.fusion.fuse_epilogue:TessFuseEpiloguePass",
    "tess-fuse-horizontal": "tessc.lowering.fusion.fuse_horizontal:TessFuseHorizontalPass",
    "tess-bufferize": "tessc.lowering.buffers.bufferize:TessBufferizePass",
    "tess-memory-plan": "tessc.lowering.buffers.memory_plan:TessMemoryPlanPass",
    "tess-outline-kernels": "tessc.lowering.buffers.outline_kernels:TessOutlineKernelsPass",
    "tess-linalg-to-loops": "tessc.lowering.loops.linalg_to_loops:TessLinalgToLoopsPass",
    "tess-tile": "tessc.lowering.loops.tile:TessTilePass",
    "tess-tile-dot": "tessc.lowering.loops.tile_dot:TessTileDotPass",
    "tess-pack-matmul": "tessc.lowering.loops.pack_matmul:TessPackMatmulPass",
    "tess-row-dots": "tessc.lowering.loops.row_dots:TessRowDotsPass",
    "tess-interchange-rows": "tessc.lowering.loops.interchange_rows:TessInterchangeRowsPass",
    "tess-parallel-columns": "tessc.lowering.loops.parallel_columns:TessParallelColumnsPass",
    "tess-register-accumulate": (
        "tessc.lowering.loops.register_accumulate:TessRegisterAccumulatePass"
    ),
    "tess-expand-math": "tessc.lowering.loops.expand_math:TessExpandMathPass",
    "tess-hoist-constants": "tessc.lowering.loops.hoist_constants:TessHoistConstantsPass",
    "tess-hoist-scratch": "tessc.lowering.buffers.hoist_scratch:TessHoistScratchPass",
    "tess-gpu-partition": "tessc.lowering.gpu.gpu_partition:TessGpuPartitionPass",
    "tess-gpu-rows": "tessc.lowering.gpu.gpu_rows:TessGpuRowsPass",
    "tess-gpu-contract": "tessc.lowering.gpu.gpu_contract:TessGpuContractPass",
    "tess-gpu-reduce": "tessc.lowering.gpu.gpu_reduce:TessGpuReducePass",
    "tess-gpu-map": "tessc.lowering.gpu.gpu_map:TessGpuMapPass",
}


def load_pass(name: str) -> type[ModulePass]:
    module_name, class_name = TESS_PASSES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def pass_loaders() -> dict[str, Callable[[], type[ModulePass]]]:
    """`{name: loader}` in the form `xDSLOptMain.register_pass` expects."""
    return {name: (lambda name=name: load_pass(name)) for name in TESS_PASSES}
