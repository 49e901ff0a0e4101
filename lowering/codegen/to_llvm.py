"""
Codegen of a kernel called by name as LLVM IR, with no Numba in between (level 5 -> 6).

Numba spends most of a kernel's compile time typing and lowering its Python; for the MLP
train step, its 12 kernels took 2.8 s of CPU where LLVM's own work on the same loops is a
fraction of it. A serial kernel called by its symbol (`numba_external`) needs nothing of
Numba's: its loop IR maps op for op onto LLVM IR, which `tessc.runtime.llvm_kernels`
compiles with llvmlite (Numba's LLVM) and registers under the symbol the host calls:

- `scf.for`, `scf.parallel` (serial here) and `scf.if` become blocks and phis;
- `memref.load`/`store` a `getelementptr` and a load or store, each memref an address and
  its sizes and element strides (`Strided`); views, subviews, reshapes and casts only
  compute a new one;
- scalar `arith` and `math` ops one instruction or intrinsic each (`llvm_ops`);
- `micro.mma` a call of its tile's function (`llvm_micro`), the vector loop `numba_micro`
  writes through Numba.

`kernel_ir(fn, name, fastmath)` returns the function's definition and what it needs beside
it (declarations, the micro-kernels' definitions); a kernel holding anything else raises
`NoLlvmForm` and stays a Numba `@external` kernel. Conventions: lowering/codegen/README.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue

from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.codegen import llvm_ops
from tessc.lowering.codegen.llvm_micro import mma_function
from tessc.lowering.codegen.llvm_ops import NoLlvmForm, llvm_type, storage_type
from tessc.lowering.codegen.llvm_text import IDENTIFIER, INTEGER, FunctionText
from tessc.lowering.codegen.numba_source import memref_shape

ALLOCA_MAX_BYTES = 1 << 16
"""Kernel scratch up to this size lives on the stack; larger scratch stays Numba's."""


@dataclass(frozen=True)
class Strided:
    """A memref in the emitted code: the address of its first element, the LLVM type of
    an element in memory, and its sizes and strides in elements (i64 operands)."""

    pointer: str
    element: str
    sizes: tuple[str, ...]
    strides: tuple[str, ...]


@dataclass(frozen=True)
class KernelIR:
    """One kernel's LLVM function, and the declarations (intrinsics, C functions) and
    helper definitions (micro-kernels) it uses, each a top-level entity of the module."""

    definition: str
    support: frozenset[str]


