"""
`gpu.func` as upstream MLIR defines it, and the `gpu` dialect tessc loads (xDSL's, with this
`gpu.func` and `#gpu.address_space`).

xDSL 0.74's `gpu.func` differs from upstream MLIR's in three ways that upstream `mlir-opt`
rejects or silently misreads:

- the kernel flag is a property `kernel`; MLIR's is the unit attribute `gpu.kernel`
  (without it, `gpu.launch_func` fails to verify: "kernel function is missing the
  'gpu.kernel' attribute");
- `known_block_size`/`known_grid_size` are attributes `gpu.known_*_size`; MLIR's are
  properties `known_block_size`/`known_grid_size` (it keeps the old names but ignores them);
- it has no workgroup attributions: its verifier rejects entry-block arguments beyond the
  function's inputs. Upstream, block-shared memory is declared that way
  (`gpu.func @k(...) workgroup(%tile: memref<32x32xf32, #gpu.address_space<workgroup>>)`,
  generic form: the attribute `workgroup_attributions = N` and N trailing entry-block
  arguments); a `memref.alloca` in workgroup memory would be per-thread stack memory.

`GpuFuncOp` is xDSL's op with MLIR's spelling of each. It subclasses xDSL's `FuncOp`, so
`isinstance(op, gpu.FuncOp)` holds, and replaces it in the `gpu` dialect of every tessc
context (`tessc.context`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import gpu
from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FunctionType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Region
from xdsl.irdl import (
    attr_def,
    irdl_op_definition,
    opt_attr_def,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.gpu_memory import AddressSpaceAttr, is_workgroup


@irdl_op_definition
class GpuFuncOp(gpu.FuncOp):
    """`gpu.func` with upstream MLIR's attributes and workgroup attributions (module
    docstring). The entry block's arguments are the function's inputs, then one memref in
    workgroup memory per workgroup attribution."""

    name = "gpu.func"

    body = region_def()
    sym_name = attr_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    kernel = opt_attr_def(UnitAttr, attr_name="gpu.kernel")  # type: ignore[assignment]
    known_block_size = opt_prop_def(DenseArrayBase.constr(i32))  # type: ignore[assignment]
    known_grid_size = opt_prop_def(DenseArrayBase.constr(i32))  # type: ignore[assignment]
    workgroup_attributions = opt_attr_def(IntegerAttr[I64])

    traits = traits_def(IsolatedFromAbove(), HasParent(gpu.ModuleOp), SymbolOpInterface())

    def __init__(
        self,
        name: str,
        function_type: FunctionType | tuple[Sequence[Attribute], Sequence[Attribute]],
        region: Region | type[Region.DEFAULT] = Region.DEFAULT,
        kernel: bool | None = None,
        known_block_size: Sequence[int] | None = None,
        known_grid_size: Sequence[int] | None = None,
        workgroup_attributions: int = 0,
    ):
        if isinstance(function_type, tuple):
            inputs, outputs = function_type
            function_type = FunctionType.from_lists(inputs, outputs)
        if not isinstance(region, Region):
            region = Region(Block(arg_types=function_type.inputs))
        attributes: dict[str, Attribute | None] = {"sym_name": StringAttr(name)}
        properties: dict[str, Attribute | None] = {"function_type": function_type}
        if known_block_size is not None:
            properties["known_block_size"] = DenseArrayBase.from_list(i32, known_block_size)
        if known_grid_size is not None:
            properties["known_grid_size"] = DenseArrayBase.from_list(i32, known_grid_size)
        if kernel:
            attributes["gpu.kernel"] = UnitAttr()
        if workgroup_attributions:
            attributes["workgroup_attributions"] = IntegerAttr(workgroup_attributions, i64)
        # IRDLOperation's constructor: xDSL's FuncOp.__init__ spells the attributes its way.
        super(gpu.FuncOp, self).__init__(
            properties=properties, attributes=attributes, regions=[region]
        )

    @property
    def workgroup_count(self) -> int:
        """The number of workgroup attributions."""
        attr = self.workgroup_attributions
        return 0 if attr is None else attr.value.data

    @property
    def arguments(self) -> Sequence[BlockArgument]:
        """The entry block's arguments that are the function's inputs."""
        return self.body.block.args[: len(self.function_type.inputs)]

    @property
    def workgroup_buffers(self) -> Sequence[BlockArgument]:
        """The entry block's arguments that are workgroup attributions."""
        return self.body.block.args[len(self.function_type.inputs) :]

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        arg_types = self.body.block.arg_types
        count = self.workgroup_count
        if count < 0 or len(arg_types) != len(inputs) + count:
            raise VerifyException(
                f"expected {len(inputs)} function arguments and {count} workgroup "
                f"attributions as entry block arguments, got {len(arg_types)}"
            )
        if tuple(arg_types[: len(inputs)]) != tuple(inputs):
            raise VerifyException(
                "Expected first entry block arguments to have the same types as the "
                "function input types"
            )
        for typ in arg_types[len(inputs) :]:
            if not (isinstance(typ, MemRefType) and is_workgroup(typ)):
                raise VerifyException(
                    f"a workgroup attribution must be a memref in "
                    f"#gpu.address_space<workgroup>, got {typ}"
                )
        if self.kernel is not None and self.function_type.outputs.data:
            raise VerifyException("Expected void return type for kernel function")


GPU = Dialect(
    "gpu",
    [GpuFuncOp if op is gpu.FuncOp else op for op in gpu.GPU.operations],
    [*gpu.GPU.attributes, AddressSpaceAttr],
)
"""xDSL's `gpu` dialect with upstream's `gpu.func` (`GpuFuncOp`) and `#gpu.address_space`."""


__all__ = ["GPU", "GpuFuncOp"]
