"""
Building `linalg.generic` ops and their scalar bodies: the vocabulary of the passes that
lower to linalg (`tess-to-linalg`, `tessc.lowering.linalg.to_linalg_index`).

An operand's indexing map under broadcasting (`broadcast_map`: aligned with the trailing
loops, a size-1 dim facing a larger loop reads index 0); a generic from its inputs, init,
maps, iterators and a body callback (`build_generic`), with the fills and elementwise forms
built on it; and scalar bodies that pick their `arith`/`math` op by element type: float,
signed integer or `i1` (`typed_body`, `compare`, `convert`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract
from tessc.dialects.tess import Shape, tensor_shape
from tessc.lowering.linalg.generic_analysis import generic_maps, is_view_map

# ---------------------------------------------------------------------------------------
# indexing maps
# ---------------------------------------------------------------------------------------


def broadcast_map(
    operand_shape: Shape, loop_sizes: Sequence[int], loop_dims: Sequence[int], num_loops: int
) -> AffineMap:
    """
    The map reading an operand of `operand_shape` broadcast against the loops `loop_dims`
    (one loop per broadcast result dim, of sizes `loop_sizes`), by the seed rules.

    The operand aligns with the trailing loops; the leading loops it lacks are dropped, and
    a size-1 operand dim facing a larger loop reads index `0`.
    """
    offset = len(loop_dims) - len(operand_shape)
    assert offset >= 0, "an operand cannot have more dims than its broadcast result"
    results: list[AffineExpr] = []
    for position, size in enumerate(operand_shape):
        loop = loop_dims[offset + position]
        if size == 1 and loop_sizes[offset + position] != 1:
            results.append(AffineExpr.constant(0))
        else:
            results.append(AffineExpr.dimension(loop))
    return AffineMap(num_loops, 0, tuple(results))


def parallel_iterators(count: int) -> list[Attribute]:
    return [IteratorTypeAttr.parallel()] * count


# ---------------------------------------------------------------------------------------
# building generics
# ---------------------------------------------------------------------------------------

BodyBuilder = Callable[[Builder, Sequence[SSAValue]], SSAValue | Sequence[SSAValue]]
"""Builds a generic's scalar body from its block arguments (inputs..., outputs...) and
returns the value to yield (one per output)."""


def float_constant(builder: Builder, value: float, element_type: Attribute) -> SSAValue:
    """`value` as a scalar `arith.constant` of `element_type`: a float, an integer
    (truncated; an `i1` is `value != 0`) or an index."""
    if isinstance(element_type, IntegerType | IndexType):
        if isinstance(element_type, IntegerType) and element_type.width.data == 1:
            attr = IntegerAttr(int(value != 0), element_type)
        elif value == float("inf"):
            attr = IntegerAttr(2 ** (_width(element_type) - 1) - 1, element_type)
        elif value == float("-inf"):
            attr = IntegerAttr(-(2 ** (_width(element_type) - 1)), element_type)
        else:
            attr = IntegerAttr(int(value), element_type)
        return builder.insert(arith.ConstantOp(attr)).result
    return builder.insert(arith.ConstantOp(FloatAttr(value, element_type))).result


def _width(element_type: Attribute) -> int:
    return element_type.width.data if isinstance(element_type, IntegerType) else 64


def is_float_type(typ: Attribute) -> bool:
    return isinstance(typ, AnyFloat)


def is_bool_type(typ: Attribute) -> bool:
    return isinstance(typ, IntegerType) and typ.width.data == 1


def build_generic(
    rewriter: PatternRewriter,
    inputs: Sequence[SSAValue],
    init: SSAValue,
    maps: Sequence[AffineMap],
    iterators: Sequence[Attribute],
    body: BodyBuilder,
    origin: str | None,
    extra_inits: Sequence[SSAValue] = (),
) -> GenericOp:
    """Insert `linalg.generic ins(inputs) outs(init, extra_inits...)` before the matched op,
    tagged with the name of the tess op it computes (`origin`) in `tess.op`. `body` returns
    the value to yield, or one per output."""
    inits = [init, *extra_inits]
    block = Block(arg_types=[scalar_type(v) for v in (*inputs, *inits)])
    builder = Builder(InsertPoint.at_end(block))
    yielded = body(builder, block.args)
    builder.insert(YieldOp(*([yielded] if isinstance(yielded, SSAValue) else yielded)))
    generic = GenericOp(
        inputs,
        inits,
        Region(block),
        [AffineMapAttr(m) for m in maps],
        iterators,
        [v.type for v in inits],
    )
    if origin is not None:
        contract.ORIGIN.set(generic, origin)
    rewriter.insert(generic)
    return generic


def scalar_type(value: SSAValue) -> Attribute:
    """The block argument type a generic gives operand `value`: its element type."""
    typ = value.type
    return typ.element_type if isinstance(typ, TensorType) else typ


def empty_like(rewriter: PatternRewriter, result_type: Attribute) -> SSAValue:
    return rewriter.insert(tensor.EmptyOp([], result_type)).tensor


def build_fill(
    rewriter: PatternRewriter, result_type: TensorType, value: float, origin: str | None = None
) -> SSAValue:
    """A generic with no inputs writing `value` everywhere: the init of reductions too."""
    element_type = result_type.element_type
    return build_from_indices(
        rewriter, result_type, lambda b, args: float_constant(b, value, element_type), origin
    )


def build_from_indices(
    rewriter: PatternRewriter,
    result_type: TensorType,
    body: BodyBuilder,
    origin: str | None = None,
) -> SSAValue:
    """A generic with no inputs computing each element of `result_type` in `body` (from the
    loop indices, `linalg.index`, and values defined outside): a fill, a gather, a concat."""
    rank = result_type.get_num_dims()
    generic = build_generic(
        rewriter,
        [],
        empty_like(rewriter, result_type),
        [AffineMap.identity(rank)],
        parallel_iterators(rank),
        body,
        origin,
    )
    return generic.res[0]


def build_elementwise(
    rewriter: PatternRewriter,
    inputs: Sequence[SSAValue],
    result_type: TensorType,
    body: BodyBuilder,
    origin: str,
) -> SSAValue:
    """A parallel generic over the result dims that broadcasts each input."""
    shape = tensor_shape(result_type)
    rank = len(shape)
    loops = list(range(rank))
    maps = [broadcast_map(tensor_shape(v), shape, loops, rank) for v in inputs]
    generic = build_generic(
        rewriter,
        inputs,
        empty_like(rewriter, result_type),
        [*maps, AffineMap.identity(rank)],
        parallel_iterators(rank),
        body,
        origin,
    )
    return generic.res[0]


# ---------------------------------------------------------------------------------------
# scalar bodies
# ---------------------------------------------------------------------------------------


def sigmoid(b: Builder, x: SSAValue) -> SSAValue:
    one = float_constant(b, 1.0, x.type)
    neg = b.insert(arith.NegfOp(x)).result
    exp = b.insert(math.ExpOp(neg)).result
    denominator = b.insert(arith.AddfOp(one, exp)).result
    return b.insert(arith.DivfOp(one, denominator)).result


def relu(b: Builder, x: SSAValue) -> SSAValue:
    zero = float_constant(b, 0.0, x.type)
    return b.insert(arith.MaximumfOp(x, zero)).result


def reciprocal(b: Builder, x: SSAValue) -> SSAValue:
    one = float_constant(b, 1.0, x.type)
    return b.insert(arith.DivfOp(one, x)).result


def negate(b: Builder, x: SSAValue) -> SSAValue:
    if is_float_type(x.type):
        return b.insert(arith.NegfOp(x)).result
    return b.insert(arith.SubiOp(float_constant(b, 0.0, x.type), x)).result


def absolute(b: Builder, x: SSAValue) -> SSAValue:
    if is_float_type(x.type):
        return b.insert(math.AbsFOp(x)).result
    return b.insert(math.AbsIOp(x)).result


_FLOAT_PREDICATES = {"lt": "olt", "gt": "ogt", "eq": "oeq"}
_INT_PREDICATES = {"lt": "slt", "gt": "sgt", "eq": "eq"}


def compare(b: Builder, lhs: SSAValue, rhs: SSAValue, relation: str) -> SSAValue:
    """The `i1` of `lhs <relation> rhs` (ordered for floats: false on NaN; signed for ints)."""
    if is_float_type(lhs.type):
        return b.insert(arith.CmpfOp(lhs, rhs, _FLOAT_PREDICATES[relation])).result
    return b.insert(arith.CmpiOp(lhs, rhs, _INT_PREDICATES[relation])).result


def is_nonzero(b: Builder, value: SSAValue) -> SSAValue:
    """`value != 0` as an `i1` (NaN is nonzero, as in NumPy); an `i1` is itself."""
    if is_bool_type(value.type):
        return value
    zero = float_constant(b, 0.0, value.type)
    if is_float_type(value.type):
        return b.insert(arith.CmpfOp(value, zero, "une")).result
    return b.insert(arith.CmpiOp(value, zero, "ne")).result


def convert(b: Builder, value: SSAValue, target: Attribute) -> SSAValue:
    """`value` converted to scalar type `target` as NumPy's `astype` does: float to int
    truncates toward zero, anything to `i1` is `!= 0`, `i1` to a number is 0 or 1."""
    source = value.type
    if source == target:
        return value
    if is_bool_type(target):
        return is_nonzero(b, value)
    if is_bool_type(source):
        one, zero = float_constant(b, 1.0, target), float_constant(b, 0.0, target)
        return b.insert(arith.SelectOp(value, one, zero)).result
    if is_float_type(source) and is_float_type(target):
        wider = target.bitwidth > source.bitwidth
        op = arith.ExtFOp(value, target) if wider else arith.TruncFOp(value, target)
    elif is_float_type(source):
        op = arith.FPToSIOp(value, target)
    elif is_float_type(target):
        op = arith.SIToFPOp(value, target)
    elif _width(target) > _width(source):
        op = arith.ExtSIOp(value, target)
    else:
        op = arith.TruncIOp(value, target)
    return b.insert(op).result


def comparison(
    relation: str, mask: bool = False
) -> Callable[[Builder, SSAValue, SSAValue], SSAValue]:
    """The `i1` of `lhs <relation> rhs`; with `mask`, 1/0 in the operand type instead."""

    def body(b: Builder, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        flag = compare(b, lhs, rhs, relation)
        if not mask:
            return flag
        one = float_constant(b, 1.0, lhs.type)
        zero = float_constant(b, 0.0, lhs.type)
        return b.insert(arith.SelectOp(flag, one, zero)).result

    return body


def typed_body(
    float_op: type[Operation], int_op: type[Operation], bool_op: type[Operation] | None = None
) -> Callable[[Builder, SSAValue, SSAValue], SSAValue]:
    """A binary body choosing its arith op by the operand type (floats, integers, i1)."""

    def body(b: Builder, x: SSAValue, y: SSAValue) -> SSAValue:
        if is_float_type(x.type):
            op_type = float_op
        elif is_bool_type(x.type) and bool_op is not None:
            op_type = bool_op
        else:
            op_type = int_op
        return b.insert(op_type(x, y)).result

    return body


def result_type_of(op: Operation) -> TensorType:
    result_type = op.results[0].type
    assert isinstance(result_type, TensorType)
    return result_type


def unit_dims_map(source: Shape, result: Shape) -> AffineMap | None:
    """How a copy over `result`'s loops reads `source` when the two shapes differ only in
    dims of size 1 (`x[0]`, `x[..., -1]`, `x[:, None]`): each dim of `source` of size > 1
    is the loop of the matching dim of `result` (in order), each of size 1 the constant 0.
    None when the dims of size > 1 differ."""
    kept = [d for d, n in enumerate(result) if n != 1]
    if [n for n in source if n != 1] != [result[d] for d in kept]:
        return None
    loops = iter(kept)
    exprs = tuple(
        AffineExpr.constant(0) if n == 1 else AffineExpr.dimension(next(loops)) for n in source
    )
    return AffineMap(len(result), 0, exprs)


def copied_view(value: SSAValue) -> tuple[SSAValue, AffineMap] | None:
    """`(source, map)` when `value` is a view copy of a slice: the generic reversing a
    slice's dims (`tess.slice`) or dropping/adding its dims of size 1 (`tess.reshape` of a
    slice), which yields `source` read through `map` (loop dims, reversed loop dims and
    zeros, in order). tess-fuse fuses such copies into their consumers."""
    owner = value.owner
    if not isinstance(owner, GenericOp) or contract.ORIGIN.get(owner) not in (
        "tess.slice",
        "tess.reshape",
    ):
        return None
    yielded = owner.body.block.last_op
    maps = generic_maps(owner)
    if (
        yielded is None
        or tuple(yielded.operands) != (owner.body.block.args[0],)
        or not is_view_map(maps[0])
        or maps[-1] != AffineMap.identity(maps[-1].num_dims)
    ):
        return None
    source = owner.inputs[0]
    if contract.ORIGIN.get(owner) == "tess.reshape" and not is_slice_view(source):
        return None  # a one-element copy of a contiguous tensor (`single_element_copy`)
    return source, maps[0]


def is_slice_view(value: SSAValue) -> bool:
    """Whether `value` is a lowered `tess.slice`: a strided `tensor.extract_slice` view, or
    a view copy of one (`copied_view`)."""
    return isinstance(value.owner, tensor.ExtractSliceOp) or copied_view(value) is not None
