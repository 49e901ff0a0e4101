"""
Codegen, per op: the Python statement of each arith, math and memref op (level 5 -> 6).

`OpEmitter`, the base class of the function emitter, translates one op into one Python
statement: scalar `arith`/`math` ops from expression templates (`EXPRESSIONS`, `_CMPF`,
`_CMPI`; narrow integers wrapped back to their type, `arith.bitcast` through an LLVM
intrinsic), constants inlined as literals (`np.float32(...)` for f32, so f32 code stays
f32), memrefs as NumPy arrays (`memref.view` of the arena as a typed window, no copy;
`memref.copy` a loop nest). Values are named after their IR name hints. The conventions are
in lowering/codegen/README.md; types, constants and names are `numba_source.py`'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import AnyFloat, BFloat16Type, IntegerType, MemRefType
from xdsl.ir import Operation, SSAValue

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.codegen.numba_micro import MmaKey, mma_name
from tessc.lowering.codegen.numba_source import (
    ITEMSIZES,
    MANTISSA_BITS,
    Namer,
    NoDtypeError,
    UnsupportedOpError,
    constant_expr,
    dtype_name,
    float_literal,
    global_name,
    is_narrow_float,
    memref_shape,
    scalar_ctor,
    tuple_literal,
)
from tessc.lowering.loops.index_values import constant_int
from tessc.runtime.abi import HUGE_PAGE

# ---------------------------------------------------------------------------------------
# per-op expression tables
# ---------------------------------------------------------------------------------------

# `{0}`, `{1}`, `{2}`: operand expressions (names or literals); `{T}`: the result's scalar
# constructor (`np.float32`), `{S}`: the first operand's, `{one}`: 1 in the result type,
# `{big}`: 2^(mantissa bits) in the result type (from it on every float is an integer).
EXPRESSIONS: dict[str, str] = {
    "arith.addf": "{0} + {1}", "arith.subf": "{0} - {1}", "arith.mulf": "{0} * {1}",
    "arith.divf": "{0} / {1}", "arith.remf": "np.fmod({0}, {1})", "arith.negf": "-{0}",
    "arith.maximumf": "np.maximum({0}, {1})", "arith.minimumf": "np.minimum({0}, {1})",
    "arith.maxnumf": "np.fmax({0}, {1})", "arith.minnumf": "np.fmin({0}, {1})",
    "arith.addi": "{0} + {1}", "arith.subi": "{0} - {1}", "arith.muli": "{0} * {1}",
    "arith.andi": "{0} & {1}", "arith.ori": "{0} | {1}", "arith.xori": "{0} ^ {1}",
    "arith.shli": "{0} << {1}", "arith.shrsi": "{0} >> {1}",
    "arith.maxsi": "max({0}, {1})", "arith.minsi": "min({0}, {1})",
    # Index arithmetic is non-negative in loop IR, so the unsigned ops share Python's.
    "arith.shrui": "{0} >> {1}", "arith.maxui": "max({0}, {1})", "arith.minui": "min({0}, {1})",
    "arith.divui": "{0} // {1}", "arith.remui": "{0} % {1}", "arith.ceildivui": "-(-{0} // {1})",
    "arith.floordivsi": "{0} // {1}", "arith.ceildivsi": "-(-{0} // {1})",
    # arith rounds signed division toward zero; Python's // rounds down.
    "arith.divsi": "({0} // {1} if ({0} < 0) == ({1} < 0) else -(-{0} // {1}))",
    "arith.remsi": "({0} % {1} if ({0} < 0) == ({1} < 0) or {0} % {1} == 0 else {0} % {1} - {1})",
    "arith.select": "{1} if {0} else {2}",
    "arith.bitcast": "bitcast({S}({0}), {T})",
    "math.absi": "abs({0})", "math.atan2": "np.arctan2({0}, {1})",
    "math.copysign": "np.copysign({0}, {1})", "math.erf": "{T}(math.erf({0}))",
    "math.fma": "{0} * {1} + {2}", "math.powf": "np.power({0}, {1})",
    "math.rsqrt": "{one} / np.sqrt({0})",
}  # fmt: skip
for (
    _cast
) in "index_cast index_castui sitofp uitofp fptosi fptoui extf truncf extsi extui trunci".split():
    EXPRESSIONS[f"arith.{_cast}"] = "{T}({0})"
for _function in (
    "absf:abs atan:arctan cbrt ceil cos cosh exp exp2 expm1 floor log log10 log1p log2 "
    "roundeven:rint sin sinh sqrt tan tanh trunc"
).split():
    _math_name, _, _numpy_name = _function.partition(":")
    EXPRESSIONS[f"math.{_math_name}"] = f"np.{_numpy_name or _math_name}({{0}})"

# The CPU's: `arith.maximumf`/`minimumf` as LLVM intrinsics (`FLOAT_MINMAX_INTRINSICS`).
CPU_EXPRESSIONS: dict[str, str] = {
    **EXPRESSIONS,
    "arith.maximumf": "fmaximum({0}, {1})",
    "arith.minimumf": "fminimum({0}, {1})",
}

_CMPF: dict[str, str] = {
    "false": "False", "true": "True",
    "oeq": "{0} == {1}", "ogt": "{0} > {1}", "oge": "{0} >= {1}",
    "olt": "{0} < {1}", "ole": "{0} <= {1}", "one": "({0} < {1} or {0} > {1})",
    "ueq": "not ({0} < {1} or {0} > {1})", "ugt": "not ({0} <= {1})", "uge": "not ({0} < {1})",
    "ult": "not ({0} >= {1})", "ule": "not ({0} > {1})", "une": "{0} != {1}",
    "ord": "({0} == {0} and {1} == {1})", "uno": "({0} != {0} or {1} != {1})",
}  # fmt: skip

# Signed and unsigned compare alike: loop IR compares non-negative indices.
_CMPI: dict[str, str] = {
    "eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
    "ult": "<", "ule": "<=", "ugt": ">", "uge": ">=",
}  # fmt: skip

# Name stems for values without a name hint (else the op's name: `exp0`, `tanh1`).
_STEMS: dict[str, str] = {
    "memref.load": "ld", "memref.alloc": "buf", "memref.alloca": "buf",
    "memref.collapse_shape": "view", "memref.expand_shape": "view", "memref.subview": "view",
    "memref.view": "view", "memref.dim": "dim", "func.call": "r", "scf.for": "res",
    "scf.if": "res", "arith.cmpf": "cmp", "arith.cmpi": "cmp", "arith.select": "sel",
    "arith.addf": "add", "arith.addi": "add", "arith.subf": "sub", "arith.subi": "sub",
    "arith.mulf": "mul", "arith.muli": "mul", "arith.divf": "div", "arith.negf": "neg",
    "arith.maximumf": "max", "arith.minimumf": "min", "arith.fptosi": "int",
    "arith.sitofp": "float", "arith.uitofp": "float", "arith.bitcast": "bits",
    "arith.extf": "wide", "arith.truncf": "narrow",
    "arith.andi": "and_", "arith.ori": "or_", "arith.xori": "xor", "arith.shli": "shl",
    "arith.shrsi": "shr", "arith.shrui": "shr",
}  # fmt: skip


def narrow_float_template(op: Operation) -> str | None:
    """The conversion of `arith.extf` from, or `arith.truncf` to, a 16-bit float (held as
    its bits: `NARROW_FLOAT_HELPERS`); None for any other op."""
    if isinstance(op, arith.ExtFOp) and is_narrow_float(op.input.type):
        prefix = "bf16" if isinstance(op.input.type, BFloat16Type) else "f16"
        return f"{{T}}({prefix}_to_f32({{0}}))"
    if isinstance(op, arith.TruncFOp) and is_narrow_float(op.result.type):
        prefix = "bf16" if isinstance(op.result.type, BFloat16Type) else "f16"
        return f"f32_to_{prefix}(np.float32({{0}}))"
    return None


def _stem(op: Operation) -> str:
    return _STEMS.get(op.name) or re.sub(r"\W", "_", op.name.partition(".")[2]) or "v"


# ---------------------------------------------------------------------------------------
# ops
# ---------------------------------------------------------------------------------------


class OpEmitter:
    """Emits the arith, math and memref ops of one function as indented Python lines.

    `to_numba`'s function emitter derives from it and adds functions, loops and calls.
    `parallel` says whether the function's loops become `prange` loops.
    """

    def __init__(self, taken_names: Iterable[str], parallel: bool):
        self.parallel = parallel
        self.names = Namer(taken_names)
        self.exprs: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self.indent = 1
        self.uses_math = False
        self.uses_bitcast = False
        self.uses_narrow_floats = False  # `NARROW_FLOAT_HELPERS` convert 16-bit floats
        self.mma_tiles: set[MmaKey] = set()  # `micro.mma` tiles and layouts emitted
        self.uses_num_threads = False  # `micro.num_threads` read Numba's thread count
        self.uses_huge_pages = False  # a kernel's large scratch was advised huge pages
        # 0-d memrefs in parallel kernels, seen through 1-element views: Numba's parfor
        # lowering cannot index a 0-d array (`x[()]`) inside a prange body.
        self.scalar_views: dict[SSAValue, str] = {}
        # The arith/math templates; a target whose compiler lacks some spellings (Numba's
        # CUDA target has no `np.exp`) overrides those entries (`cuda_function.CUDA_TEMPLATES`).
        self.templates: dict[str, str] = CPU_EXPRESSIONS
        self.uses_float_minmax = False  # `FLOAT_MINMAX_INTRINSICS` (CPU max/min of floats)

    # -- helpers ------------------------------------------------------------------------

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def expr(self, value: SSAValue) -> str:
        if value not in self.exprs:
            owner = value.owner
            if isinstance(owner, arith.ConstantOp):
                self.exprs[value] = constant_expr(owner)
            else:  # pragma: no cover - a verified module defines values before use
                raise ValueError(f"value {value} used before it is defined")
        return self.exprs[value]

    def define(self, value: SSAValue, stem: str) -> str:
        name = self.names.for_value(value, stem)
        self.exprs[value] = name
        return name

    def assign(self, op: Operation, text: str) -> None:
        (result,) = op.results
        self.line(f"{self.define(result, _stem(op))} = {text}")
        self.view_if_scalar(result)

    def view_if_scalar(self, value: SSAValue) -> None:
        if self.parallel and isinstance(value.type, MemRefType) and not value.type.get_shape():
            view = self.names.hinted(f"{self.exprs[value]}_1d")
            self.line(f"{view} = {self.exprs[value]}.reshape((1,))")
            self.scalar_views[value] = view

    def element(self, memory: SSAValue, indices: Sequence[SSAValue]) -> str:
        """`x[i, j]`; `x[()]` for a 0-d memref, or `x_1d[0]` through its view."""
        if memory in self.scalar_views:
            return f"{self.scalar_views[memory]}[0]"
        return f"{self.expr(memory)}[{self.indices(indices)}]"

    # -- walking ------------------------------------------------------------------------

    def emit_data_op(self, op: Operation) -> bool:
        """Emit `op` if it is an arith, math or memref op; False for any other op.

        An op on a type with no NumPy dtype (`vector<4xf32>` from a vector-level input)
        is the user's input, not a bug: an `UnsupportedOpError` located at the op."""
        try:
            return self._emit_data_op(op)
        except NoDtypeError as error:
            raise UnsupportedOpError(op, str(error)) from None

    def _emit_data_op(self, op: Operation) -> bool:
        if isinstance(op, arith.ConstantOp):
            self.exprs[op.result] = constant_expr(op)
        elif (template := narrow_float_template(op)) is not None:
            self.uses_narrow_floats = self.uses_bitcast = True
            self.emit_expression(op, template)
        elif op.name in self.templates:
            self.emit_expression(op, self.templates[op.name])
        elif isinstance(op, arith.CmpfOp):
            predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            self.emit_expression(op, _CMPF[predicate])
        elif isinstance(op, arith.CmpiOp):
            predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            self.emit_expression(op, f"{{0}} {_CMPI[predicate]} {{1}}")
        elif isinstance(op, memref.LoadOp):
            self.assign(op, self.element(op.memref, op.indices))
        elif isinstance(op, memref.StoreOp):
            self.line(f"{self.element(op.memref, op.indices)} = {self.expr(op.value)}")
        elif isinstance(op, memref.AllocOp | memref.AllocaOp):
            self.emit_alloc(op)
        elif isinstance(op, memref.DeallocOp):
            pass  # NumPy arrays are garbage-collected; the plan only needs the lifetime
        elif isinstance(op, memref.CopyOp):
            self.emit_copy(op)
        elif isinstance(op, memref.CollapseShapeOp | memref.ExpandShapeOp):
            self.emit_reshape(op)
        elif isinstance(op, memref.ViewOp):
            self.emit_view(op)
        elif isinstance(op, memref.CastOp):
            self.exprs[op.dest] = self.expr(op.source)
        elif isinstance(op, memref.SubviewOp):
            self.emit_subview(op)
        elif isinstance(op, memref.DimOp):
            self.emit_dim(op)
        elif isinstance(op, MmaOp):
            self.emit_mma(op)
        elif isinstance(op, NumThreadsOp):
            # A serial function's loops run on one thread, whatever Numba's count.
            self.uses_num_threads |= self.parallel
            value = "num_threads()" if self.parallel else "1"
            self.line(f"{self.define(op.result, 'threads')} = {value}")
        elif isinstance(op, memref.GetGlobalOp):
            self.exprs[op.memref] = global_name(op.name_.root_reference.data)
        else:
            return False
        return True

    def emit_mma(self, op: MmaOp) -> None:
        """A call of the micro-kernel intrinsic for the op's tile (`numba_micro`)."""
        key = (*op.tile, *op.layout)
        self.mma_tiles.add(key)
        index = ", ".join(self.expr(v) for v in op.acc_indices)
        args = [self.expr(v) for v in (op.lhs, op.lhs_offset, op.rhs, op.rhs_offset, op.depth)]
        acc = f"{self.expr(op.acc)}, ({index},), {self.expr(op.accumulate)}"
        self.line(f"{mma_name(key)}({', '.join(args)}, {acc})")

    def emit_expression(self, op: Operation, template: str) -> None:
        if len(op.results) != 1:
            raise UnsupportedOpError(op, "expected exactly one result")
        result_type = op.results[0].type
        width = result_type.width.data if isinstance(result_type, IntegerType) else 0
        if width in (8, 16, 32):
            # Numba widens small-integer arithmetic to int64: narrow back, wrapping like arith.
            if op.name == "arith.shrui":
                template = f"(np.int64({{0}}) & {(1 << width) - 1}) >> {{1}}"
            if not template.startswith(("{T}(", "bitcast(")):
                template = "{T}(" + template + ")"
        operands = [self.expr(v) for v in op.operands]
        source = op.operands[0].type if op.operands else result_type
        one = ""
        if "{one}" in template:
            one = float_literal(1.0, result_type) if isinstance(result_type, AnyFloat) else "1"
        text = template.format(
            *operands,
            T=scalar_ctor(result_type),
            S=scalar_ctor(source) if "{S}" in template else "",
            one=one,
            big=float_literal(2.0 ** MANTISSA_BITS[result_type.bitwidth], result_type)
            if "{big}" in template and isinstance(result_type, AnyFloat)
            else "",
        )
        self.uses_math |= "math." in text
        self.uses_bitcast |= op.name == "arith.bitcast"
        self.uses_float_minmax |= text.startswith(("fmaximum(", "fminimum("))
        self.assign(op, text)

    def indices(self, indices: Sequence[SSAValue]) -> str:
        return ", ".join(self.expr(i) for i in indices) if indices else "()"

    # -- memory -------------------------------------------------------------------------

    def shape_literal(self, shape: Sequence[int], dynamic: Sequence[SSAValue]) -> str:
        dynamic_exprs = iter(self.expr(v) for v in dynamic)
        return tuple_literal([d if d >= 0 else next(dynamic_exprs) for d in shape])

    def emit_alloc(self, op: memref.AllocOp | memref.AllocaOp) -> None:
        typ = op.memref.type
        assert isinstance(typ, MemRefType)
        shape = self.shape_literal(memref_shape(typ), op.dynamic_sizes)
        dtype = f"np.{dtype_name(typ.element_type)}"
        size = typ.get_shape()[0] if len(typ.get_shape()) == 1 else -1
        item = typ.element_type.bitwidth // 8 if isinstance(typ.element_type, AnyFloat) else 0
        fn = op.parent_op()
        while fn is not None and not isinstance(fn, func.FuncOp):
            fn = fn.parent_op()
        if size < 0 or not item or size * item < HUGE_PAGE or not contract.KERNEL.has(fn):
            self.assign(op, f"np.empty({shape}, dtype={dtype})")
            return
        # Large 1-d kernel scratch (packed panels): from a 2 MiB boundary, huge pages.
        raw = self.names.numbered("raw")
        self.line(f"{raw} = np.empty(({size + HUGE_PAGE // item},), dtype={dtype})")
        start = f"({HUGE_PAGE} - {raw}.ctypes.data % {HUGE_PAGE}) % {HUGE_PAGE} // {item}"
        self.assign(op, f"{raw}[{start}:][:{size}]")
        self.line(f"huge_pages({self.expr(op.memref)})")
        self.uses_huge_pages = True

    def emit_copy(self, op: memref.CopyOp) -> None:
        # An explicit loop nest: Numba takes seconds to compile `dst[...] = src` (15 s
        # measured for a 2-D copy) and a fraction of one for the loops.
        source, target = self.expr(op.source), self.expr(op.destination)
        shape = memref_shape(op.source.type)
        indices = [self.names.numbered("c") for _ in shape]
        for dim, (index, size) in enumerate(zip(indices, shape, strict=True)):
            bound = size if size >= 0 else f"{source}.shape[{dim}]"
            self.line(f"for {index} in range({bound}):")
            self.indent += 1
        if indices:
            subscript = ", ".join(indices)
            self.line(f"{target}[{subscript}] = {source}[{subscript}]")
        else:
            destination = self.element(op.destination, ())
            self.line(f"{destination} = {self.element(op.source, ())}")
        self.indent -= len(indices)

    def emit_reshape(self, op: memref.CollapseShapeOp | memref.ExpandShapeOp) -> None:
        shape = memref_shape(op.result.type)
        if isinstance(op, memref.ExpandShapeOp) and op.output_shape:
            text = self.shape_literal(shape, op.output_shape)
        elif sum(d < 0 for d in shape) > 1:
            raise UnsupportedOpError(op, "more than one dynamic dimension")
        else:
            text = tuple_literal(shape)
        self.assign(op, f"{self.expr(op.src)}.reshape({text})")

    def emit_view(self, op: memref.ViewOp, typed: bool = True) -> None:
        """A typed window into an i8 arena: slice the bytes, reinterpret, shape (or, not
        `typed`, only the bytes: a pointer's worth for a kernel called by name, whose
        compile the reinterpreting `.view` would cost ~50 ms in its host)."""
        typ = op.result.type
        assert isinstance(typ, MemRefType)
        shape = memref_shape(typ)
        dtype = dtype_name(typ.element_type)
        offset, start = constant_int(op.byte_shift), self.expr(op.byte_shift)
        if op.sizes:  # `?` dims (a generic host's region, `memory_plan_dynamic`)
            if not typed or len(op.sizes) != sum(d < 0 for d in shape):
                raise UnsupportedOpError(op, "dynamic sizes")
            static = math.prod(d for d in shape if d >= 0) * ITEMSIZES[dtype]
            nbytes = " * ".join([str(static), *(self.expr(v) for v in op.sizes)])
            window = f"{self.expr(op.source)}[{start}:{start} + {nbytes}]"
            text = self.shape_literal(shape, op.sizes)
            self.assign(op, f"{window}.view(np.{dtype}).reshape({text})")
            return
        if any(d < 0 for d in shape):
            raise UnsupportedOpError(op, "dynamic sizes")
        nbytes_static = math.prod(shape) * ITEMSIZES[dtype]
        end = str(offset + nbytes_static) if offset is not None else f"{start} + {nbytes_static}"
        window = f"{self.expr(op.source)}[{start}:{end}]"
        if not typed:
            self.assign(op, window)
            return
        self.assign(op, f"{window}.view(np.{dtype}).reshape({tuple_literal(shape)})")

    def emit_subview(self, op: memref.SubviewOp) -> None:
        offsets = list(op.static_offsets.get_values())
        sizes = list(op.static_sizes.get_values())
        strides = list(op.static_strides.get_values())
        if any(v < 0 for v in (*offsets, *sizes, *strides)):
            raise UnsupportedOpError(op, "dynamic offsets, sizes or strides")
        # A rank-reducing subview drops unit dims; which ones does not change the data.
        surplus = len(sizes) - len(memref_shape(op.result.type))
        subscripts: list[str] = []
        for offset, size, stride in zip(offsets, sizes, strides, strict=True):
            if size == 1 and surplus > 0:
                surplus -= 1
                subscripts.append(str(offset))
                continue
            step = "" if stride == 1 else f":{stride}"
            subscripts.append(f"{offset}:{offset + (size - 1) * stride + 1}{step}")
        self.assign(op, f"{self.expr(op.source)}[{', '.join(subscripts)}]")

    def emit_dim(self, op: memref.DimOp) -> None:
        index = constant_int(op.index)
        shape = memref_shape(op.source.type)
        if index is not None and shape[index] >= 0:
            self.exprs[op.result] = str(shape[index])
        else:
            self.assign(op, f"{self.expr(op.source)}.shape[{self.expr(op.index)}]")


__all__ = ["CPU_EXPRESSIONS", "EXPRESSIONS", "OpEmitter"]
