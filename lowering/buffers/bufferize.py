"""
`tess-bufferize`: tensors to memrefs in destination-passing style (level 3 -> level 4).

Tensor arguments become memrefs, tensor results trailing out-params
(`tess.num_outputs`); each `tensor.empty` becomes a `memref.alloc` at its use, each generic
writes its `outs` buffer in place when nobody else reads it (else into a copy), tensor
views become memref views, and the final producer of a result writes straight into its
out-param. `kernel.group`s keep their members, with every buffer they need allocated before
the group. Buffers are never freed: reuse is `tess-memory-plan`'s job. Per-op rules are in
lowering/buffers/README.md. xDSL has no one-shot bufferization, so this pass bufferizes
exactly what `tess-to-linalg` and the fusion passes produce, and fails on anything else
with a message naming the op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NoReturn

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref, tensor
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    MemRefType,
    ModuleOp,
    StridedLayoutAttr,
    TensorType,
)
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.dynamic_dims import dynamic_sizes, entry_dynamic_size
from tessc.dialects.kernel import GroupOp, yielded_value
from tessc.dialects.locations import inherit_location

BufferSite = tuple[Operation, int]
"""Where a buffer is created: (generic or call, output index)."""


def memref_type_for(typ: TensorType) -> MemRefType:
    return MemRefType(typ.element_type, typ.get_shape())


def convert_type(typ: Attribute) -> Attribute:
    return memref_type_for(typ) if isinstance(typ, TensorType) else typ


def converted_signature(function_type: FunctionType) -> tuple[list[Attribute], list[Attribute]]:
    """(argument types, result types) of a function after bufferization."""
    inputs = [convert_type(t) for t in function_type.inputs.data]
    outs = [memref_type_for(t) for t in function_type.outputs.data if isinstance(t, TensorType)]
    results = [t for t in function_type.outputs.data if not isinstance(t, TensorType)]
    return [*inputs, *outs], results


def view_type(typ: Attribute, source: SSAValue) -> Attribute:
    """The type of a reshaped view of `source`: contiguous row-major, at `source`'s offset
    when `source` is a slice (a `strided` layout with an offset, from `tensor.extract_slice`).

    As MLIR's `memref.expand_shape`/`collapse_shape` verifiers compute it: a view at offset
    0 has the identity layout (`memref<4x3xf32>`, not `memref<4x3xf32, strided<[3, 1]>>`)."""
    layout = source.type.layout if isinstance(source.type, MemRefType) else None
    if not isinstance(typ, TensorType) or not isinstance(layout, StridedLayoutAttr):
        return convert_type(typ)
    offset = layout.get_offset()
    if offset == 0:
        return convert_type(typ)
    shape = typ.get_shape()
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    return MemRefType(typ.element_type, shape, StridedLayoutAttr(strides, offset or 0))


def fail_at(op: Operation, message: str) -> NoReturn:
    """The pass's error, located at `op` (tessc-opt prints the op's source line)."""
    op.emit_error(message, PassFailedException(message))


def has_tensors(op: Operation) -> bool:
    return any(isinstance(v.type, TensorType) for v in (*op.operands, *op.results))


def is_empty_tensor(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, tensor.EmptyOp)


def writable_in_place(value: SSAValue) -> bool:
    """A tensor whose buffer the op using it as `outs` may overwrite: a fresh buffer made in
    this function (by a generic, a call or a group) that nothing else reads."""
    return (
        isinstance(value, OpResult)
        and isinstance(value.op, GenericOp | func.CallOp | GroupOp)
        and value.has_one_use()
    )


def buffer_site(value: SSAValue) -> BufferSite | None:
    """The op that creates the buffer `value` ends up in, if this function creates it."""
    while isinstance(value, OpResult):
        op = value.op
        if isinstance(op, func.CallOp):
            return (op, value.index)
        if isinstance(op, GroupOp):
            value = yielded_value(value)
            continue
        if not isinstance(op, GenericOp):
            return None
        init = op.outputs[value.index]
        if is_empty_tensor(init) or not writable_in_place(init):
            return (op, value.index)
        value = init
    return None


@dataclass
class FunctionBufferizer:
    """Bufferizes one function body; see the module docstring for the rules."""

    function: func.FuncOp
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    out_params: list[BlockArgument] = field(default_factory=list)
    destinations: dict[BufferSite, SSAValue] = field(default_factory=dict)
    """Buffer sites whose buffer is an out-param rather than a fresh alloc."""
    replaced: list[Operation] = field(default_factory=list)
    dynamic_size: SSAValue | None = None
    """N, the size of every `?` dim (`dialects/dynamic_dims.py`), read at entry."""

    def alloc(self, builder: Builder, typ: TensorType) -> SSAValue:
        buffer_type = memref_type_for(typ)
        sizes = dynamic_sizes(buffer_type, self.dynamic_size)
        return builder.insert(memref.AllocOp(sizes, [], buffer_type)).memref

    def run(self) -> None:
        if len(self.function.body.blocks) != 1:
            raise PassFailedException(
                f"tess-bufferize expects single-block functions, @{self.function.sym_name.data} "
                "has several"
            )
        block = self.function.body.block
        old_args = list(block.args)
        for arg in old_args:
            new_arg = block.insert_arg(convert_type(arg.type), len(block.args))
            new_arg.name_hint = arg.name_hint
            self.buffers[arg] = new_arg
        for typ in self.function.function_type.outputs.data:
            if isinstance(typ, TensorType):
                out = block.insert_arg(memref_type_for(typ), len(block.args))
                out.name_hint = f"out{len(self.out_params)}"
                self.out_params.append(out)
        self.dynamic_size = entry_dynamic_size(block, block.args[len(old_args) :])

        self.plan_destinations(block)
        for op in list(block.ops):
            if self.bufferize(op):
                self.replaced.append(op)
        # In reverse, so that each op's users are gone before it is.
        for op in reversed(self.replaced):
            op.detach()
            op.erase()
        for arg in old_args:
            block.erase_arg(arg)
        self.update_signature()

    def plan_destinations(self, block: Block) -> None:
        """Let the op that creates each result's buffer create it in the out-param."""
        return_op = block.last_op
        if not isinstance(return_op, func.ReturnOp):
            return
        tensor_results = [v for v in return_op.operands if isinstance(v.type, TensorType)]
        for value, out in zip(tensor_results, self.out_params, strict=True):
            site = buffer_site(value)
            if site is not None and site not in self.destinations:
                self.destinations[site] = out

    def buffer(self, value: SSAValue) -> SSAValue:
        if value in self.buffers:
            return self.buffers[value]
        # Values are bufferized in program order, so a verified (dominance-respecting)
        # input always has one: this is an invariant, not a user error (an ICE report).
        raise AssertionError(f"tess-bufferize: no buffer for {value} of type {value.type}")

    def new_buffer(self, builder: Builder, site: BufferSite, typ: TensorType) -> SSAValue:
        if site in self.destinations:
            return self.destinations[site]
        return self.alloc(builder, typ)

    def read_buffer(self, builder: Builder, value: SSAValue) -> SSAValue:
        """The buffer an op reads `value` from (a non-tensor value is itself)."""
        if not isinstance(value.type, TensorType):
            return value
        if is_empty_tensor(value):
            # Reading an empty tensor reads undefined values; any buffer will do.
            assert isinstance(value.type, TensorType)
            return self.alloc(builder, value.type)
        return self.buffer(value)

    def bufferize(self, op: Operation) -> bool:
        """Insert the buffer form of `op` before it; True if `op` is to be erased."""
        builder = inherit_location(Builder(InsertPoint.before(op)), op)
        if isinstance(op, tensor.EmptyOp):
            return True  # each use allocates its own buffer
        if isinstance(op, GenericOp):
            if not op.res:
                return False  # already on memrefs
            self.bufferize_generic(builder, op)
        elif isinstance(op, tensor.CollapseShapeOp):
            view = memref.CollapseShapeOp(
                operands=[self.buffer(op.src)],
                result_types=[view_type(op.result.type, self.buffer(op.src))],
                properties={"reassociation": op.reassociation},
            )
            self.buffers[op.result] = builder.insert(view).result
        elif isinstance(op, tensor.ExtractSliceOp):
            self.buffers[op.result] = builder.insert(self.subview(op)).result
        elif isinstance(op, tensor.ExpandShapeOp):
            if op.dynamic_output_shape:
                fail_at(op, "tess-bufferize supports static shapes only")
            view = memref.ExpandShapeOp(
                operands=[self.buffer(op.src), []],
                result_types=[view_type(op.result.type, self.buffer(op.src))],
                properties={
                    "reassociation": op.reassociation,
                    "static_output_shape": op.static_output_shape,
                },
            )
            self.buffers[op.result] = builder.insert(view).result
        elif isinstance(op, func.CallOp):
            if not has_tensors(op):
                return False
            self.bufferize_call(builder, op)
        elif isinstance(op, func.ReturnOp):
            self.bufferize_return(builder, op)
        elif isinstance(op, GroupOp):
            if not any(has_tensors(o) for o in op.walk()):
                return False  # already on memrefs
            self.bufferize_group(builder, op)
        elif has_tensors(op) or any(
            isinstance(v.type, TensorType) for r in op.regions for b in r.blocks for v in b.args
        ):
            fail_at(op, f"tess-bufferize cannot bufferize '{op.name}'")
        else:
            return False
        return True

    def subview(self, op: tensor.ExtractSliceOp) -> memref.SubviewOp:
        """`memref.subview` of the source's buffer (static offsets, sizes, strides)."""
        if op.offsets or op.sizes or op.strides:
            fail_at(op, "tess-bufferize supports static slices only")
        source = self.buffer(op.source)
        assert isinstance(source.type, MemRefType)
        return memref.SubviewOp.from_static_parameters(
            source,
            source.type,
            op.static_offsets.get_values(),
            op.static_sizes.get_values(),
            op.static_strides.get_values(),
        )

    def bufferize_generic(
        self, builder: Builder, op: GenericOp, allocs: Builder | None = None
    ) -> None:
        """The generic on memrefs at `builder`; new buffers (and copies into them) at
        `allocs` (default: `builder`)."""
        allocs = allocs or builder
        inputs = [self.read_buffer(allocs, v) for v in op.inputs]
        outputs: list[SSAValue] = []
        for index, init in enumerate(op.outputs):
            assert isinstance(init.type, TensorType)
            if is_empty_tensor(init):
                buffer = self.new_buffer(allocs, (op, index), init.type)
            elif writable_in_place(init):
                buffer = self.buffer(init)
            else:
                if allocs is not builder and init.owner.parent_op() is op.parent_op():
                    raise PassFailedException(
                        f"tess-bufferize: a kernel.group member writes into a copy of "
                        f"{init}, which another op reads too; the copy would have to be "
                        "made inside the kernel"
                    )
                buffer = self.new_buffer(allocs, (op, index), init.type)
                allocs.insert(memref.CopyOp(self.buffer(init), buffer))
            outputs.append(buffer)
        generic = GenericOp(
            inputs,
            outputs,
            Rewriter.move_region_contents_to_new_regions(op.body),
            op.indexing_maps,
            op.iterator_types,
            (),
            op.doc,
            op.library_call,
        )
        generic.attributes.update(op.attributes)
        builder.insert(generic)
        self.bufferize_reads(generic)
        for result, buffer in zip(op.res, outputs, strict=True):
            self.buffers[result] = buffer

    def bufferize_reads(self, generic: GenericOp) -> None:
        """Each `tensor.extract` of a captured tensor in the body (a gather) becomes a
        `memref.load` of that tensor's buffer."""
        for nested in list(generic.body.walk()):
            if isinstance(nested, tensor.ExtractOp):
                load = memref.LoadOp.get(self.buffer(nested.tensor), nested.indices)
                Rewriter.replace_op(nested, load)

    def bufferize_group(self, builder: Builder, group: GroupOp) -> None:
        """The group on memrefs before `group`, its buffers allocated before it."""
        bufferized = builder.insert(GroupOp([], []))
        bufferized.attributes.update(group.attributes)
        allocs = Builder(InsertPoint.before(bufferized))
        inside = Builder(InsertPoint.before(bufferized.yield_op))
        for op in group.members():
            if isinstance(op, tensor.EmptyOp):
                continue  # each use allocates its own buffer
            if isinstance(op, GenericOp) and op.res:
                self.bufferize_generic(inside, op, allocs=allocs)
            elif isinstance(op, arith.ConstantOp) and not has_tensors(op):
                op.detach()
                inside.insert(op)
            else:
                fail_at(op, f"tess-bufferize cannot bufferize '{op.name}' inside a kernel.group")
        for result, value in zip(group.res, group.yield_op.operands, strict=True):
            self.buffers[result] = self.read_buffer(allocs, value)

    def bufferize_call(self, builder: Builder, op: func.CallOp) -> None:
        arguments = [self.read_buffer(builder, v) for v in op.arguments]
        outs: list[SSAValue] = []
        for index, result in enumerate(op.res):
            if isinstance(result.type, TensorType):
                buffer = self.new_buffer(builder, (op, index), result.type)
                self.buffers[result] = buffer
                outs.append(buffer)
        kept = [r for r in op.res if not isinstance(r.type, TensorType)]
        call = builder.insert(func.CallOp(op.callee, [*arguments, *outs], [r.type for r in kept]))
        call.attributes.update(op.attributes)
        for old, new in zip(kept, call.res, strict=True):
            old.replace_all_uses_with(new)

    def bufferize_return(self, builder: Builder, op: func.ReturnOp) -> None:
        tensor_results = [v for v in op.operands if isinstance(v.type, TensorType)]
        for value, out in zip(tensor_results, self.out_params, strict=True):
            if is_empty_tensor(value):
                continue  # nothing defined to return
            buffer = self.buffer(value)
            if buffer is not out:
                builder.insert(memref.CopyOp(buffer, out))
        builder.insert(func.ReturnOp(*[v for v in op.operands if v not in tensor_results]))

    def update_signature(self) -> None:
        function = self.function
        inputs, results = converted_signature(function.function_type)
        function.properties["function_type"] = FunctionType.from_lists(inputs, results)


