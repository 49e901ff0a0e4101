"""
The `micro` dialect: register-tile micro-kernels at the loop level (level 5).

`tess-pack-matmul` copies blocks of a contraction's operands into packed panels and leaves
the inner product of two panels to one op:

    micro.mma %ap[%a], %bp[%b], %kc, %out[%i, %j], %accumulate {rows = 8 : i64, cols = 32 : i64,
        lanes = 16 : i64} : memref<24576xf32>, memref<65536xf32>, memref<512x512xf32>

    out[.., i + r, j + c] = (out[.., i + r, j + c] if accumulate else 0)
                            + sum over k < kc of  ap[a + k * rows + r] * bp[b + k * cols + c]
                                                  for r < rows, c < cols

(`accumulate` an i1: false for a contraction's first k block, so its output needs no zero
fill and is not read).

    %threads = micro.num_threads

is the number of threads the function's parallel loops run on at the time of the call
(Numba's `get_num_threads()` in a parallel kernel, 1 in a serial one): `tess-pack-matmul`
gives each thread one iteration of its parallel loop, with its own packed panels, so the
threads never wait for each other within a call. A program is correct for any value >= 1.

`ap` holds an MR-tall micro-panel of the left-hand side (`rows` values per k step),
`bp` an NR-wide micro-panel of the right-hand side (`cols` values per k step), both
contiguous. With `strides = array<i64: sr, sk, skb>` the panels are read where they lie
instead, any identity-layout memrefs with the offsets counted in elements (or views of
static strides, counted from the view's first element):

    sum over k < kc of  ap[a + r * sr + k * sk] * bp[b + k * skb + c]

(packed panels are the case `sr = 1, sk = rows, skb = cols`): a small product whose
operands sit in cache skips the copies (`tess-pack-matmul`). `out` is read once and
written once, its last dim unit-stride and the tile's rows a row stride apart. The code
generator emits it as one loop whose `rows x cols / lanes` vector accumulators stay in
registers across all `kc` steps (`lanes`: elements per vector register of the target;
`cols` is a multiple). Numba does not vectorise an
output-stationary tile written as scalar code, and MLIR's `vector` dialect has no Numba
translation, hence this op.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


def _flat_or_strided(typ: MemRefType, strided: bool) -> bool:
    """Identity layout, or (`strided`: operands read where they lie) static strides."""
    if isinstance(typ.layout, NoneAttr):
        return True
    if not strided or not isinstance(typ.layout, StridedLayoutAttr):
        return False
    return all(isinstance(step, int) for step in typ.layout.get_strides())


@irdl_op_definition
class MmaOp(IRDLOperation):
    """`acc[indices..][r, c] (+)= lhs-panel x rhs-panel` over `depth` k steps (module
    docstring)."""

    name = "micro.mma"

    lhs = operand_def(MemRefType)
    lhs_offset = operand_def(IndexType)
    rhs = operand_def(MemRefType)
    rhs_offset = operand_def(IndexType)
    depth = operand_def(IndexType)
    acc = operand_def(MemRefType)
    acc_indices = var_operand_def(IndexType)
    accumulate = operand_def(IntegerType(1))

    rows = attr_def(IntegerAttr)
    cols = attr_def(IntegerAttr)
    lanes = attr_def(IntegerAttr)
    strides = opt_attr_def(DenseArrayBase)  # (sr, sk, skb); packed panels when absent

    assembly_format = (
        "$lhs `[` $lhs_offset `]` `,` $rhs `[` $rhs_offset `]` `,` $depth `,` "
        "$acc `[` $acc_indices `]` `,` $accumulate attr-dict `:` type($lhs) `,` type($rhs) `,` "
        "type($acc)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        lhs_offset: SSAValue,
        rhs: SSAValue,
        rhs_offset: SSAValue,
        depth: SSAValue,
        acc: SSAValue,
        acc_indices: Sequence[SSAValue],
        accumulate: SSAValue,
        tile: tuple[int, int, int],
        strides: tuple[int, int, int] | None = None,
    ):
        rows, cols, lanes = (IntegerAttr(v, i64) for v in tile)
        attributes: dict[str, Attribute] = {"rows": rows, "cols": cols, "lanes": lanes}
        if strides is not None:
            attributes["strides"] = DenseArrayBase.from_list(i64, strides)
        super().__init__(
            operands=[lhs, lhs_offset, rhs, rhs_offset, depth, acc, acc_indices, accumulate],
            attributes=attributes,
        )

    @property
    def tile(self) -> tuple[int, int, int]:
        """(rows, cols, lanes)."""
        return self.rows.value.data, self.cols.value.data, self.lanes.value.data

    @property
    def layout(self) -> tuple[int, int, int]:
        """(sr, sk, skb): the element strides of a row and a k step of the left-hand
        operand and of a k step of the right-hand one (module docstring)."""
        if self.strides is None:
            rows, cols, _ = self.tile
            return 1, rows, cols
        return tuple(self.strides.get_values())  # type: ignore[return-value]

    def verify_(self) -> None:
        types: list[Attribute] = [self.lhs.type, self.rhs.type, self.acc.type]
        lhs, rhs, acc = (t for t in types if isinstance(t, MemRefType))
        if self.strides is None and (len(lhs.get_shape()) != 1 or len(rhs.get_shape()) != 1):
            raise VerifyException("'micro.mma' panels must be 1-d memrefs")
        if not all(_flat_or_strided(t, self.strides is not None) for t in (lhs, rhs)):
            raise VerifyException("'micro.mma' operands must have the identity layout")
        if self.strides is not None and (len(self.layout) != 3 or min(self.layout) < 1):
            raise VerifyException("'micro.mma' strides are three positive element counts")
        element = acc.element_type
        if not isinstance(element, Float32Type | Float64Type):
            raise VerifyException(f"'micro.mma' accumulates f32 or f64, not {element}")
        if lhs.element_type != element or rhs.element_type != element:
            raise VerifyException("'micro.mma' panels and accumulator differ in element type")
        if len(acc.get_shape()) < 2 or len(self.acc_indices) != len(acc.get_shape()):
            raise VerifyException("'micro.mma' needs a rank >= 2 accumulator, one index per dim")
        if not isinstance(acc.layout, NoneAttr):
            raise VerifyException("'micro.mma' accumulator must have the identity layout")
        rows, cols, lanes = self.tile
        if min(rows, cols, lanes) < 1 or cols % lanes:
            raise VerifyException(
                f"'micro.mma' tile {rows}x{cols} needs cols a multiple of lanes ({lanes})"
            )


@irdl_op_definition
class NumThreadsOp(IRDLOperation):
    """The number of threads parallel loops run on in this call (module docstring)."""

    name = "micro.num_threads"

    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__(result_types=[IndexType()])


Micro = Dialect("micro", [MmaOp, NumThreadsOp])

__all__ = ["Micro", "MmaOp", "NumThreadsOp"]
