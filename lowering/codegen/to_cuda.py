"""
Codegen: gpu-level IR (level 5g) -> the Python source of one Numba CUDA module (level 6).

The input is the gpu level's contract (lowering/gpu/README.md). `emit_cuda` names the
kernels and hosts and emits each (`codegen.cuda_function`): every kernel `gpu.func` a
`@cuda.jit(cache=True)` function, every host a plain Python function launching
`k[grid, block](...)` on device arrays, its intermediates allocated once per program
(`device_buffer`), and a host's member form where it has one (`codegen.cuda_members`).
Around them it writes the module: its imports, helpers, `TESSC_SIGNATURES` (the CPU one)
and `TESSC_TARGET = "cuda"`, which selects `tessc.runtime.cuda`. The launch configuration
is the gpu level's; the op-by-op mapping is in lowering/codegen/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func, gpu
from xdsl.dialects.builtin import ModuleOp

from tessc.dialects import contract
from tessc.lowering.codegen.cuda_function import (
    CUDA_MODULE_NAMES,
    CUDA_TEMPLATES,
    CudaFunctionEmitter,
)
from tessc.lowering.codegen.cuda_members import (
    SIMULATOR_MEMBER_POINTER,
    MemberForm,
    cuda_member_plan,
)
from tessc.lowering.codegen.numba_function import python_function_names, signature_entry
from tessc.lowering.codegen.numba_members import MEMBER_POINTER_INTRINSIC, bounds_definition
from tessc.lowering.codegen.numba_source import (
    BITCAST_INTRINSIC,
    NARROW_FLOAT_HELPERS,
    RESERVED_NAMES,
    UnsupportedOpError,
    python_identifier,
)
from tessc.runtime import abi

DEVICE_BUFFER_HELPER = '''
def device_buffer(buffers, key, shape, dtype):
    """The device array `key` of this program: allocated on first use, then reused."""
    array = buffers.get(key)
    if array is None or tuple(array.shape) != shape:
        array = buffers[key] = cuda.device_array(shape, dtype=dtype)
    return array
'''.strip()

# The simulator rejects any `alignment` of a shared array.
SHARED_ALIGNMENT_DEFINITION = "SHARED_ALIGNMENT = None if config.ENABLE_CUDASIM else 16"

# The simulator runs kernels as Python, where an LLVM intrinsic cannot run.
SIMULATOR_BITCAST = """
if config.ENABLE_CUDASIM:

    def bitcast(value, target):  # noqa: F811 - the simulator's stand-in
        return np.array(value).view(target)[()]
