"""
The `tess` dialect: value-semantics tensor operations with NumPy/minitorch broadcasting.

`tess` is the top level of tessc. Every op works on builtin `tensor<...>` types with static
shapes, of `f32`/`f64` (floats), `i32`/`i64` (integers) or `i1` (bool); which element types
an op takes is its `ELEMENTS` class (floats only for the transcendental maps, division,
`pow`, `mean` and `matmul`; numbers for `add sub mul max min neg abs sum reduce_max`; any
for the shape ops, `fill` and `select`'s values). Operands and results share one element
type except where an op says otherwise (comparisons, `select`'s condition, `cast`). Every
op's verifier infers its result shape and checks it against the declared one, so a shape
error is a located diagnostic rather than a wrong answer later.

The op families follow minitorch:

- map (unary, elementwise): `neg exp log relu sigmoid tanh sqrt reciprocal abs sin cos erf
  floor ceil round`;
- zip (binary, broadcasting): `add sub mul div max min pow` and the comparisons
  `lt gt eq`, whose result is `i1` (a bool tensor, what the front builds) or 0/1 in the
  operand dtype (a mask, what the VJP rules multiply with);
- `cast`: elementwise conversion between any two element types (NumPy's `astype`);
- reduce: `sum max mean prod` over a list of dims, keeping them as size 1 with `keepdim`;
- shape: `reshape` (a view), `permute`, `broadcast_to`, `fill` (a splat constant);
- `select` (where), broadcasting its three operands;
- `matmul`: 2-D and batched, broadcasting over the batch dims.

Broadcasting follows the three seed rules: a size-1 dim broadcasts with anything, a shorter
shape is padded with leading 1s, and everything else must match.

Indexing ops (gather, one-hot, arg-reductions, slices, concatenation) live in
`tessc.dialects.tess_index`, the convolution ops (pad, conv, pool, unpool) in
`tessc.dialects.tess_conv`, registered in the same `Tess` dialect.

Each op carries a `PATTERN_KIND` (TVM's FuseOps classification) for the fusion passes.
xDSL has no tensor dialect with implicit broadcasting, hence this one.

This module is the dialect's namespace (`tess.AddOp`, `tess.tensor_shape`, `tess.Tess`):
the ops are defined by family in `tess_elementwise.py` (map, zip, cast) and
`tess_structured.py` (reduce, shape ops, fill, select, matmul), on the shape rules and the
`TessOp` base of `tess_base.py`.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from tessc.dialects.tess_base import (
    Elements,
    PatternKind,
    Shape,
    TessOp,
    broadcast_shapes,
    element_type_of,
    format_shape,
    is_float,
    matmul_shape,
    reduced_shape,
    tensor_shape,
)
from tessc.dialects.tess_elementwise import (
    AbsOp,
    AddOp,
    BinaryOp,
    BitcastOp,
    CastOp,
    CeilOp,
    CompareOp,
    CosOp,
    DivOp,
    EqOp,
    ErfOp,
    ExpOp,
    FloorOp,
    GtOp,
    IotaOp,
    LogOp,
    LtOp,
    MaxOp,
    MinOp,
    MulOp,
    NegOp,
    OrOp,
    PowOp,
    ReciprocalOp,
    ReluOp,
    RoundOp,
    ShLOp,
    ShRUOp,
    SigmoidOp,
    SinOp,
    SqrtOp,
    StopGradientOp,
    SubOp,
    TanhOp,
    UnaryOp,
    XOrOp,
)
from tessc.dialects.tess_structured import (
    BroadcastToOp,
    FillOp,
    MatmulOp,
    MeanOp,
    PermuteOp,
    ProdOp,
    ReduceMaxOp,
    ReduceOp,
    ReshapeOp,
    SelectOp,
    SumOp,
)

UNARY_OPS: tuple[type[UnaryOp], ...] = (
    NegOp, ExpOp, LogOp, ReluOp, SigmoidOp, TanhOp, SqrtOp, ReciprocalOp, AbsOp, SinOp, CosOp,
    ErfOp, FloorOp, CeilOp, RoundOp,
)  # fmt: skip
BINARY_OPS: tuple[type[BinaryOp], ...] = (
    AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, LtOp, GtOp, EqOp,
)  # fmt: skip
BITWISE_OPS: tuple[type[BinaryOp], ...] = (XOrOp, OrOp, ShLOp, ShRUOp)
COMPARE_OPS: tuple[type[CompareOp], ...] = (LtOp, GtOp, EqOp)
REDUCE_OPS: tuple[type[ReduceOp], ...] = (SumOp, ReduceMaxOp, MeanOp)

CORE_OPS: tuple[type[TessOp], ...] = (
    *UNARY_OPS, *BINARY_OPS, *REDUCE_OPS,
    ReshapeOp, PermuteOp, BroadcastToOp, FillOp, SelectOp, MatmulOp, CastOp, StopGradientOp,
    BitcastOp,
    *BITWISE_OPS, IotaOp,  # not in BINARY_OPS: random programs keep to float arithmetic
    ProdOp,  # not in REDUCE_OPS: random programs keep to sums, means and maxima
)  # fmt: skip


def __getattr__(name: str) -> Dialect:
    """`Tess`, the dialect, with the ops of `tessc.dialects.tess_index` too: built on first
    use (PEP 562), so that importing `tess` does not import `tess_index`."""
    if name != "Tess":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tessc.dialects.tess_attention import ATTENTION_OPS
    from tessc.dialects.tess_conv import CONV_OPS
    from tessc.dialects.tess_index import INDEX_OPS

    dialect = Dialect("tess", [*CORE_OPS, *INDEX_OPS, *CONV_OPS, *ATTENTION_OPS])
    globals()["Tess"] = dialect
    return dialect


__all__ = [
    "BITWISE_OPS",
    "IotaOp",
    "ShRUOp",
    "ShLOp",
    "OrOp",
    "XOrOp",
    "Tess",  # noqa: F822 (made on first use by the module's __getattr__)
    "AbsOp",
    "AddOp",
    "BINARY_OPS",
    "BinaryOp",
    "BitcastOp",
    "broadcast_shapes",
    "BroadcastToOp",
    "CastOp",
    "CeilOp",
    "COMPARE_OPS",
    "CompareOp",
    "CORE_OPS",
    "CosOp",
    "DivOp",
    "element_type_of",
    "Elements",
    "EqOp",
    "ErfOp",
    "ExpOp",
    "FillOp",
    "FloorOp",
    "format_shape",
    "GtOp",
    "is_float",
    "LogOp",
    "LtOp",
    "matmul_shape",
    "MatmulOp",
    "MaxOp",
    "MeanOp",
    "MinOp",
    "MulOp",
    "NegOp",
    "PatternKind",
    "PermuteOp",
    "PowOp",
    "ProdOp",
    "ReciprocalOp",
    "REDUCE_OPS",
    "reduced_shape",
    "ReduceMaxOp",
    "ReduceOp",
    "ReluOp",
    "RoundOp",
    "ReshapeOp",
    "SelectOp",
    "Shape",
    "SigmoidOp",
    "SinOp",
    "SqrtOp",
    "StopGradientOp",
    "SubOp",
    "SumOp",
    "TanhOp",
    "tensor_shape",
    "TessOp",
    "UNARY_OPS",
    "UnaryOp",
]
