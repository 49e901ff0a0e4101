"""
One function of the generated Numba CUDA module (`codegen.to_cuda`): a kernel `gpu.func`
or a host `func.func`.

`CudaFunctionEmitter` extends the CPU's `numba_function.FunctionEmitter` (loops, branches,
and the arith, math and memref ops, with `CUDA_TEMPLATES` respelling the NumPy ufuncs
Numba's CUDA target lacks). In a kernel, thread and block ops are `cuda.threadIdx.x` ...,
`gpu.barrier` is `cuda.syncthreads()`, workgroup attributions and memrefs
`cuda.shared.array`, `memref.atomic_rmw` a `cuda.atomic` function (`ATOMIC_KINDS`), and a
loop from a thread or block id a `while` loop (in a member form, `codegen.cuda_members`,
run member by member). In a host, `gpu.launch_func` is `k[grid, block](...)` (grids from
`tessc.runtime.cuda_launch`: sized to the device for a `tess.grid_stride` kernel, and
counted), intermediates come from `device_buffer` (allocated once per program), copies
are device to device and windows into the workspace are kept in `buffers`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, NoneAttr, StringAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from tessc.dialects import contract
from tessc.lowering.codegen.cuda_members import MemberForm, member_loop_lines
from tessc.lowering.codegen.numba_function import FunctionEmitter
from tessc.lowering.codegen.numba_ops import EXPRESSIONS
from tessc.lowering.codegen.numba_source import UnsupportedOpError, dtype_name, memref_shape
from tessc.lowering.loops.index_values import constant_int
from tessc.runtime import abi

# Names the generated module defines (besides `to_numba`'s): no local may shadow them.
CUDA_MODULE_NAMES = frozenset(
    {
        *("cuda", "config", "device_buffer", abi.TARGET, "buffers", "SHARED_ALIGNMENT"),
        *("fixed_grid", "strided_grid", "copy_strided", "ctypes", "carray", "member_pointer"),
    }
)

WORKGROUP_SPACES = ("workgroup", "3")
PRIVATE_SPACES = ("private", "5")

# `memref.atomic_rmw`'s kind is MLIR's `arith::AtomicRMWKind` number (xDSL 0.74 keeps the
# integer): the kinds with a CUDA atomic, by number. Float max/min: how `cuda.atomic.max`
# treats a NaN operand is untested on hardware (the simulator uses Python's `max`).
ATOMIC_KINDS: dict[int, tuple[str, str]] = {
    0: ("addf", "add"), 1: ("addi", "add"), 2: ("assign", "exch"), 3: ("maximumf", "max"),
    4: ("maxs", "max"), 5: ("maxu", "max"), 6: ("minimumf", "min"), 7: ("mins", "min"),
    8: ("minu", "min"), 11: ("ori", "or_"), 12: ("andi", "and_"), 13: ("maxnumf", "max"),
    14: ("minnumf", "min"),
}  # fmt: skip

# The templates of `numba_ops` that Numba's CUDA target cannot compile as the CPU spells
# them (NumPy ufuncs without a CUDA kernel implementation: `np.exp`, `np.sqrt`, `np.floor`
# ...), found by lowering every template for the CUDA target (tests/test_cuda_lowering.py):
# `math` functions and builtins instead, which the simulator runs too. Python's floor,
# ceil, trunc and round return integers, so non-finite values and those already integral
# (|x| >= 2^mantissa) pass through unconverted.
_INTEGRAL = "({0} if not abs({0}) < {big} else {T}(%s({0})))"
CUDA_TEMPLATES: dict[str, str] = {
    **EXPRESSIONS,
    "arith.remf": "math.fmod({0}, {1})", "math.absf": "abs({0})",
    "math.cbrt": "math.copysign(math.pow(abs({0}), {one} / {T}(3)), {0})",
    "math.copysign": "math.copysign({0}, {1})", "math.exp": "math.exp({0})",
    "math.exp2": "math.exp2({0})", "math.expm1": "math.expm1({0})",
    "math.log1p": "math.log1p({0})", "math.powf": "math.pow({0}, {1})",
    "math.rsqrt": "{one} / math.sqrt({0})", "math.sqrt": "math.sqrt({0})",
    "math.ceil": _INTEGRAL % "math.ceil", "math.floor": _INTEGRAL % "math.floor",
    "math.trunc": _INTEGRAL % "math.trunc", "math.roundeven": _INTEGRAL % "round",
}  # fmt: skip

# The thread/block index ops: the CUDA special register, the stem of the local (`tx`).
_DIMENSION_OPS = {
    "gpu.thread_id": ("cuda.threadIdx", "t"),
    "gpu.block_id": ("cuda.blockIdx", "b"),
    "gpu.block_dim": ("cuda.blockDim", "bd"),
    "gpu.grid_dim": ("cuda.gridDim", "gd"),
}


def memory_space(typ: Attribute) -> str:
    """The memory space of a memref type as text: "" for the default (global) one."""
    assert isinstance(typ, MemRefType)
    space = typ.memory_space
    if isinstance(space, NoneAttr):
        return ""
    if isinstance(space, IntegerAttr):
        return str(int(space.value.data))
    if isinstance(space, StringAttr):
        return space.data
    return str(space)


def is_contiguous(typ: Attribute) -> bool:
    """Whether a memref type is laid out row-major without gaps (what `copy_to_device` needs)."""
    if not isinstance(typ, MemRefType) or isinstance(typ.layout, NoneAttr):
        return True
    shape = typ.get_shape()
    strides = typ.get_strides()
    if strides is None or any(d < 0 for d in shape):
        return False
    expected = 1
    for extent, stride in reversed(list(zip(shape, strides, strict=True))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _in_space(typ: Attribute, spaces: Sequence[str]) -> bool:
    text = memory_space(typ)
    return bool(text) and any(s == text or f"<{s}>" in text for s in spaces)


class CudaFunctionEmitter(FunctionEmitter):
    """The body of one host `func.func` or one `gpu.func`: the CPU emitter's loops,
    branches and data ops, plus the gpu ops (kernels) or launches and device buffers
    (hosts)."""

    def __init__(
        self,
        fn: func.FuncOp | gpu.FuncOp,
        function_names: dict[str, str],
        kernel_names: dict[tuple[str, str], str],
        grid_stride_kernels: frozenset[str] = frozenset(),
        members: MemberForm | None = None,
    ):
        super().__init__(fn, function_names, parallel=False)  # type: ignore[arg-type]
        self.kernel_names = kernel_names
        self.grid_stride_kernels = grid_stride_kernels
        self.members = members
        self.tables: dict[str, tuple[str, str]] = {}  # arena name -> (table name, dtype)
        self.on_device = isinstance(fn, gpu.FuncOp)
        self.names.taken |= CUDA_MODULE_NAMES | set(kernel_names.values())
        self.templates = CUDA_TEMPLATES
        self.buffer_count = 0
        self.uses_strided_copy = False
        # Non-negative indices (`tess.unsigned_indices`): counted in uint64, no wraparound.
        self.unsigned = self.on_device and contract.UNSIGNED_INDICES.has(fn)
        self.uses_shared = False

    def kernel_argument_names(self) -> list[str]:
        """The kernel's parameters: the entry block's arguments but workgroup attributions."""
        names: list[str] = []
        inputs = len(self.fn.function_type.inputs)
        for k, arg in enumerate(self.fn.body.block.args[:inputs]):
            name = self.names.hinted(arg.name_hint or f"arg{k}")
            self.exprs[arg] = name
            if self.members is not None and k in self.members.tabled:  # its member form's
                table = self.names.hinted(f"{name}_table")
                self.tables[name] = (table, dtype_name(arg.type.element_type))  # type: ignore[attr-defined]
                name = table
            names.append(name)
        return names

    def table_argument_names(self, num_outputs: int) -> list[str]:
        """A host member form's arguments: its tabled arenas are their tables."""
        names = self.argument_names(num_outputs)
        assert self.members is not None
        for h in self.members.tabled:
            names[h] = self.exprs[self.fn.body.block.args[h]] = self.names.hinted(
                f"{names[h]}_table"
            )
        return names

    def emit_workgroup_buffers(self) -> None:
        """`cuda.shared.array` for each workgroup attribution of the kernel (the entry
        block's arguments after the function's inputs)."""
        inputs = len(self.fn.function_type.inputs)
        for arg in self.fn.body.block.args[inputs:]:
            typ = arg.type
            if not isinstance(typ, MemRefType) or not _in_space(typ, WORKGROUP_SPACES):
                raise UnsupportedOpError(self.fn, f"a workgroup attribution of type {typ}")
            self.declare_array(self.fn, arg, typ, "shared")

    def emit_op(self, op: Operation) -> None:
        if (
            self.unsigned
            and isinstance(op, arith.ConstantOp)
            and isinstance(op.result.type, IndexType)
        ):
            # Named once, not `np.uint64(v)` at every use: each call is typed and lowered
            # by Numba, a third of a contraction kernel's statements.
            value = constant_int(op.result)
            name = self.names.hinted(f"u{value}")
            self.exprs[op.result] = name
            self.line(f"{name} = np.uint64({value})")
            return
        if self.on_device:
            if self.emit_device_op(op):
                return
        elif self.emit_host_op(op):
            return
        super().emit_op(op)

    # -- device side --------------------------------------------------------------------

    def emit_for(self, op: scf.ForOp) -> None:
        """In a kernel, a loop from a thread or block id (`range(tx, 1000, 256)`, a
        grid-stride loop) is a `while` loop: Numba's `range` computes a trip count (a
        64-bit division and selects) that LLVM hoists out of an enclosing loop and keeps
        live across it, two registers a value for each such inner loop (a row kernel's
        ten loops of one row took ~60 registers). Loops of constant bounds stay `range`s:
        LLVM unrolls those (a contraction's k steps)."""
        member_loop = self.members is not None and op in self.members.loops
        if not self.on_device or (
            constant_int(op.lb) is not None
            and constant_int(op.step) is not None
            and not member_loop
        ):
            super().emit_for(op)
            return
        block = op.body.block
        names = self.bind_carried(op)
        index = self.define(block.args[0], "i")
        ub = self.expr(op.ub)
        if member_loop:  # member by member
            member = self.names.numbered("member")
            lo, ub = self.names.numbered("lo"), self.names.numbered("hi")
            self.line(f"for {member} in range({self.members.count}):")
            self.indent += 1
            bounds = (self.members.bounds_name, lo, ub)
            start, step = self.expr(op.lb), self.expr(op.step)
            for line in member_loop_lines(index, start, step, member, bounds, self.tables):
                self.line(line)
        else:
            self.line(f"{index} = {self.expr(op.lb)}")
        self.line(f"while {index} < {ub}:")
        self.emit_body(block, names)
        self.indent += 1
        self.line(f"{index} += {self.expr(op.step)}")
        self.indent -= 1
        if member_loop:
            self.indent -= 1

    def emit_device_op(self, op: Operation) -> bool:
        if op.name in _DIMENSION_OPS:
            axis = op.properties["dimension"].data.value  # type: ignore[union-attr]
            special, stem = _DIMENSION_OPS[op.name]
            self.name_index(op.results[0], f"{stem}{axis}", f"{special}.{axis}")
        elif isinstance(op, gpu.GlobalIdOp):
            axis = op.dimension.data.value
            self.name_index(
                op.result,
                f"g{axis}",
                f"cuda.blockIdx.{axis} * cuda.blockDim.{axis} + cuda.threadIdx.{axis}",
            )
        elif isinstance(op, gpu.LaneIdOp):
            self.assign(op, "cuda.laneid")
        elif isinstance(op, gpu.BarrierOp):
            self.line("cuda.syncthreads()")
        elif isinstance(op, memref.AllocaOp | memref.AllocOp):
            self.emit_device_alloc(op)
        elif isinstance(op, memref.AtomicRMWOp):
            self.emit_atomic(op)
        elif isinstance(op, memref.DeallocOp):
            pass
        else:
            return False
        return True

    def name_index(self, value: SSAValue, stem: str, text: str) -> None:
        """`tx = cuda.threadIdx.x`: a thread/block index under its short CUDA name."""
        name = self.names.hinted(value.name_hint or stem)
        self.exprs[value] = name
        self.line(f"{name} = np.uint64({text})" if self.unsigned else f"{name} = {text}")

    def emit_device_alloc(self, op: memref.AllocaOp | memref.AllocOp) -> None:
        typ = op.memref.type
        assert isinstance(typ, MemRefType)
        shape = memref_shape(typ)
        if op.dynamic_sizes or any(d < 0 for d in shape):
            raise UnsupportedOpError(op, "a kernel's local or shared array needs a static shape")
        if _in_space(typ, WORKGROUP_SPACES):
            kind = "shared"
        elif _in_space(typ, PRIVATE_SPACES) or isinstance(op, memref.AllocaOp):
            kind = "local"
        else:
            raise UnsupportedOpError(op, "a kernel allocates workgroup or private memory only")
        self.declare_array(op, op.memref, typ, kind)

    def declare_array(self, op: Operation, value: SSAValue, typ: MemRefType, kind: str) -> None:
        """`name = cuda.<kind>.array(shape, dtype)` for `value` (`kind`: shared, local)."""
        shape = memref_shape(typ)
        if any(d < 0 for d in shape):
            raise UnsupportedOpError(op, "a kernel's local or shared array needs a static shape")
        dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
        dtype = dtype_name(typ.element_type)
        name = self.names.for_value(value, kind)
        self.exprs[value] = name
        # 16-byte aligned shared arrays: NVVM merges adjacent loads into `ld.shared.v4`.
        aligned = ", alignment=SHARED_ALIGNMENT" if kind == "shared" else ""
        self.uses_shared |= kind == "shared"
        self.line(f"{name} = cuda.{kind}.array(({dims}), dtype=np.{dtype}{aligned})")

    def emit_atomic(self, op: memref.AtomicRMWOp) -> None:
        kind = int(op.kind.value.data)
        if kind not in ATOMIC_KINDS:
            raise UnsupportedOpError(op, f"no CUDA atomic for atomic_rmw kind {kind}")
        indices = op.indices
        target = self.expr(op.memref)
        if not indices:
            # Numba's CUDA atomics take no 0-d array: its 1-element view, element 0.
            target, index = f"{target}.reshape(1)", "0"
        elif len(indices) == 1:
            index = self.expr(indices[0])
        else:
            index = "(" + ", ".join(self.expr(i) for i in indices) + ")"
        value = self.expr(op.value)
        self.assign(op, f"cuda.atomic.{ATOMIC_KINDS[kind][1]}({target}, {index}, {value})")

    # -- host side ----------------------------------------------------------------------

    def emit_host_op(self, op: Operation) -> bool:
        if isinstance(op, gpu.LaunchFuncOp):
            self.emit_launch(op)
        elif isinstance(op, memref.AllocOp | gpu.AllocOp):
            self.emit_host_alloc(op)
        elif isinstance(op, memref.ViewOp) and self.emit_workspace_view(op):
            pass
        elif isinstance(op, memref.CopyOp | gpu.MemcpyOp):
            self.emit_copy(op.source, op.destination)
        elif isinstance(op, memref.DeallocOp | gpu.DeallocOp | gpu.WaitOp):
            pass  # buffers live as long as the program; launches are synchronous
        elif isinstance(op, memref.LoadOp | memref.StoreOp | memref.AllocaOp):
            raise UnsupportedOpError(op, "the host cannot access device memory element-wise")
        else:
            return False
        return True

    def emit_host_alloc(self, op: memref.AllocOp | gpu.AllocOp) -> None:
        result = op.results[0]
        typ = result.type
        assert isinstance(typ, MemRefType)
        dynamic = op.dynamic_sizes if isinstance(op, memref.AllocOp) else op.dynamicSizes
        shape = self.shape_literal(memref_shape(typ), dynamic)
        name = self.define(result, "buf")
        key = f"{self.fn.sym_name.data}.{self.buffer_count}"
        self.buffer_count += 1
        dtype = dtype_name(typ.element_type)
        self.line(f'{name} = device_buffer(buffers, "{key}", {shape}, np.{dtype})')

    def emit_workspace_view(self, op: memref.ViewOp) -> bool:
        """A typed window into the workspace argument at a constant offset, made on the
        first call and kept in `buffers` (the workspace lives as long as they do): slicing
        a device array costs microseconds of Python on every call. False: not such a view."""
        if not isinstance(op.source, BlockArgument) or constant_int(op.byte_shift) is None:
            return False
        start = len(self.lines)
        self.emit_view(op)  # `view0 = workspace[a:b].view(...).reshape(...)`
        name, _, text = self.lines.pop().strip().partition(" = ")
        assert len(self.lines) == start
        key = f"{self.fn.sym_name.data}.{name}"
        self.line(f'{name} = buffers.get("{key}")')
        self.line(f"if {name} is None:")
        self.indent += 1
        self.line(f'{name} = buffers["{key}"] = {text}')
        self.indent -= 1
        return True

    def emit_copy(self, source: SSAValue, destination: SSAValue) -> None:
        typ = destination.type
        if isinstance(typ, MemRefType) and 0 in typ.get_shape():
            # Nothing to copy; and the views of an empty array may differ in strides, which
            # `copy_to_device` checks.
            return
        if not (is_contiguous(source.type) and is_contiguous(typ)):
            # `copy_to_device` copies one memory region: a strided view takes a kernel.
            self.uses_strided_copy = True
            self.line(f"copy_strided({self.expr(destination)}, {self.expr(source)})")
            return
        self.line(f"{self.expr(destination)}.copy_to_device({self.expr(source)})")

    def emit_launch(self, op: gpu.LaunchFuncOp) -> None:
        target = (op.kernel.root_reference.data, op.kernel.nested_references.data[-1].data)
        if len(op.kernel.nested_references.data) != 1 or target not in self.kernel_names:
            raise UnsupportedOpError(op, f"launch of {op.kernel}, which the module does not define")
        grid_sizes = (op.gridSizeX, op.gridSizeY, op.gridSizeZ)
        if any(constant_int(v) == 0 for v in grid_sizes):
            # A zero-size tensor: nothing to run, and CUDA refuses an empty grid.
            self.line(f"# {self.kernel_names[target]}: an empty grid, not launched")
            return
        name = self.kernel_names[target]
        grid = ", ".join(self.expr(v) for v in grid_sizes)
        block_sizes = (op.blockSizeX, op.blockSizeY, op.blockSizeZ)
        block = ", ".join(self.expr(v) for v in block_sizes)
        if name in self.grid_stride_kernels:
            sizes = [constant_int(v) for v in block_sizes]
            threads = (
                str(sizes[0] * sizes[1] * sizes[2])
                if None not in sizes
                else " * ".join(self.expr(v) for v in block_sizes)
            )
            config = f"strided_grid({grid}, {threads}), ({block})"
        else:
            config = f"fixed_grid({grid}), ({block})"
        if op.dynamicSharedMemorySize is not None:
            config += f", 0, {self.expr(op.dynamicSharedMemorySize)}"
        arguments = ", ".join(self.expr(a) for a in op.kernelOperands)
        if self.members is not None:  # a host member form launches kernels' member forms
            name = self.members.kernels.get(target, name)
        self.line(f"{name}[{config}]({arguments})")

    def emit_call(self, op: func.CallOp) -> None:
        if self.on_device:
            super().emit_call(op)
            return
        # Host to host: the callee's buffers live in the same program-wide dict.
        callee = op.callee.root_reference.data
        if callee not in self.function_names:
            raise UnsupportedOpError(op, f"call to @{callee}, which the module does not define")
        arguments = ", ".join([*(self.expr(a) for a in op.arguments), "buffers"])
        call = f"{self.function_names[callee]}({arguments})"
        if op.results:
            raise UnsupportedOpError(op, "a host function returns through out-params only")
        self.line(call)


__all__ = [
    "ATOMIC_KINDS",
    "CUDA_MODULE_NAMES",
    "CUDA_TEMPLATES",
    "CudaFunctionEmitter",
    "is_contiguous",
    "memory_space",
]
