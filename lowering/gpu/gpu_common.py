"""
What the gpu-level passes share (not a pass): building `gpu.func` bodies and launching them.

`tess-gpu-partition` leaves each kernel as a `tess.kernel` `func.func` marked with its shape
(`tess.gpu_shape`); `tess-gpu-contract`, `tess-gpu-reduce` and `tess-gpu-map` each turn the
kernels of their shape into `gpu.func`s of the module's one `gpu.module @kernels` and the
host's `func.call`s into `gpu.launch_func`s (lowering/gpu/README.md is the contract). This
module holds the pieces all three use:

- `Body`: appends ops to a block, with index arithmetic folded when static and the kernel's
  constants hoisted to its entry (`Constants`);
- `emit_element`/`store_element`: one iteration point of a linalg op on memrefs, its
  operands loaded through their indexing maps, its body cloned;
- `GpuKernel` and `launch_kernel`: a `gpu.func` over the buffers a kernel uses, and the
  launches (plus any device scratch buffers) that replace the host's call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.rewriter import Rewriter
from xdsl.transforms.lower_affine import affine_expr_ops
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.gpu_func import GpuFuncOp
from tessc.dialects.gpu_memory import WORKGROUP
from tessc.lowering.linalg.generic_analysis import is_reduction
from tessc.lowering.loops.index_values import constant_int

KERNELS_MODULE = "kernels"
"""The one `gpu.module` of a module at the gpu level."""
CONTAINER_ATTR = "gpu.container_module"


def constant_index(value: SSAValue) -> int | None:
    """The value of an index `arith.constant`, None for any other value."""
    return constant_int(value) if isinstance(value.type, IndexType) else None


# -- bodies -------------------------------------------------------------------------------


@dataclass
class Constants:
    """The kernel's constants, made once each and put at the top of its entry block."""

    ops: list[Operation] = field(default_factory=list[Operation])
    made: dict[tuple[object, Attribute], SSAValue] = field(
        default_factory=dict[tuple[object, Attribute], SSAValue]
    )

    def index(self, value: int) -> SSAValue:
        return self.get(IntegerAttr.from_index_int_value(value))

    def scalar(self, value: float | int, type: Attribute) -> SSAValue:
        if isinstance(type, AnyFloat):
            return self.get(FloatAttr(float(value), type))
        assert isinstance(type, IntegerType)
        return self.get(IntegerAttr(int(value), type))

    def get(self, attr: FloatAttr | IntegerAttr) -> SSAValue:
        key = (attr.value.data, attr.type)
        if key not in self.made:
            self.ops.append(constant := arith.ConstantOp(attr))
            self.made[key] = constant.result
        return self.made[key]

    def adopt(self, op: arith.ConstantOp, values: dict[SSAValue, SSAValue]) -> None:
        """Make `op` (a constant of the outlined kernel) available through `values`."""
        value = op.value
        if isinstance(value, FloatAttr | IntegerAttr):
            values[op.result] = self.get(value)
        else:
            self.ops.append(clone := op.clone())
            values[op.result] = clone.results[0]


