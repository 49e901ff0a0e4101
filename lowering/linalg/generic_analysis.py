"""
Analyses of `linalg.generic` ops on tensors (level 3), shared by the fusion passes.

`tess-fuse` decides what to merge from an op's pattern kind (TVM's FuseOps classes, read off
its iterators and indexing maps); `tess-fuse-epilogue` picks group roots by the same kind,
and both name ops in their reports by `labels` (`tess.fused`, else `tess.op`).
`tess-fuse-horizontal` refuses bodies that read captured tensors or loop indices;
`BodyFacts` keeps what the rules ask of a body so that a fusion pass carries it forward
instead of walking fused bodies again. An input map may read a loop backwards (`c - d`,
`is_view_map`: a reversed slice's copy), which keeps the op injective, never opaque; a
reduction's input may read a window (`o * s + k * d`, `is_window_map`: a conv or pool).
No IR is changed here.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp, YieldOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from tessc.dialects import contract
from tessc.dialects.tess import PatternKind


def body_fingerprint(block: Block) -> Hashable:
    """The body up to renaming: op names, properties, attributes, result types and how
    operands are wired (block argument k, result r of the j-th op, or an outside value)."""
    positions = {op: j for j, op in enumerate(block.ops)}

    def wire(value: SSAValue) -> Hashable:
        if isinstance(value, BlockArgument) and value.block is block:
            return ("arg", value.index)
        if isinstance(value, OpResult) and value.op in positions:
            return ("result", positions[value.op], value.index)
        return ("outside", value)

    return (
        tuple(arg.type for arg in block.args),
        tuple(
            (
                op.name,
                tuple(sorted(op.properties.items())),
                tuple(sorted(op.attributes.items())),
                tuple(wire(v) for v in op.operands),
                tuple(r.type for r in op.results),
            )
            for op in block.ops
        ),
    )


VIEW_OPS = (tensor.CollapseShapeOp, tensor.ExpandShapeOp)
"""Tensor ops that only reshape (injective, never fused into)."""


def generic_maps(op: GenericOp) -> list[AffineMap]:
    """The indexing maps of `op`, inputs first."""
    return [attr.data for attr in op.indexing_maps]


def is_reduction(op: LinalgStructuredOperation) -> bool:
    """Whether `op` has a reduction loop (on tensors or memrefs: the gpu passes ask too)."""
    return any(it.data == IteratorType.REDUCTION for it in op.get_iterator_types())


def copy_permutation(op: GenericOp) -> tuple[int, ...] | None:
    """`p` when `op` computes only `out[x] = in[x[p0], x[p1], ...]` (one input, one output,
    an identity output map, a permutation `p` of the loops, the identity included), else
    None: a transposing copy, on tensors or memrefs."""
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    body = op.body.block
    terminator = body.last_op
    if terminator is None or body.first_op is not terminator:
        return None
    if list(terminator.operands) != [body.args[0]]:
        return None
    in_map, out_map = generic_maps(op)
    if out_map != AffineMap.identity(out_map.num_dims) or in_map.num_symbols:
        return None
    positions = tuple(e.position for e in in_map.results if isinstance(e, AffineDimExpr))
    if len(positions) != in_map.num_dims or sorted(positions) != list(range(in_map.num_dims)):
        return None
    return positions


def is_permutation(m: AffineMap) -> bool:
    return len(m.results) == m.num_dims and m.is_projected_permutation()


def is_projection(m: AffineMap) -> bool:
    """Each result is a distinct loop dim or the constant 0 (a broadcast, permute or copy)."""
    dims = [r.position for r in m.results if isinstance(r, AffineDimExpr)]
    zeros = [r for r in m.results if isinstance(r, AffineConstantExpr) and r.value == 0]
    return (
        not m.num_symbols
        and len(dims) + len(zeros) == len(m.results)
        and len(set(dims)) == len(dims)
    )


def reversed_dim(expr: AffineExpr) -> int | None:
    """The loop `d` of `c - d` (`d * -1 + c`, or `d * -1` for c = 0): a dim a reversed
    slice reads backwards (`x[::-1]`), else None."""
    if (
        isinstance(expr, AffineBinaryOpExpr)
        and expr.kind == AffineBinaryOpKind.Add
        and isinstance(expr.rhs, AffineConstantExpr)
    ):
        expr = expr.lhs
    if (
        isinstance(expr, AffineBinaryOpExpr)
        and expr.kind == AffineBinaryOpKind.Mul
        and isinstance(expr.lhs, AffineDimExpr)
        and expr.rhs == AffineConstantExpr(-1)
    ):
        return expr.lhs.position
    return None


def is_view_map(m: AffineMap) -> bool:
    """A projection (see `is_projection`) in which some loop dims may be read backwards
    (`c - d`): how a consumer reads a reversed slice once `tess-fuse` has fused the slice's
    copy into it. Only input maps take this form; every loop stays given by a plain dim of
    some operand (the outputs'), so loop extents are still inferred from shapes."""
    dims: list[int] = []
    for r in m.results:
        if isinstance(r, AffineDimExpr):
            dims.append(r.position)
        elif (d := reversed_dim(r)) is not None:
            dims.append(d)
        elif not (isinstance(r, AffineConstantExpr) and r.value == 0):
            return False
    return not m.num_symbols and len(set(dims)) == len(dims)


def _window_dims(expr: AffineExpr) -> list[int] | None:
    """The loops of `d0 * s + d1 * t + ...` (positive coefficients), else None."""
    if isinstance(expr, AffineDimExpr):
        return [expr.position]
    if isinstance(expr, AffineBinaryOpExpr):
        if expr.kind == AffineBinaryOpKind.Add:
            lhs, rhs = _window_dims(expr.lhs), _window_dims(expr.rhs)
            return None if lhs is None or rhs is None else [*lhs, *rhs]
        if (
            expr.kind == AffineBinaryOpKind.Mul
            and isinstance(expr.rhs, AffineConstantExpr)
            and expr.rhs.value > 0
        ):
            return _window_dims(expr.lhs)
    return None


def is_window_map(m: AffineMap) -> bool:
    """A view map (`is_view_map`) whose results may also be sums of scaled loops, each loop
    read once (`o * s + k * d`): a convolution's or pooling's input, a contraction's
    operand for `pattern_kind`."""
    dims: list[int] = []
    for r in m.results:
        if isinstance(r, AffineConstantExpr) and r.value == 0:
            continue
        window = _window_dims(r)
        if window is None:
            return False
        dims.extend(window)
    return not m.num_symbols and len(set(dims)) == len(dims)


def reads_backwards(m: AffineMap) -> bool:
    """Whether the view map `m` reads some loop dim backwards."""
    return any(reversed_dim(r) is not None for r in m.results)


def splat_value(op: Operation) -> float | None:
    """The element of an `arith.constant` splat tensor, else None."""
    if not isinstance(op, arith.ConstantOp) or not isinstance(op.value, DenseIntOrFPElementsAttr):
        return None
    raw, size = op.value.data.data, op.value.get_element_type().compile_time_size
    if not raw or raw != raw[:size] * (len(raw) // size):  # bytes: fast on big constants
        return None
    return float(next(iter(op.value.iter_values())))


def reads_captured(op: GenericOp) -> bool:
    """Whether the body reads a tensor the generic captures (a gather's `tensor.extract`):
    data-dependent accesses no indexing map describes."""
    return any(isinstance(nested, tensor.ExtractOp) for nested in op.body.walk())


def reads_loop_indices(op: GenericOp) -> bool:
    return any(isinstance(nested, IndexOp) for nested in op.body.walk())


def pattern_kind(op: Operation, *, captured: bool | None = None) -> PatternKind:
    """TVM's FuseOps class of `op`, read off its iterators and indexing maps. `captured`,
    if known, is `reads_captured(op)` (the only question that walks the body)."""
    if isinstance(op, FillOp) or splat_value(op) is not None:
        return PatternKind.ELEMENTWISE
    if isinstance(op, VIEW_OPS):
        return PatternKind.INJECTIVE
    if not isinstance(op, GenericOp):
        return PatternKind.OPAQUE
    if reads_captured(op) if captured is None else captured:
        return PatternKind.OPAQUE
    maps = generic_maps(op)
    n_inputs = len(op.inputs)
    inputs, out_maps = maps[:n_inputs], maps[n_inputs:]
    if not all(is_projection(m) for m in out_maps):
        return PatternKind.OPAQUE
    if not all(is_view_map(m) for m in inputs):
        # Windows (a conv's `o * s + k * d`) are read by contractions and reductions only.
        if not is_reduction(op) or not all(is_window_map(m) for m in inputs):
            return PatternKind.OPAQUE
    if is_reduction(op):
        # A contraction (matmul-like) reduces two inputs that each carry a parallel dim the
        # other lacks, as (i,k) and (k,j) do; anything else is a plain reduction.
        reduced = {d for d, it in enumerate(op.iterator_types) if it.data == IteratorType.REDUCTION}
        kept = [m.used_dims() - reduced for m in maps[:n_inputs] if reduced & m.used_dims()]
        contraction = any(not a <= b and not b <= a for a in kept for b in kept)
        return PatternKind.MATMUL if contraction else PatternKind.REDUCTION
    if not all(is_permutation(m) for m in out_maps):
        return PatternKind.OPAQUE
    if any(reads_backwards(m) for m in inputs):
        return PatternKind.INJECTIVE  # a reversed slice's copy, or what it fused into
    if all(m == AffineMap.identity(m.num_dims) for m in maps):
        return PatternKind.ELEMENTWISE
    in_order = all(
        [r.position for r in m.results if isinstance(r, AffineDimExpr)]
        == sorted(r.position for r in m.results if isinstance(r, AffineDimExpr))
        for m in maps
    )
    return PatternKind.BROADCAST if in_order else PatternKind.INJECTIVE


def body_ops(op: GenericOp) -> list[Operation]:
    """The body ops that compute something (no constants, no yield)."""
    return [o for o in op.body.block.ops if not isinstance(o, arith.ConstantOp | YieldOp)]


# Ops that are not worth recomputing: transcendental functions and divisions. Everything
# else in `math` is a cheap bit/rounding operation.
_CHEAP_MATH_OPS = frozenset(
    {"math.absf", "math.copysign", "math.fma", "math.floor", "math.ceil", "math.round",
     "math.roundeven", "math.trunc"}
)  # fmt: skip
_EXPENSIVE_ARITH_OPS = frozenset({"arith.divf", "arith.remf"})


def _is_expensive(op: Operation) -> bool:
    math_op = op.name.startswith("math.") and op.name not in _CHEAP_MATH_OPS
    return math_op or op.name in _EXPENSIVE_ARITH_OPS


def producer_cost(op: Operation) -> tuple[int, bool]:
    """(number of arithmetic ops per element, whether any is expensive)."""
    if not isinstance(op, GenericOp):
        return 0, False
    payload = body_ops(op)
    return len(payload), any(_is_expensive(o) for o in payload)


_EXACT_CONVERSIONS = frozenset({"arith.extf", "arith.bitcast"})
"""Conversions that widen exactly or reinterpret (a bf16 read as the f32 it is)."""


def only_converts(op: Operation) -> bool:
    """Whether `op` is a generic whose body only converts its input (`_EXACT_CONVERSIONS`)."""
    payload = body_ops(op) if isinstance(op, GenericOp) else []
    return bool(payload) and all(o.name in _EXACT_CONVERSIONS for o in payload)


@dataclass(frozen=True)
class BodyFacts:
    """What the fusion rules ask of a generic's body: its cost (`producer_cost`), whether
    it reads a captured tensor (`reads_captured`) or its loop indices (`reads_loop_indices`).
    A fused body is the producer's (once per distinct transform) plus the consumer's, so
    its facts follow from theirs without walking it: fusing a chain of n ops stays O(n)."""

    cost: int
    expensive: bool
    captured: bool
    indexed: bool
    converts: bool = False
    """The body only converts (`only_converts`): it costs its conversions on its own (it
    is no free copy), nothing once inlined beside arithmetic, as the load it follows, so
    that a widened bf16 operand leaves the fusion decisions of its f32 twin unchanged."""

    @staticmethod
    def of(op: GenericOp) -> BodyFacts:
        cost, expensive = producer_cost(op)
        return BodyFacts(
            cost, expensive, reads_captured(op), reads_loop_indices(op), only_converts(op)
        )

    def with_inlined(self, producer: BodyFacts, copies: int) -> BodyFacts:
        """The facts of this body with `copies` copies of `producer`'s body inlined."""
        added = 0 if producer.converts and not self.converts else copies * producer.cost
        return BodyFacts(
            self.cost + added,
            self.expensive or producer.expensive,
            self.captured or producer.captured,
            self.indexed or producer.indexed,
            self.converts and producer.converts,
        )


@dataclass
class FactsCache:
    """Body facts and pattern kinds by op. An entry stays valid while its op's body and
    indexing maps are unchanged: tess-fuse replaces the ops it fuses rather than changing
    them, and forgets them."""

    bodies: dict[Operation, BodyFacts] = field(default_factory=dict[Operation, BodyFacts])
    kinds: dict[Operation, PatternKind] = field(default_factory=dict[Operation, PatternKind])

    def forget(self, op: Operation) -> None:
        self.bodies.pop(op, None)
        self.kinds.pop(op, None)


def cached_facts(op: GenericOp, cache: FactsCache | None) -> BodyFacts:
    """`op`'s body facts, from `cache` if it has them (then kept there)."""
    if cache is None:
        return BodyFacts.of(op)
    facts = cache.bodies.get(op)
    if facts is None:
        facts = cache.bodies[op] = BodyFacts.of(op)
    return facts


def cached_kind(op: Operation, cache: FactsCache | None) -> PatternKind:
    """`pattern_kind(op)`, from `cache` if it has it (then kept there); a generic's body is
    walked only for its facts (`cached_facts`)."""
    kind = cache.kinds.get(op) if cache is not None else None
    if kind is None:
        captured = cached_facts(op, cache).captured if isinstance(op, GenericOp) else None
        kind = pattern_kind(op, captured=captured)
        if cache is not None:
            cache.kinds[op] = kind
    return kind


def labels(op: Operation) -> list[str]:
    """What `op` stands for in `tess.fused`: the ops already merged into it, else its origin."""
    fused = contract.FUSED.get(op)
    if fused is not None:
        return fused
    origin = contract.ORIGIN.get(op)
    if origin is not None:
        return [origin]
    if isinstance(op, GenericOp) and (payload := body_ops(op)):
        return ["+".join(o.name for o in payload)]
    if isinstance(op, GenericOp):  # no arithmetic: it yields an input or a constant
        yielded = op.body.block.last_op.operands if op.body.block.last_op else ()
        return [
            "linalg.copy" if any(isinstance(v, BlockArgument) for v in yielded) else "linalg.fill"
        ]
    return [op.name]


__all__ = [
    "VIEW_OPS",
    "BodyFacts",
    "FactsCache",
    "body_fingerprint",
    "body_ops",
    "cached_facts",
    "generic_maps",
    "is_permutation",
    "is_projection",
    "is_view_map",
    "is_reduction",
    "labels",
    "pattern_kind",
    "producer_cost",
    "reads_backwards",
    "reads_captured",
    "reads_loop_indices",
    "reversed_dim",
    "splat_value",
]


def depends_on(value: SSAValue, root: SSAValue) -> bool:
    """Whether `value` is computed from `root` (through ops without regions)."""
    owner = value.owner
    return value is root or (
        isinstance(owner, Operation) and any(depends_on(v, root) for v in owner.operands)
    )