class KernelEmitter(FunctionText):
    """Emits one `func.func` kernel as an LLVM function `void @name(ptr, ..., i64, ...)`:
    a pointer per memref argument, then the size of each `?` dim of them, in order (the
    signature `numba_external.pointer_signature` gives the host)."""

    def __init__(self, fn: func.FuncOp, name: str, fastmath: Sequence[str]):
        super().__init__()
        self.fn = fn
        self.name = name
        # The fast-math flags every float instruction carries, with their trailing space.
        self.fast = "".join(f"{flag} " for flag in sorted(fastmath))
        self.allocas: list[str] = []  # hoisted into the entry block
        self.support: set[str] = set()  # declarations and helper functions it uses
        self.memories: dict[SSAValue, Strided] = {}
        self.handlers: dict[type[Operation], Callable] = {
            scf.ForOp: self.emit_for,
            scf.ParallelOp: self.emit_parallel,
            scf.IfOp: self.emit_if,
            memref.LoadOp: self.emit_load,
            memref.StoreOp: self.emit_store,
            memref.ViewOp: self.emit_view,
            memref.SubviewOp: self.emit_subview,
            memref.CollapseShapeOp: self.emit_collapse,
            memref.ExpandShapeOp: self.emit_expand,
            memref.CastOp: self.emit_cast,
            memref.DimOp: self.emit_dim,
            memref.AllocaOp: self.emit_alloca,
            memref.AllocOp: self.emit_alloca,
            memref.DeallocOp: lambda op: None,
            memref.CopyOp: self.emit_copy,
            arith.ConstantOp: self.emit_constant,
            arith.CmpiOp: self.emit_cmpi,
            arith.CmpfOp: self.emit_cmpf,
            arith.SelectOp: self.emit_select,
            arith.NegfOp: self.emit_negf,
            MmaOp: self.emit_mma,
            NumThreadsOp: lambda op: self.values.__setitem__(op.result, "1"),
        }

    # -- text ---------------------------------------------------------------------------

    def declare(self, text: str) -> None:
        self.support.add(f"declare {text}")

    def intrinsic(self, name: str, result: str, args: Sequence[str]) -> str:
        """`call <result> @name(args)` of an intrinsic or C function, declared once."""
        self.declare(f"{result} @{name}({', '.join(a.split(' ')[0] for a in args)})")
        return f"call {result} @{name}({', '.join(args)})"

    # -- operands -----------------------------------------------------------------------

    def value(self, value: SSAValue) -> str:
        if value not in self.values:
            owner = value.owner
            if isinstance(owner, arith.ConstantOp):
                self.values[value] = llvm_ops.constant(owner)
            else:
                raise NoLlvmForm(f"a value defined outside the kernel ({value})")
        return self.values[value]

    def typed(self, value: SSAValue) -> str:
        return f"{llvm_type(value.type)} {self.value(value)}"

    def memory(self, value: SSAValue) -> Strided:
        if value not in self.memories:
            raise NoLlvmForm(f"a memref defined outside the kernel ({value})")
        return self.memories[value]

    def row_major(self, sizes: Sequence[str]) -> tuple[str, ...]:
        strides = ["1"]
        for size in reversed(sizes[1:]):
            strides.insert(0, self.mul(strides[0], size))
        return tuple(strides) if sizes else ()

    def offset(self, memory: Strided, indices: Sequence[str]) -> str:
        total = "0"
        for index, stride in zip(indices, memory.strides, strict=True):
            total = self.add(total, self.mul(index, stride))
        return total

    def address(self, memory: Strided, offset: str) -> str:
        return self.element_address(memory.element, memory.pointer, offset)

    # -- functions ----------------------------------------------------------------------

    def emit(self) -> KernelIR:
        params: list[str] = []
        sizes_of: list[tuple[SSAValue, MemRefType, str, list[str]]] = []
        names: set[str] = set()
        for k, arg in enumerate(self.fn.body.block.args):
            typ = arg.type
            if not isinstance(typ, MemRefType):
                raise NoLlvmForm(f"argument {k} of type {typ}")
            hint = arg.name_hint if arg.name_hint and IDENTIFIER.fullmatch(arg.name_hint) else ""
            base = hint if hint and hint not in names else f"arg{k}"
            names.add(base)
            pointer = f"%{base}"
            params.append(f"ptr {pointer}")
            dims = [f"%{base}.n{d}" for d, size in enumerate(memref_shape(typ)) if size < 0]
            sizes_of.append((arg, typ, pointer, dims))
        for arg, typ, pointer, dims in sizes_of:
            params += [f"i64 {d}" for d in dims]
            given = iter(dims)
            sizes = tuple(str(s) if s >= 0 else next(given) for s in memref_shape(typ))
            element = storage_type(typ.element_type)
            self.memories[arg] = Strided(pointer, element, sizes, self.row_major(sizes))
        self.emit_block(self.fn.body.block)
        body = ["entry:", *self.allocas, *self.lines]
        header = f"define void @{self.name}({', '.join(params)}) #0 {{"
        return KernelIR("\n".join([header, *body, "}"]), frozenset(self.support))

    def emit_block(self, block: Block) -> list[SSAValue]:
        """Emit `block`'s ops; the values its terminator (`scf.yield`) yields."""
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                return list(op.operands)
            if isinstance(op, scf.ReduceOp):
                if op.operands:
                    raise NoLlvmForm(op)
                return []
            if isinstance(op, func.ReturnOp):
                self.line("ret void")
                return []
            self.emit_op(op)
        return []

    def emit_op(self, op: Operation) -> None:
        handler = self.handlers.get(type(op))
        if handler is not None:
            handler(op)
        elif op.name in llvm_ops.BINARY:
            self.emit_binary(op)
        elif op.name in llvm_ops.DIVISION:
            self.emit_division(op)
        elif op.name in llvm_ops.BINARY_INTRINSICS or op.name in llvm_ops.INTRINSICS:
            self.emit_intrinsic(op)
        elif op.name in llvm_ops.LIBM:
            self.emit_libm(op)
        elif op.name in llvm_ops.CASTS:
            self.emit_conversion(op)
        elif isinstance(op, math.AbsIOp | math.FmaOp | math.RsqrtOp):
            self.emit_math(op)
        else:
            raise NoLlvmForm(op)

    # -- control flow -------------------------------------------------------------------

    def emit_for(self, op: scf.ForOp) -> None:
        block = op.body.block
        if llvm_type(block.args[0].type) != "i64":
            raise NoLlvmForm(op)  # an integer-typed loop: index loops only
        carried = [(llvm_type(v.type), self.value(v)) for v in op.iter_args]

        def body(iv: str, values: list[str]) -> list[str]:
            self.values[block.args[0]] = iv
            for arg, value in zip(block.args[1:], values, strict=True):
                self.values[arg] = value
            return [self.value(v) for v in self.emit_block(block)]

        bounds = (self.value(op.lb), self.value(op.ub), self.value(op.step))
        results = self.loop(*bounds, carried, body, block.args[0])
        for result, value in zip(op.results, results, strict=True):
            self.values[result] = value

    def emit_parallel(self, op: scf.ParallelOp) -> None:
        if op.initVals or op.res:
            raise NoLlvmForm(op)
        block = op.body.block
        bounds = list(zip(op.lowerBound, op.upperBound, op.step, strict=True))

        def nest(depth: int) -> None:
            if depth == len(bounds):
                self.emit_block(block)
                return
            lower, upper, step = (self.value(v) for v in bounds[depth])

            def body(iv: str, _: list[str]) -> list[str]:
                self.values[block.args[depth]] = iv
                nest(depth + 1)
                return []

            self.loop(lower, upper, step, [], body, block.args[depth])

        nest(0)

    def emit_if(self, op: scf.IfOp) -> None:
        then, otherwise, merge = self.label("then"), self.label("else"), self.label("endif")
        self.line(f"br i1 {self.value(op.cond)}, label %{then}, label %{otherwise}")
        incoming: list[tuple[list[str], str]] = []
        for label, region in ((then, op.true_region), (otherwise, op.false_region)):
            self.start(label)
            yielded = (
                [self.value(v) for v in self.emit_block(region.block)] if region.blocks else []
            )
            incoming.append((yielded, self.block))
            self.line(f"br label %{merge}")
        self.start(merge)
        for k, result in enumerate(op.results):
            sources = ", ".join(f"[ {values[k]}, %{block} ]" for values, block in incoming)
            self.assign(f"phi {llvm_type(result.type)} {sources}", result)

    # -- scalars ------------------------------------------------------------------------

    def emit_constant(self, op: arith.ConstantOp) -> None:
        self.values[op.result] = llvm_ops.constant(op)

    def emit_binary(self, op: Operation) -> None:
        instruction = llvm_ops.BINARY[op.name]
        typ = llvm_type(op.results[0].type)
        lhs, rhs = (self.value(v) for v in op.operands)
        flags = ""
        if instruction in llvm_ops.FLOAT_BINARY:
            flags = self.fast
        elif typ == "i64" and instruction in ("add", "sub", "mul"):
            flags = "nsw "  # index arithmetic of loop IR never wraps
        self.assign(f"{instruction} {flags}{typ} {lhs}, {rhs}", op.results[0])

    def emit_division(self, op: Operation) -> None:
        (result,) = op.results
        typ = llvm_type(result.type)
        lhs, rhs = (self.value(v) for v in op.operands)
        instruction = llvm_ops.DIVISION[op.name]
        guarded = not (INTEGER.fullmatch(rhs) and int(rhs) != 0)
        rounded = op.name in ("arith.floordivsi", "arith.ceildivsi", "arith.ceildivui")
        divisor = rhs
        if guarded:
            zero = self.assign(f"icmp eq {typ} {rhs}, 0")
            divisor = self.assign(f"select i1 {zero}, {typ} 1, {typ} {rhs}")
        last = not guarded and not rounded  # the instruction giving the result its name
        quotient = self.assign(f"{instruction} {typ} {lhs}, {divisor}", result if last else None)
        if rounded:
            urem = "urem" if op.name.endswith("ui") else "srem"
            remainder = self.assign(f"{urem} {typ} {lhs}, {divisor}")
            inexact = self.assign(f"icmp ne {typ} {remainder}, 0")
            if op.name == "arith.ceildivui":
                adjust = inexact
            else:
                signs = self.assign(f"xor {typ} {remainder}, {divisor}")
                below = "slt" if op.name == "arith.floordivsi" else "sge"
                differ = self.assign(f"icmp {below} {typ} {signs}, 0")
                adjust = self.assign(f"and i1 {inexact}, {differ}")
            step = self.assign(f"zext i1 {adjust} to {typ}")
            sign = "sub" if op.name == "arith.floordivsi" else "add"
            quotient = self.assign(f"{sign} {typ} {quotient}, {step}", None if guarded else result)
        if guarded:
            self.assign(f"select i1 {zero}, {typ} 0, {typ} {quotient}", result)

    def emit_intrinsic(self, op: Operation) -> None:
        typ = llvm_type(op.results[0].type)
        name = llvm_ops.BINARY_INTRINSICS.get(op.name) or llvm_ops.INTRINSICS[op.name]
        suffix = llvm_ops.TYPE_SUFFIX.get(typ, typ)
        args = [self.typed(v) for v in op.operands]
        self.assign(self.intrinsic(f"llvm.{name}.{suffix}", typ, args), op.results[0])

    def emit_math(self, op: Operation) -> None:
        """`math.absi` (`llvm.abs`), `math.fma` (`llvm.fma`), `math.rsqrt` (1 / sqrt)."""
        result = op.results[0]
        typ = llvm_type(result.type)
        args = [self.typed(v) for v in op.operands]
        if isinstance(op, math.AbsIOp):
            self.assign(self.intrinsic(f"llvm.abs.{typ}", typ, [*args, "i1 false"]), result)
            return
        suffix = llvm_ops.TYPE_SUFFIX[typ]
        if isinstance(op, math.FmaOp):
            self.assign(self.intrinsic(f"llvm.fma.{suffix}", typ, args), result)
            return
        root = self.assign(self.intrinsic(f"llvm.sqrt.{suffix}", typ, args))
        self.assign(f"fdiv {self.fast}{typ} {llvm_ops.float_constant(1.0, typ)}, {root}", result)

    def emit_libm(self, op: Operation) -> None:
        typ = llvm_type(op.results[0].type)
        name = llvm_ops.libm_name(llvm_ops.LIBM[op.name], typ)
        self.assign(self.intrinsic(name, typ, [self.typed(v) for v in op.operands]), op.results[0])

    def emit_conversion(self, op: Operation) -> None:
        (source,), (result,) = op.operands, op.results
        source_type, target_type = llvm_type(source.type), llvm_type(result.type)
        instruction = llvm_ops.cast_instruction(op, source_type, target_type)
        if instruction is None:
            self.values[result] = self.value(source)
            return
        self.assign(f"{instruction} {self.typed(source)} to {target_type}", result)

    def emit_cmpi(self, op: arith.CmpiOp) -> None:
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        typ = llvm_type(op.lhs.type)
        self.assign(f"icmp {predicate} {typ} {self.value(op.lhs)}, {self.value(op.rhs)}", op.result)

    def emit_cmpf(self, op: arith.CmpfOp) -> None:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        typ = llvm_type(op.lhs.type)
        self.assign(f"fcmp {predicate} {typ} {self.value(op.lhs)}, {self.value(op.rhs)}", op.result)

    def emit_select(self, op: arith.SelectOp) -> None:
        typ = llvm_type(op.result.type)
        condition, lhs, rhs = (self.value(v) for v in op.operands)
        self.assign(f"select i1 {condition}, {typ} {lhs}, {typ} {rhs}", op.result)

    def emit_negf(self, op: arith.NegfOp) -> None:
        self.assign(f"fneg {self.fast}{self.typed(op.operand)}", op.result)

    # -- memory -------------------------------------------------------------------------

    def emit_load(self, op: memref.LoadOp) -> None:
        memory = self.memory(op.memref)
        address = self.address(memory, self.offset(memory, [self.value(i) for i in op.indices]))
        size = llvm_ops.SIZES[memory.element]
        loaded = self.assign(f"load {memory.element}, ptr {address}, align {size}")
        if llvm_type(op.res.type) == "i1":
            loaded = self.assign(f"trunc i8 {loaded} to i1")
        self.values[op.res] = loaded

    def emit_store(self, op: memref.StoreOp) -> None:
        memory = self.memory(op.memref)
        value = self.value(op.value)
        if llvm_type(op.value.type) == "i1":
            value = self.assign(f"zext i1 {value} to i8")
        address = self.address(memory, self.offset(memory, [self.value(i) for i in op.indices]))
        size = llvm_ops.SIZES[memory.element]
        self.line(f"store {memory.element} {value}, ptr {address}, align {size}")

    def emit_view(self, op: memref.ViewOp) -> None:
        source = self.memory(op.source)
        typ = op.result.type
        assert isinstance(typ, MemRefType)
        given = iter(self.value(v) for v in op.sizes)
        sizes = tuple(str(s) if s >= 0 else next(given) for s in memref_shape(typ))
        pointer = self.element_address("i8", source.pointer, self.value(op.byte_shift))
        element = storage_type(typ.element_type)
        self.memories[op.result] = Strided(pointer, element, sizes, self.row_major(sizes))

    def emit_subview(self, op: memref.SubviewOp) -> None:
        source = self.memory(op.source)
        offsets = list(op.static_offsets.get_values())
        sizes = list(op.static_sizes.get_values())
        steps = list(op.static_strides.get_values())
        if any(v < 0 for v in (*offsets, *sizes, *steps)):
            raise NoLlvmForm(op)
        start = self.offset(source, [str(o) for o in offsets])
        surplus = len(sizes) - len(memref_shape(op.result.type))
        kept_sizes: list[str] = []
        kept_strides: list[str] = []
        for size, step, stride in zip(sizes, steps, source.strides, strict=True):
            if size == 1 and surplus > 0:  # rank-reduced: its only index is 0
                surplus -= 1
                continue
            kept_sizes.append(str(size))
            kept_strides.append(self.mul(stride, str(step)))
        pointer = self.address(source, start)
        self.memories[op.result] = Strided(
            pointer, source.element, tuple(kept_sizes), tuple(kept_strides)
        )

    def emit_collapse(self, op: memref.CollapseShapeOp) -> None:
        source = self.memory(op.src)
        sizes: list[str] = []
        strides: list[str] = []
        for group in op.reassociation.data:
            dims = [d.value.data for d in group.data]  # type: ignore[attr-defined]
            size = "1"
            for d in dims:
                size = self.mul(size, source.sizes[d])
            sizes.append(size)
            strides.append(source.strides[dims[-1]] if dims else "1")
        self.memories[op.result] = Strided(
            source.pointer, source.element, tuple(sizes), tuple(strides)
        )

    def emit_expand(self, op: memref.ExpandShapeOp) -> None:
        source = self.memory(op.src)
        shape = memref_shape(op.result.type)
        given = iter(self.value(v) for v in op.output_shape)
        result_sizes = [str(s) if s >= 0 else next(given) for s in shape]
        strides: list[str] = [""] * len(shape)
        for group, stride in zip(op.reassociation.data, source.strides, strict=True):
            dims = [d.value.data for d in group.data]  # type: ignore[attr-defined]
            for d in reversed(dims):
                strides[d] = stride
                stride = self.mul(stride, result_sizes[d])
        self.memories[op.result] = Strided(
            source.pointer, source.element, tuple(result_sizes), tuple(strides)
        )

    def emit_cast(self, op: memref.CastOp) -> None:
        source = self.memory(op.source)
        shape = memref_shape(op.dest.type)
        sizes = tuple(str(s) if s >= 0 else old for s, old in zip(shape, source.sizes, strict=True))
        self.memories[op.dest] = Strided(source.pointer, source.element, sizes, source.strides)

    def emit_dim(self, op: memref.DimOp) -> None:
        index = self.value(op.index)
        if not INTEGER.fullmatch(index):
            raise NoLlvmForm(op)
        self.values[op.result] = self.memory(op.source).sizes[int(index)]

    def emit_alloca(self, op: memref.AllocaOp | memref.AllocOp) -> None:
        typ = op.memref.type
        assert isinstance(typ, MemRefType)
        shape = memref_shape(typ)
        element = storage_type(typ.element_type)
        count = 1
        for size in shape:
            count *= size
        if any(s < 0 for s in shape) or count * llvm_ops.SIZES[element] > ALLOCA_MAX_BYTES:
            raise NoLlvmForm(op)
        name = self.fresh(op.memref)
        self.allocas.append(f"  {name} = alloca {element}, i64 {max(count, 1)}, align 64")
        sizes = tuple(str(s) for s in shape)
        self.memories[op.memref] = Strided(name, element, sizes, self.row_major(sizes))

    def emit_copy(self, op: memref.CopyOp) -> None:
        source, target = self.memory(op.source), self.memory(op.destination)
        size = llvm_ops.SIZES[source.element]

        def nest(indices: list[str]) -> None:
            if len(indices) == len(source.sizes):
                read = self.address(source, self.offset(source, indices))
                value = self.assign(f"load {source.element}, ptr {read}, align {size}")
                write = self.address(target, self.offset(target, indices))
                self.line(f"store {target.element} {value}, ptr {write}, align {size}")
                return

            def body(iv: str, _: list[str]) -> list[str]:
                nest([*indices, iv])
                return []

            self.loop("0", source.sizes[len(indices)], "1", [], body)

        nest([])

    # -- micro-kernels ------------------------------------------------------------------

    def emit_mma(self, op: MmaOp) -> None:
        """A call of the tile's micro-kernel (`mma_function`), defined once per module:
        LLVM then optimises and generates its loop once, not once per unrolled copy of the
        loops around the call."""
        rows, cols, lanes = op.tile
        lhs, rhs, acc = self.memory(op.lhs), self.memory(op.rhs), self.memory(op.acc)
        name, support = mma_function(rows, cols, lanes, op.layout, acc.element)
        self.support.update(support)
        a = self.address(lhs, self.value(op.lhs_offset))
        b = self.address(rhs, self.value(op.rhs_offset))
        c = self.address(acc, self.offset(acc, [self.value(v) for v in op.acc_indices]))
        args = [f"ptr {a}", f"ptr {b}", f"i64 {self.value(op.depth)}", f"ptr {c}"]
        args += [f"i64 {acc.strides[-2]}", f"i1 {self.value(op.accumulate)}"]
        self.line(f"call void @{name}({', '.join(args)})")