""".strip()


def emit_cuda(module: ModuleOp) -> str:
    """The Python source of a Numba CUDA module for the gpu-level `module`.

    Raises (through `op.emit_error`, like a verifier) `UnsupportedOpError` naming the first
    op without a CUDA translation.
    """
    try:
        return _emit_module(module)
    except UnsupportedOpError as error:
        error.op.emit_error(str(error), error)


def is_gpu_level(module: ModuleOp) -> bool:
    """Whether `module` holds a `gpu.module`: the gpu level, for `emit_cuda`."""
    return any(isinstance(op, gpu.ModuleOp) for op in module.ops)


def _kernel_names(
    kernels: Sequence[tuple[str, gpu.FuncOp]], host_names: set[str]
) -> dict[tuple[str, str], str]:
    """The Python name of each (gpu.module, gpu.func): unique, shadowing nothing."""
    taken = set(RESERVED_NAMES) | CUDA_MODULE_NAMES | host_names
    names: dict[tuple[str, str], str] = {}
    for module_name, kernel in kernels:
        name = python_identifier(kernel.sym_name.data)
        while name in taken:
            name += "_"
        taken.add(name)
        names[(module_name, kernel.sym_name.data)] = name
    return names


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def kernel_python_names(module: ModuleOp) -> dict[str, str]:
    """Each `gpu.func`'s name in `emit_cuda(module)`'s source, by its symbol name."""
    hosts = [op for op in module.ops if isinstance(op, func.FuncOp)]
    kernels = [
        (op.sym_name.data, inner)
        for op in module.ops
        if isinstance(op, gpu.ModuleOp)
        for inner in op.body.block.ops
        if isinstance(inner, gpu.FuncOp)
    ]
    names = _kernel_names(kernels, set(python_function_names(hosts).values()))
    return {fn: name for (_, fn), name in names.items()}


def _emit_module(module: ModuleOp) -> str:
    hosts: list[func.FuncOp] = []
    kernels: list[tuple[str, gpu.FuncOp]] = []
    for op in module.ops:
        if isinstance(op, func.FuncOp):
            if not op.body.blocks:
                raise UnsupportedOpError(op, f"@{op.sym_name.data} is a declaration without body")
            hosts.append(op)
        elif isinstance(op, gpu.ModuleOp):
            for inner in op.body.block.ops:
                if not isinstance(inner, gpu.FuncOp):
                    raise UnsupportedOpError(inner, "only gpu.func is supported in a gpu.module")
                kernels.append((op.sym_name.data, inner))
        else:
            raise UnsupportedOpError(op, "only func.func and gpu.module at module level")
        if isinstance(op, func.FuncOp) and len(op.body.blocks) > 1:
            raise UnsupportedOpError(op, f"@{op.sym_name.data} has more than one block")

    host_names = python_function_names(hosts)
    kernel_names = _kernel_names(kernels, set(host_names.values()))
    # A device function is called by its bare name from its module's kernels.
    device_names = {fn: name for (_, fn), name in kernel_names.items()}

    bodies: list[str] = []
    signatures: list[str] = []
    uses_math = uses_bitcast = uses_strided_copy = uses_narrow_floats = uses_shared = False
    for module_name, kernel in kernels:
        if len(kernel.body.blocks) != 1:
            raise UnsupportedOpError(kernel, f"@{kernel.sym_name.data} has more than one block")
        emitter = CudaFunctionEmitter(kernel, device_names, kernel_names)
        arg_names = emitter.kernel_argument_names()
        emitter.indent = 1
        emitter.emit_workgroup_buffers()
        emitter.indent = 0
        emitter.emit_body(kernel.body.block)
        returned = kernel.body.block.last_op
        if isinstance(returned, gpu.ReturnOp) and returned.operands:  # a device function's
            emitter.indent = 1
            emitter.line(f"return {', '.join(emitter.expr(v) for v in returned.operands)}")
        uses_math |= emitter.uses_math
        uses_bitcast |= emitter.uses_bitcast
        uses_narrow_floats |= emitter.uses_narrow_floats
        uses_shared |= emitter.uses_shared
        decorator = (
            "@cuda.jit(cache=True)" if kernel.kernel is not None else "@cuda.jit(device=True)"
        )
        pyname = kernel_names[(module_name, kernel.sym_name.data)]
        bodies.append(
            "\n".join([f"{decorator}\ndef {pyname}({', '.join(arg_names)}):", *emitter.lines])
        )

    grid_stride_kernels = frozenset(
        kernel_names[(module_name, kernel.sym_name.data)]
        for module_name, kernel in kernels
        if contract.GRID_STRIDE.has(kernel)
    )
    by_key = {(module_name, kernel.sym_name.data): kernel for module_name, kernel in kernels}
    taken = {*RESERVED_NAMES, *CUDA_MODULE_NAMES, *host_names.values(), *kernel_names.values()}
    uses_members = False
    for fn in hosts:
        pyname = host_names[fn.sym_name.data]
        num_outputs = contract.NUM_OUTPUTS.get(fn) or 0
        # Its member form (`codegen.cuda_members`): kernels reading tabled arenas' members.
        plan = cuda_member_plan(fn, by_key)
        member_form = None
        if plan is not None:
            uses_members = True
            bounds_name = _fresh(f"MEMBER_BOUNDS_{pyname}", taken)
            bodies.append(bounds_definition(bounds_name, plan.bounds))
            member_kernels: dict[tuple[str, str], str] = {}
            for key, positions in plan.kernels.items():
                name = member_kernels[key] = _fresh(f"{kernel_names[key]}_members", taken)
                form = MemberForm(positions, plan.loops, bounds_name, len(plan.bounds) - 1)
                kernel_emitter = CudaFunctionEmitter(
                    by_key[key], device_names, kernel_names, members=form
                )
                names = kernel_emitter.kernel_argument_names()
                kernel_emitter.indent = 1
                kernel_emitter.emit_workgroup_buffers()
                kernel_emitter.indent = 0
                kernel_emitter.emit_body(by_key[key].body.block)
                uses_narrow_floats |= kernel_emitter.uses_narrow_floats
                uses_math |= kernel_emitter.uses_math
                uses_bitcast |= kernel_emitter.uses_bitcast
                uses_shared |= kernel_emitter.uses_shared
                header = f"@cuda.jit(cache=True)\ndef {name}({', '.join(names)}):"
                bodies.append("\n".join([header, *kernel_emitter.lines]))
            member_name = _fresh(f"{pyname}_members", taken)
            form = MemberForm(plan.tabled, kernels=member_kernels)
            host = CudaFunctionEmitter(fn, host_names, kernel_names, grid_stride_kernels, form)
            names = host.table_argument_names(num_outputs)
            host.indent = 0
            host.emit_body(fn.body.block)
            member_form = (member_name, plan.tabled)
            header = f"def {member_name}({', '.join([*names, 'buffers'])}):"
            member_body = "\n".join([header, *host.lines])
        emitter = CudaFunctionEmitter(fn, host_names, kernel_names, grid_stride_kernels)
        arg_names = emitter.argument_names(num_outputs)
        emitter.indent = 0
        emitter.emit_body(fn.body.block)
        uses_math |= emitter.uses_math
        uses_bitcast |= emitter.uses_bitcast
        uses_strided_copy |= emitter.uses_strided_copy
        entry = signature_entry(fn, pyname, arg_names, member_form)
        if entry is not None:
            signatures.append(entry)
        header = f"def {pyname}({', '.join([*arg_names, 'buffers'])}):"
        bodies.append("\n".join([header, *emitter.lines]))
        if member_form is not None:
            bodies.append(member_body)

    imports = ["import ctypes"] if uses_members else []
    imports += ["import math"] if uses_math else []
    imports += [""] if imports else []
    imports += ["import numpy as np", "from numba import cuda"]
    if uses_bitcast or uses_members:
        imports[-1:] = [
            "from numba import config, cuda, types",
            "from numba.extending import intrinsic",
        ]
    elif uses_shared:
        imports[-1:] = ["from numba import config, cuda"]
    if uses_members:  # (the carray numba-cuda's kernels type: not `numba.carray`)
        imports.append("from numba.cuda.np.numpy_support import carray")
    imports.append("from tessc.runtime.cuda_launch import fixed_grid, strided_grid")
    if uses_strided_copy:
        imports.append("from tessc.runtime.cuda_memory import copy_strided")
    signature_text = "{\n" + "\n".join(signatures) + "\n}" if signatures else "{}"
    prologue = [
        "# Generated by tessc (tessc.lowering.codegen.to_cuda) from gpu-level IR. Do not edit.",
        *imports,
        "",
        f'{abi.TARGET} = "{abi.CUDA_TARGET}"',
        "",
        f"{abi.SIGNATURES} = {signature_text}",
    ]
    helpers = [DEVICE_BUFFER_HELPER]
    if uses_shared:
        helpers.append(SHARED_ALIGNMENT_DEFINITION)
    if uses_bitcast:
        helpers += [BITCAST_INTRINSIC, SIMULATOR_BITCAST]
    if uses_members:
        helpers += [MEMBER_POINTER_INTRINSIC, SIMULATOR_MEMBER_POINTER]
    if uses_narrow_floats:
        helpers.append(NARROW_FLOAT_HELPERS.format(decorator="@cuda.jit(device=True)"))
    return "\n\n\n".join(["\n".join(prologue), *helpers, *bodies]) + "\n"


# CUDA_TEMPLATES is `codegen.cuda_function`'s, importable here too (tests import it from here).
__all__ = ["CUDA_TEMPLATES", "emit_cuda", "is_gpu_level", "kernel_python_names"]