def count_tensor_results(function_type: FunctionType) -> int:
    return sum(isinstance(t, TensorType) for t in function_type.outputs.data)


def bufferize_function(function: func.FuncOp) -> None:
    num_outputs = count_tensor_results(function.function_type)
    old_arg_attrs = function.arg_attrs
    if function.is_declaration:
        inputs, results = converted_signature(function.function_type)
        function.properties["function_type"] = FunctionType.from_lists(inputs, results)
    else:
        FunctionBufferizer(function).run()
    if old_arg_attrs is not None:
        padding = [DictionaryAttr({})] * num_outputs
        function.properties["arg_attrs"] = ArrayAttr([*old_arg_attrs.data, *padding])
    function.properties.pop("res_attrs", None)
    contract.NUM_OUTPUTS.set(function, num_outputs)


def needs_bufferization(function: func.FuncOp) -> bool:
    types = (*function.function_type.inputs.data, *function.function_type.outputs.data)
    if any(isinstance(t, TensorType) for t in types):
        return True
    return any(has_tensors(op) for op in function.walk())


@dataclass(frozen=True)
class TessBufferizePass(ModulePass):
    """Tensors to memrefs, results to out-params; see the module docstring."""

    name = "tess-bufferize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in list(op.walk()):
            if isinstance(function, func.FuncOp) and needs_bufferization(function):
                bufferize_function(function)
        adopt_call_layouts(op)


def adopt_call_layouts(module: ModuleOp) -> None:
    """An attention kernel's declaration (`tess.attention_kernel`), called once, takes the
    memref types its call passes: a slice's strided view is read where it lies."""
    calls: dict[str, list[func.CallOp]] = {}
    for call in module.walk():
        if isinstance(call, func.CallOp):
            calls.setdefault(call.callee.root_reference.data, []).append(call)
    for function in module.ops:
        if not isinstance(function, func.FuncOp) or not function.is_declaration:
            continue
        if not contract.ATTENTION_KERNEL.has(function):
            continue  # another declaration keeps the types it declares
        found = calls.get(function.sym_name.data, [])
        if len(found) != 1:
            continue
        types = [v.type for v in found[0].arguments]
        declared = function.function_type
        if len(types) == len(declared.inputs) and types != list(declared.inputs.data):
            function.function_type = FunctionType.from_lists(types, declared.outputs.data)


__all__ = ["TessBufferizePass"]
