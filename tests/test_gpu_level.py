"""The gpu level (`cuda` pipeline, stage `gpu`): the contract of lowering/GPU_LEVEL.md holds
for programs of every kernel shape, and kernel counts are what the shapes promise."""

from __future__ import annotations

import pytest
from xdsl.dialects import func, gpu, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation

from tessc.compiler import lower_module, print_module
from tessc.context import make_context
from tessc.dialects.gpu_memory import is_workgroup
from tessc.frontend.tess_lang import parse_tess
from tessc.pipelines import get_pipeline

ALLOWED_KERNEL_OPS = ("arith.", "math.", "scf.for", "scf.if", "scf.yield", "gpu.")


def constant(value) -> int:
    owner = value.owner
    assert owner.name == "arith.constant", f"launch size {value} is not a constant"
    assert isinstance(owner.value, IntegerAttr)
    return owner.value.value.data


def under_thread_condition(op: Operation, kernel: gpu.FuncOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not kernel:
        if isinstance(parent, scf.IfOp):
            return True
        parent = parent.parent_op()
    return False


def check_gpu_level(module: ModuleOp) -> dict[str, gpu.FuncOp]:
    """Every rule of lowering/GPU_LEVEL.md that a walk can check; the kernels by name."""
    module.verify()
    assert "gpu.container_module" in module.attributes
    kernel_modules = [op for op in module.ops if isinstance(op, gpu.ModuleOp)]
    assert [m.sym_name.data for m in kernel_modules] == ["kernels"]
    kernels = {f.sym_name.data: f for f in kernel_modules[0].body.block.ops}
    for function in module.ops:
        if isinstance(function, func.FuncOp):
            assert "tess.kernel" not in function.attributes
            assert not any(isinstance(op, func.CallOp) for op in function.walk())
    launched: set[str] = set()
    for launch in module.walk():
        if not isinstance(launch, gpu.LaunchFuncOp):
            continue
        name = launch.kernel.nested_references.data[0].data
        assert launch.kernel.root_reference.data == "kernels"
        assert name not in launched, "each kernel is launched once"
        launched.add(name)
        kernel = kernels[name]
        assert kernel.kernel is not None
        grid = [constant(v) for v in (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ)]
        block = [constant(v) for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)]
        assert kernel.known_grid_size is not None and kernel.known_block_size is not None
        assert list(kernel.known_grid_size.get_values()) == grid
        assert list(kernel.known_block_size.get_values()) == block
        assert 1 <= block[0] * block[1] * block[2] <= 1024
        assert [o.type for o in launch.kernelOperands] == list(kernel.function_type.inputs)
    assert launched == set(kernels)
    for kernel in kernels.values():
        for op in kernel.body.walk():
            if op.name.startswith("memref."):
                assert op.name in ("memref.load", "memref.store", "memref.alloca"), op.name
                if isinstance(op, memref.AllocaOp):
                    assert is_workgroup(op.memref.type)
                    assert op.parent_op() is kernel
            else:
                assert op.name.startswith(ALLOWED_KERNEL_OPS), op.name
            if isinstance(op, gpu.BarrierOp):
                assert not under_thread_condition(op, kernel), "barrier under a condition"
    return kernels


def gpu_level(source: str) -> ModuleOp:
    module = parse_tess(source)
    lowered = lower_module(module, "gpu", pipeline="cuda")
    text = print_module(lowered)
    from xdsl.parser import Parser

    reparsed = Parser(make_context(), text).parse_module()
    assert print_module(reparsed) == text, "the gpu level prints and parses back alike"
    return lowered


def launches(module: ModuleOp, host: str) -> list[str]:
    function = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == host)
    return [
        op.kernel.nested_references.data[0].data
        for op in function.walk()
        if isinstance(op, gpu.LaunchFuncOp)
    ]


def test_pipeline_stages() -> None:
    cuda = get_pipeline("cuda")
    assert cuda.stages == ("tess", "fused", "buffers", "gpu", "numba")
    assert cuda.ir_stage == "gpu"
    assert "tess-gpu-map" in cuda.passes_to("gpu")
    assert get_pipeline("cpu").stages == ("tess", "fused", "buffers", "loops", "numba")
    with pytest.raises(ValueError, match="does not reach stage 'loops'"):
        cuda.passes_to("loops")


ELEMENTWISE = """
def chain(x: f32[33, 31], y: f32[31]) -> f32[33, 31]:
    return sigmoid(x * y) - 0.5 * x
"""


def test_elementwise_chain_is_one_grid_stride_kernel() -> None:
    module = gpu_level(ELEMENTWISE)
    kernels = check_gpu_level(module)
    assert launches(module, "chain") == ["chain_kernel_0"]
    (kernel,) = kernels.values()
    loops = [op for op in kernel.walk() if isinstance(op, scf.ForOp)]
    assert len(loops) == 1 and loops[0].step.owner.name == "arith.muli"  # grid-stride
    assert not any(isinstance(op, gpu.BarrierOp) for op in kernel.walk())
