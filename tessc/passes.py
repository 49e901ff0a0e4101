"""
Every pass tessc adds to xDSL's, by name, and the level of IR each one reads.

Passes are imported lazily (`module:Class`) so that `tessc-opt` starts fast and a pass's
dependencies load only when it runs.

`INPUT_LEVELS` says, for most passes, which ops make a module one of the pass's input
level: `tessc-opt` names a pass run explicitly (`-p`, `--pass-pipeline`) on a module with
none of them an error (`pass 'tess-fuse' expects ... IR (ops like ...), found none`), where
the pass would silently do nothing. Inside a named pipeline a pass finding nothing to do is
normal (no matmul for `tess-pack-matmul`) and is not checked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass

TESS_PASSES: dict[str, str] = {
    "tess-autodiff": "tessc.lowering.autodiff.autodiff:TessAutodiffPass",
    "tess-decompose-attention": (
        "tessc.lowering.linalg.decompose_attention:TessDecomposeAttentionPass"
    ),
    "tess-widen-narrow": "tessc.lowering.linalg.widen_narrow:TessWidenNarrowPass",
    "tess-to-linalg": "tessc.lowering.linalg.to_linalg:TessToLinalgPass",
    "tess-fuse": "tessc.lowering.fusion.fuse:TessFusePass",
    "tess-attention-views": "tessc.lowering.fusion.attention_views:TessAttentionViewsPass",
    "tess-pack-narrow": "tessc.lowering.fusion.pack_narrow:TessPackNarrowPass",
    "tess-cse-generics": "tessc.lowering.fusion.cse_generics:TessCseGenericsPass",
    "tess-fuse-epilogue": "tessc.lowering.fusion.fuse_epilogue:TessFuseEpiloguePass",
    "tess-fuse-horizontal": "tessc.lowering.fusion.fuse_horizontal:TessFuseHorizontalPass",
    "tess-bufferize": "tessc.lowering.buffers.bufferize:TessBufferizePass",
    "tess-memory-plan": "tessc.lowering.buffers.memory_plan:TessMemoryPlanPass",
    "tess-merge-aliased-outputs": (
        "tessc.lowering.buffers.merge_aliased_outputs:TessMergeAliasedOutputsPass"
    ),
    "tess-outline-kernels": "tessc.lowering.buffers.outline_kernels:TessOutlineKernelsPass",
    "tess-linalg-to-loops": "tessc.lowering.loops.linalg_to_loops:TessLinalgToLoopsPass",
    "tess-tile": "tessc.lowering.loops.tile:TessTilePass",
    "tess-tile-dot": "tessc.lowering.loops.tile_dot:TessTileDotPass",
    "tess-pack-matmul": "tessc.lowering.loops.pack_matmul:TessPackMatmulPass",
    "tess-conv-tiles": "tessc.lowering.loops.conv_tiles:TessConvTilesPass",
    "tess-row-dots": "tessc.lowering.loops.row_dots:TessRowDotsPass",
    "tess-interchange-rows": "tessc.lowering.loops.interchange_rows:TessInterchangeRowsPass",
    "tess-parallel-columns": "tessc.lowering.loops.parallel_columns:TessParallelColumnsPass",
    "tess-register-accumulate": (
        "tessc.lowering.loops.register_accumulate:TessRegisterAccumulatePass"
    ),
    "tess-expand-math": "tessc.lowering.loops.expand_math:TessExpandMathPass",
    "tess-attention-kernels": "tessc.lowering.loops.attention_kernels:TessAttentionKernelsPass",
    "tess-hoist-constants": "tessc.lowering.loops.hoist_constants:TessHoistConstantsPass",
    "tess-hoist-scratch": "tessc.lowering.buffers.hoist_scratch:TessHoistScratchPass",
    "tess-sink-aliasing-views": (
        "tessc.lowering.loops.sink_aliasing_views:TessSinkAliasingViewsPass"
    ),
    "tess-gpu-partition": "tessc.lowering.gpu.gpu_partition:TessGpuPartitionPass",
    "tess-gpu-attention": "tessc.lowering.gpu.gpu_attention:TessGpuAttentionPass",
    "tess-gpu-rows": "tessc.lowering.gpu.gpu_rows:TessGpuRowsPass",
    "tess-gpu-conv": "tessc.lowering.gpu.gpu_conv:TessGpuConvPass",
    "tess-gpu-contract": "tessc.lowering.gpu.gpu_contract:TessGpuContractPass",
    "tess-gpu-reduce": "tessc.lowering.gpu.gpu_reduce:TessGpuReducePass",
    "tess-gpu-map": "tessc.lowering.gpu.gpu_map:TessGpuMapPass",
    "tess-gpu-horizontal": "tessc.lowering.gpu.gpu_horizontal:TessGpuHorizontalPass",
    "tess-gpu-fold-transposes": "tessc.lowering.gpu.gpu_fold_transposes:TessGpuFoldTransposesPass",
}


def load_pass(name: str) -> type[ModulePass]:
    module_name, class_name = TESS_PASSES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def pass_loaders() -> dict[str, Callable[[], type[ModulePass]]]:
    """`{name: loader}` in the form `xDSLOptMain.register_pass` expects."""
    return {name: (lambda name=name: load_pass(name)) for name in TESS_PASSES}


# ---------------------------------------------------------------------------------------
# The level of IR each pass reads
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputLevel:
    """A level of IR: its name, example ops, and whether an op belongs to it."""

    name: str
    examples: str
    has_op: Callable[[Operation], bool]

    def present(self, module: ModuleOp) -> bool:
        """Whether any op of `module` is of this level."""
        return any(self.has_op(op) for op in module.walk())

    def missing_message(self, pass_name: str) -> str:
        return f"pass '{pass_name}' expects {self.name} IR (ops like {self.examples}), found none"


def _types(op: Operation) -> list[object]:
    types: list[object] = [value.type for value in op.results]
    types.extend(value.type for value in op.operands)
    for region in op.regions:
        for block in region.blocks:
            types.extend(arg.type for arg in block.args)
    return types


def _is_tess_op(op: Operation) -> bool:
    return op.name.startswith("tess.")


def _is_function_definition(op: Operation) -> bool:
    return op.name == "func.func" and bool(op.regions and op.regions[0].blocks)


def _is_linalg_on_tensors(op: Operation) -> bool:
    return op.name.startswith("linalg.") and any(isinstance(t, TensorType) for t in _types(op))


def _is_on_tensors(op: Operation) -> bool:
    return any(isinstance(t, TensorType) for t in _types(op))


def _is_on_memrefs(op: Operation) -> bool:
    return any(isinstance(t, MemRefType) for t in _types(op))


def _is_linalg_op(op: Operation) -> bool:
    return op.name.startswith(("linalg.", "kernel."))


def _is_loop(op: Operation) -> bool:
    return op.name in ("scf.for", "scf.parallel")


def _is_kernel_function(op: Operation) -> bool:
    from tessc.dialects import contract

    return op.name == "func.func" and contract.KERNEL.has(op)


TESS_LEVEL = InputLevel("tess", "tess.add, tess.matmul", _is_tess_op)
FUNCTION_LEVEL = InputLevel("tess", "func.func of tess ops", _is_function_definition)
FUSED_LEVEL = InputLevel("linalg-on-tensors", "linalg.generic on tensors", _is_linalg_on_tensors)
TENSOR_LEVEL = InputLevel("tensor", "linalg.generic on tensors, tensor.empty", _is_on_tensors)
BUFFER_LEVEL = InputLevel("memref", "memref.alloc, linalg.generic on memrefs", _is_on_memrefs)
LINALG_LEVEL = InputLevel("linalg", "linalg.generic, kernel.group", _is_linalg_op)
LOOP_LEVEL = InputLevel("loop", "scf.for, scf.parallel", _is_loop)
KERNEL_LEVEL = InputLevel(
    "kernel-function", "func.func with tess.kernel, from tess-outline-kernels", _is_kernel_function
)

INPUT_LEVELS: dict[str, InputLevel] = {
    "tess-autodiff": FUNCTION_LEVEL,
    "tess-widen-narrow": TESS_LEVEL,
    "tess-to-linalg": TESS_LEVEL,
    "tess-fuse": FUSED_LEVEL,
    "tess-attention-views": FUSED_LEVEL,
    "tess-pack-narrow": FUSED_LEVEL,
    "tess-cse-generics": FUSED_LEVEL,
    "tess-fuse-epilogue": FUSED_LEVEL,
    "tess-fuse-horizontal": FUSED_LEVEL,
    "tess-bufferize": TENSOR_LEVEL,
    "tess-memory-plan": BUFFER_LEVEL,
    "tess-merge-aliased-outputs": BUFFER_LEVEL,
    "tess-outline-kernels": LINALG_LEVEL,
    "tess-linalg-to-loops": LINALG_LEVEL,
    "tess-tile": LOOP_LEVEL,
    "tess-tile-dot": LOOP_LEVEL,
    "tess-pack-matmul": LOOP_LEVEL,
    "tess-conv-tiles": LOOP_LEVEL,
    "tess-row-dots": LOOP_LEVEL,
    "tess-interchange-rows": LOOP_LEVEL,
    "tess-parallel-columns": LOOP_LEVEL,
    "tess-register-accumulate": LOOP_LEVEL,
    "tess-expand-math": LOOP_LEVEL,
    "tess-hoist-constants": LOOP_LEVEL,
    "tess-hoist-scratch": KERNEL_LEVEL,
    "tess-sink-aliasing-views": LOOP_LEVEL,
    "tess-gpu-fold-transposes": KERNEL_LEVEL,
    "tess-gpu-partition": KERNEL_LEVEL,
    "tess-gpu-rows": KERNEL_LEVEL,
    "tess-gpu-conv": KERNEL_LEVEL,
    "tess-gpu-contract": KERNEL_LEVEL,
    "tess-gpu-reduce": KERNEL_LEVEL,
    "tess-gpu-map": KERNEL_LEVEL,
}
"""The level each pass reads (a pass not listed is not checked)."""