@dataclass
class Body:
    """Appends ops to `block`; index arithmetic on constants folds."""

    block: Block
    constants: Constants

    def add_op(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def c(self, value: int) -> SSAValue:
        return self.constants.index(value)

    def _binary(
        self, kind: type[Operation], fold: Callable[[int, int], int], a: SSAValue, b: SSAValue
    ) -> SSAValue:
        x, y = constant_index(a), constant_index(b)
        if x is not None and y is not None:
            return self.c(fold(x, y))
        return self.add_op(kind(a, b)).results[0]

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if constant_index(a) == 0:
            return b
        if constant_index(b) == 0:
            return a
        return self._binary(arith.AddiOp, lambda x, y: x + y, a, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return a if constant_index(b) == 0 else self._binary(arith.SubiOp, lambda x, y: x - y, a, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if constant_index(a) == 1:
            return b
        if constant_index(b) == 1:
            return a
        return self._binary(arith.MuliOp, lambda x, y: x * y, a, b)

    def divui(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if constant_index(b) == 1:
            return a
        return self._binary(arith.DivUIOp, lambda x, y: x // y, a, b)

    def remui(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(arith.RemUIOp, lambda x, y: x % y, a, b)

    def minsi(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(arith.MinSIOp, min, a, b)

    def cmp(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.add_op(arith.CmpiOp(a, b, predicate)).results[0]

    def andi(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add_op(arith.AndIOp(a, b)).results[0]

    def hardware(self, kind: type[Operation], dim: str) -> SSAValue:
        enum = {"x": gpu.DimensionEnum.X, "y": gpu.DimensionEnum.Y, "z": gpu.DimensionEnum.Z}
        op = kind(gpu.DimensionAttr(enum[dim]))  # type: ignore[call-arg]
        return self.add_op(op).results[0]

    def thread_id(self, dim: str) -> SSAValue:
        return self.hardware(gpu.ThreadIdOp, dim)

    def block_id(self, dim: str) -> SSAValue:
        return self.hardware(gpu.BlockIdOp, dim)

    def block_dim(self, dim: str) -> SSAValue:
        return self.hardware(gpu.BlockDimOp, dim)

    def grid_dim(self, dim: str) -> SSAValue:
        return self.hardware(gpu.GridDimOp, dim)

    def barrier(self) -> None:
        self.add_op(gpu.BarrierOp())

    def load(self, memory: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        return self.add_op(memref.LoadOp.get(memory, indices)).results[0]

    def store(self, value: SSAValue, memory: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.add_op(memref.StoreOp.get(value, memory, indices))

    def loop(
        self,
        lb: SSAValue,
        ub: SSAValue,
        step: SSAValue,
        body: Callable[[Body, SSAValue, Sequence[SSAValue]], Sequence[SSAValue]],
        iter_args: Sequence[SSAValue] = (),
        hint: str = "i",
    ) -> Sequence[SSAValue]:
        """`scf.for` around what `body(inner, iv, carried)` emits; it returns the yield."""
        block = Block(arg_types=[IndexType(), *(v.type for v in iter_args)])
        block.args[0].name_hint = hint
        yielded = body(Body(block, self.constants), block.args[0], block.args[1:])
        block.add_op(scf.YieldOp(*yielded))
        return self.add_op(scf.ForOp(lb, ub, step, iter_args, block)).results

    def when(
        self,
        condition: SSAValue,
        then: Callable[[Body], Sequence[SSAValue]],
        otherwise: Callable[[Body], Sequence[SSAValue]] | None = None,
        types: Sequence[Attribute] = (),
    ) -> Sequence[SSAValue]:
        """`scf.if`, with an else branch when `otherwise` is given."""
        regions: list[Region] = []
        for branch in (then, otherwise):
            if branch is None:
                continue
            block = Block()
            block.add_op(scf.YieldOp(*branch(Body(block, self.constants))))
            regions.append(Region(block))
        return self.add_op(scf.IfOp(condition, types, *regions)).results

    def delinearize(self, linear: SSAValue, extents: Sequence[int]) -> list[SSAValue]:
        """Row-major indices of `linear` in a space of `extents` (the last fastest)."""
        indices: list[SSAValue] = []
        rest = linear
        for position in range(len(extents) - 1, -1, -1):
            extent = extents[position]
            if position == 0:
                indices.append(rest)
            elif extent == 1:
                indices.append(self.c(0))
            else:
                indices.append(self.remui(rest, self.c(extent)))
                rest = self.divui(rest, self.c(extent))
        return indices[::-1]


# -- linalg ops, one point at a time ----------------------------------------------------


def maps_of(op: LinalgStructuredOperation) -> list[AffineMap]:
    return [m.data for m in op.get_indexing_maps()]


def loop_ranges(op: LinalgStructuredOperation) -> tuple[int, ...]:
    return tuple(op.get_static_loop_ranges()) if op.get_iterator_types() else ()


def access_indices(b: Body, affine_map: AffineMap, induction: Sequence[SSAValue]) -> list[SSAValue]:
    """The memref indices `affine_map` gives at the induction variables."""
    values: list[SSAValue] = []
    for expr in affine_map.results:
        if isinstance(expr, AffineConstantExpr):
            values.append(b.c(expr.value))
        elif isinstance(expr, AffineDimExpr):
            values.append(induction[expr.position])
        else:
            ops, value = affine_expr_ops(expr, list(induction), [])
            for op in ops:
                b.add_op(op)
            values.append(value)
    return values


def emit_element(
    b: Body,
    op: LinalgStructuredOperation,
    induction: Sequence[SSAValue],
    values: dict[SSAValue, SSAValue],
    overrides: dict[int, SSAValue] | None = None,
    skip: Collection[Operation] = (),
) -> dict[SSAValue, SSAValue]:
    """`op`'s body at one iteration point: each used block argument loaded through its map
    (or taken from `overrides`, by operand index), the body's ops but `skip` cloned.
    `values` maps the outlined kernel's values to the gpu.func's; the result maps the body's
    values too."""
    mapping = dict(values)
    body = op.body.block
    for index, (arg, operand, affine_map) in enumerate(
        zip(body.args, op.operands, maps_of(op), strict=True)
    ):
        if overrides and index in overrides:
            mapping[arg] = overrides[index]
        elif arg.uses:
            new = mapping.get(operand, operand)
            if isinstance(operand.type, MemRefType):
                mapping[arg] = b.load(new, access_indices(b, affine_map, induction))
            else:
                mapping[arg] = new
    for inner in list(body.ops)[:-1]:
        if inner in skip:
            continue
        if isinstance(inner, IndexOp):
            mapping[inner.result] = induction[inner.dim.value.data]
        else:
            b.add_op(inner.clone(mapping))
    return mapping


def yielded(op: LinalgStructuredOperation, mapping: dict[SSAValue, SSAValue]) -> list[SSAValue]:
    terminator = op.body.block.last_op
    assert terminator is not None
    return [mapping.get(v, v) for v in terminator.operands]


def store_element(
    b: Body,
    op: LinalgStructuredOperation,
    results: Sequence[SSAValue],
    induction: Sequence[SSAValue],
    values: dict[SSAValue, SSAValue],
) -> None:
    """Store `results` into `op`'s outputs at the iteration point."""
    output_maps = maps_of(op)[len(op.inputs) :]
    for value, output, affine_map in zip(results, op.outputs, output_maps, strict=True):
        b.store(value, values.get(output, output), access_indices(b, affine_map, induction))


# -- kernels and launches ----------------------------------------------------------------


def kernels_module(module: ModuleOp) -> gpu.ModuleOp:
    """The module's `gpu.module @kernels`, made (last in the module) on first use."""
    for op in module.body.block.ops:
        if isinstance(op, gpu.ModuleOp) and op.sym_name.data == KERNELS_MODULE:
            return op
    module.attributes[CONTAINER_ATTR] = UnitAttr()
    kernels = gpu.ModuleOp(StringAttr(KERNELS_MODULE), Region(Block()))  # type: ignore[arg-type]
    module.body.block.add_op(kernels)
    return kernels


@dataclass(frozen=True)
class Scratch:
    """A device buffer the host allocates for a kernel (partials of a two-pass reduction)."""

    index: int


KernelArg = int | Scratch
"""An argument of a launch: the outlined kernel's argument at that position, or scratch."""


@dataclass
class GpuKernel:
    """A `gpu.func` being built from (part of) an outlined `tess.kernel` function.

    Its arguments are the outlined kernel's that `used` needs (in the kernel's order), then
    the scratch buffers in `scratch_types` it is given."""

    name: str
    source: func.FuncOp
    args: list[KernelArg]
    block: Block
    values: dict[SSAValue, SSAValue]
    constants: Constants = field(default_factory=Constants)

    @staticmethod
    def create(
        name: str,
        source: func.FuncOp,
        ops: Sequence[Operation],
        scratch: Sequence[tuple[int, MemRefType]] = (),
    ) -> GpuKernel:
        used: set[SSAValue] = set()
        for op in ops:
            for inner in op.walk():
                used.update(inner.operands)
        positions = [k for k, arg in enumerate(source.body.block.args) if arg in used]
        types = [source.body.block.args[k].type for k in positions]
        block = Block(arg_types=[*types, *(t for _, t in scratch)])
        values: dict[SSAValue, SSAValue] = {}
        for k, arg in zip(positions, block.args, strict=False):
            old = source.body.block.args[k]
            arg.name_hint = old.name_hint
            values[old] = arg
        kernel = GpuKernel(
            name, source, [*positions, *(Scratch(s) for s, _ in scratch)], block, values
        )
        for op in source.body.block.ops:
            if isinstance(op, arith.ConstantOp):
                kernel.constants.adopt(op, values)
        return kernel

    @property
    def scratch_args(self) -> list[SSAValue]:
        start = sum(1 for a in self.args if not isinstance(a, Scratch))
        return list(self.block.args[start : len(self.args)])

    def workgroup_buffer(
        self, element_type: Attribute, shape: Sequence[int], name: str
    ) -> SSAValue:
        """A new block-shared buffer: a workgroup attribution of the `gpu.func` (a trailing
        entry-block argument), what upstream MLIR and `to_cuda` read as shared memory."""
        typ = MemRefType(element_type, shape, memory_space=WORKGROUP)
        buffer = self.block.insert_arg(typ, len(self.block.args))
        buffer.name_hint = name
        return buffer

    def body(self) -> Body:
        return Body(self.block, self.constants)

    def finish(
        self,
        grid: tuple[int, int, int],
        threads: tuple[int, int, int],
        module: ModuleOp,
        grid_stride: bool = False,
    ) -> Launch:
        """Close the body, add the `gpu.func` to `@kernels`; the launch that runs it.
        Arguments the body does not use are dropped. `grid_stride`: blocks stride over the
        work along x, so grid x (here the most blocks with work) may be any smaller count:
        the kernel is marked `tess.grid_stride`, without `known_grid_size`."""
        for k in reversed(range(len(self.args))):
            if not self.block.args[k].uses:
                self.block.erase_arg(self.block.args[k])
                del self.args[k]
        for op in reversed(self.constants.ops):
            if self.block.first_op is None:
                self.block.add_op(op)
            else:
                self.block.insert_op_before(op, self.block.first_op)
        self.block.add_op(gpu.ReturnOp([]))
        function = GpuFuncOp(
            self.name,
            (self.block.arg_types[: len(self.args)], []),
            Region(self.block),
            kernel=True,
            known_block_size=threads,
            known_grid_size=None if grid_stride else grid,
            workgroup_attributions=len(self.block.args) - len(self.args),
        )
        if grid_stride:
            contract.GRID_STRIDE.set(function)
        if non_negative_indices(function):
            contract.UNSIGNED_INDICES.set(function)
        kernels_module(module).body.block.add_op(function)
        return Launch(self.name, grid, threads, tuple(self.args))


_HARDWARE_INDICES = (
    gpu.ThreadIdOp,
    gpu.BlockIdOp,
    gpu.BlockDimOp,
    gpu.GridDimOp,
    gpu.GlobalIdOp,
    gpu.LaneIdOp,
)
_NON_NEGATIVE_ARITHMETIC = (
    arith.AddiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.RemUIOp,
    arith.MinSIOp,
    arith.MinUIOp,
)


def non_negative_indices(function: Operation) -> bool:
    """Whether every `index` value of `function` is provably non-negative: thread and block
    ids, non-negative constants, sums, products, unsigned quotients and remainders and
    minimums of such, and `scf.for` induction variables from such a start by such a step.
    Anything else of type `index` (a subtraction, a cast from data, an index carried
    through a loop or out of an `scf.if`) refutes it. When it holds, `to_cuda` counts in uint64
    (`tess.unsigned_indices`): Numba then drops the negative-wraparound check of every
    access (a select and the array's extents kept live in 64-bit registers)."""
    proven: set[SSAValue] = set()
    for op in function.walk():
        if isinstance(op, scf.ForOp):
            if op.lb in proven and op.step in proven:
                proven.add(op.body.block.args[0])
        for value in op.results:
            if not isinstance(value.type, IndexType):
                continue
            if isinstance(op, _HARDWARE_INDICES):
                proven.add(value)
            elif isinstance(op, arith.ConstantOp):
                if (constant_int(value) or 0) >= 0:
                    proven.add(value)
            elif isinstance(op, _NON_NEGATIVE_ARITHMETIC) and all(
                operand in proven for operand in op.operands
            ):
                proven.add(value)
            else:
                return False
    for op in function.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if isinstance(arg.type, IndexType) and arg not in proven:
                        return False
    return True


@dataclass(frozen=True)
class Launch:
    name: str
    grid: tuple[int, int, int]
    threads: tuple[int, int, int]
    args: tuple[KernelArg, ...]


def launch_ops(
    call: func.CallOp, launches: Sequence[Launch], scratch: Sequence[MemRefType]
) -> list[Operation]:
    """What replaces `call`: scratch allocs, launches (sizes as index constants), deallocs."""
    new_ops: list[Operation] = []
    allocs = [memref.AllocOp.get(t.element_type, shape=t.get_shape()) for t in scratch]
    new_ops.extend(allocs)
    constants: dict[int, SSAValue] = {}
    for launch in launches:
        for size in (*launch.grid, *launch.threads):
            if size not in constants:
                new_ops.append(c := arith.ConstantOp(IntegerAttr.from_index_int_value(size)))
                constants[size] = c.result
        operands = [
            allocs[a.index].memref if isinstance(a, Scratch) else call.arguments[a]
            for a in launch.args
        ]
        new_ops.append(
            gpu.LaunchFuncOp(
                SymbolRefAttr(KERNELS_MODULE, [launch.name]),
                [constants[v] for v in launch.grid],
                [constants[v] for v in launch.threads],
                None,
                operands,
            )
        )
    new_ops.extend(memref.DeallocOp.get(a) for a in allocs)
    return new_ops


def launch_kernel(
    module: ModuleOp,
    source: func.FuncOp,
    launches: Sequence[Launch],
    scratch: Sequence[MemRefType] = (),
) -> None:
    """Replace every call of the outlined kernel `source` by `launches` (with `scratch`
    buffers allocated before the first and freed after the last), then erase `source`."""
    name = source.sym_name.data
    for call in [op for op in module.walk() if isinstance(op, func.CallOp)]:
        if call.callee.string_value() != name:
            continue
        if call.results:
            raise PassFailedException(f"kernel @{name} returns values: not a gpu kernel")
        Rewriter.replace_op(call, launch_ops(call, launches, scratch), [])
    Rewriter.erase_op(source)


def kernel_functions(module: ModuleOp, shape: str) -> list[func.FuncOp]:
    """The outlined kernels `tess-gpu-partition` marked with `shape`, in module order."""
    return [
        op
        for op in module.body.block.ops
        if isinstance(op, func.FuncOp)
        and contract.KERNEL.has(op)
        and contract.GPU_SHAPE.get(op) == shape
    ]


def linalg_ops(kernel: func.FuncOp) -> list[LinalgStructuredOperation]:
    return [op for op in kernel.body.block.ops if isinstance(op, LinalgStructuredOperation)]


MAX_GRID_X = 2**31 - 1
"""CUDA's limit on grid x. A grid-stride launch asks for every block with work, up to this;
the runtime launches as many as the device runs at once (`tessc.runtime.cuda_launch`)."""


def elementwise_threads(total: int) -> tuple[int, int]:
    """(block, grid) for a grid-stride loop over `total` elements: 256 threads at most
    (fewer, a multiple of 32, for small totals), a block per `block` elements."""
    threads = max(32, min(256, -(-total // 32) * 32))
    return threads, max(1, min(MAX_GRID_X, -(-total // threads)))


__all__ = [
    "KERNELS_MODULE",
    "MAX_GRID_X",
    "Body",
    "Constants",
    "GpuKernel",
    "Launch",
    "Scratch",
    "access_indices",
    "elementwise_threads",
    "emit_element",
    "is_reduction",
    "kernel_functions",
    "kernels_module",
    "launch_kernel",
    "linalg_ops",
    "loop_ranges",
    "maps_of",
    "store_element",
    "yielded",
]