def kernel_ir(fn: func.FuncOp, name: str, fastmath: Sequence[str]) -> KernelIR:
    """The LLVM function `@name` of kernel `fn`; raises `NoLlvmForm` for a kernel holding
    an op, type or form without one here."""
    return KernelEmitter(fn, name, fastmath).emit()


def kernel_source(
    fn: func.FuncOp, name: str, signature: str, fastmath: Sequence[str]
) -> str | None:
    """The generated module's statement binding kernel `name` to its LLVM form
    (`tessc.runtime.llvm_kernels.llvm_kernel`), or None where it has none."""
    try:
        ir = kernel_ir(fn, name, fastmath)
    except NoLlvmForm:
        return None
    support = "".join(f"    {_literal(entity)},\n" for entity in sorted(ir.support))
    head = f"{name} = llvm_kernel(__name__, {name!r}, {signature}, (\n{support}), "
    return head + _literal(ir.definition) + ")"


def _literal(text: str) -> str:
    """A Python literal of LLVM text: a line as it is, a function as the lines it has."""
    return repr(text) if "\n" not in text else "'''\\\n" + text + "\n'''"


__all__ = ["ALLOCA_MAX_BYTES", "KernelIR", "NoLlvmForm", "Strided", "kernel_ir", "kernel_source"]
