"""
The match shared by `tess-conv-tiles`' two forms (direct, im2col): a convolution's row
kernel `out[n, f, o] += x[n, c, o*s + k*d] * w[f, c, k]` as `tess-linalg-to-loops` makes it
of `tess.conv` (the parallel loop over `(n, f, o...)`, its zero fill and epilogue segments,
the contraction over `(c, k..., o_s)`), with the weight's layout read from its load's
indices (a permuted or reversed view, as a transposed convolution reads it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    i64,
)
from xdsl.ir import Operation, SSAValue

from tessc.dialects import contract
from tessc.lowering.loops.contraction_match import Contraction, RowSegment, match_row_kernel
from tessc.lowering.loops.index_values import constant_int
from tessc.lowering.loops.trip_counts import unit_loop_bound

Linear = dict[SSAValue | None, int]  # loop index -> coefficient; None: the constant


def linear(value: SSAValue) -> Linear | None:
    """`value` as a sum of block arguments times constants, if it is one."""
    if (c := constant_int(value)) is not None:
        return {None: c}
    owner = value.owner
    if isinstance(owner, arith.AddiOp):
        lhs, rhs = linear(owner.lhs), linear(owner.rhs)
        if lhs is None or rhs is None:
            return None
        return {k: lhs.get(k, 0) + rhs.get(k, 0) for k in lhs.keys() | rhs.keys()}
    if isinstance(owner, arith.MuliOp):
        lhs, rhs = linear(owner.lhs), linear(owner.rhs)
        if lhs is None or rhs is None:
            return None
        if set(rhs) == {None}:
            lhs, rhs = rhs, lhs
        if set(lhs) != {None}:
            return None
        return {k: lhs[None] * v for k, v in rhs.items()}
    if isinstance(value.type, IndexType) and not isinstance(owner, Operation):
        return {value: 1}
    return None


@dataclass(frozen=True)
class ConvNest:
    """A matched conv row kernel: `out[n, f, o] += x[n, c, o*s + k*d] * w[f, c, k]`, the
    parallel loop over `(n, f, o_1..o_{s-1})` and the contraction's loops over `(c, k...,
    o_s)`; `rows` the parallel indices of `(n, f, o_1..)`, None where a unit dim has none."""

    parallel: scf.ParallelOp
    rows: tuple[SSAValue | None, ...]
    invariant_ops: tuple[Operation, ...]
    before: tuple[Operation, ...]
    after: tuple[Operation, ...]
    out: SSAValue
    x: SSAValue
    w: SSAValue
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    taps: tuple[int, ...]
    weight: WeightLayout
    store: memref.StoreOp  # the contraction's `out[n, f, o] = ...`

    @property
    def out_shape(self) -> tuple[int, ...]:
        return _shape(self.out)

    @property
    def depth(self) -> int:
        return _shape(self.x)[1]


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def _plain(value: SSAValue, strided: bool = False) -> bool:
    """A float memref of positive extents, row-major (or, if `strided`, of any static
    strides: the kernel receives the view, its data at the view's first element)."""
    typ = value.type
    if not isinstance(typ, MemRefType):
        return False
    layout = typ.layout
    if strided and isinstance(layout, StridedLayoutAttr):
        steps = layout.get_strides()
        laid_out = all(isinstance(step, int) and step >= 0 for step in steps)
    else:
        laid_out = isinstance(layout, NoneAttr)
    return (
        laid_out
        and all(d > 0 for d in typ.get_shape())
        and isinstance(typ.element_type, Float32Type | Float64Type)
    )


def _operands(contraction: Contraction) -> tuple[memref.LoadOp, ...] | None:
    """The out, x and w loads of the j loop's `out = out + x * w`, in that order."""
    body = list(contraction.j_loop.body.block.ops)[:-1]
    stores = [o for o in body if isinstance(o, memref.StoreOp)]
    loads = [o for o in body if isinstance(o, memref.LoadOp)]
    if len(stores) != 1 or len(loads) != 3:
        return None
    if any(
        not isinstance(o, memref.LoadOp | memref.StoreOp | arith.MulfOp | arith.AddfOp)
        and not isinstance(o, arith.AddiOp | arith.MuliOp | arith.ConstantOp)
        for o in body
    ):
        return None
    total = stores[0].value.owner
    if not isinstance(total, arith.AddfOp):
        return None
    acc = [o for o in loads if o.memref is stores[0].memref]
    if len(acc) != 1 or acc[0].res not in (total.lhs, total.rhs):
        return None
    product = (total.rhs if total.lhs is acc[0].res else total.lhs).owner
    if not isinstance(product, arith.MulfOp):
        return None
    factors = [o for o in loads if o is not acc[0]]
    if {product.lhs, product.rhs} != {f.res for f in factors}:
        return None
    return acc[0], factors[0], factors[1]


def _roles(
    indices: Sequence[SSAValue], shape: Sequence[int], pool: set[SSAValue], zero: set[SSAValue]
) -> list[SSAValue | None] | None:
    """Each index as a loop index of `pool`, or None for the 0 of a unit dim (a constant
    or the index of a loop of one trip, in `zero`)."""
    roles: list[SSAValue | None] = []
    for index, extent in zip(indices, shape, strict=True):
        if index in pool:
            roles.append(index)
        elif (constant_int(index) == 0 or index in zero) and extent == 1:
            roles.append(None)
        else:
            return None
    return roles


def _window(
    index: SSAValue, o: SSAValue | None, zero: set[SSAValue]
) -> tuple[int, int, SSAValue | None] | None:
    """(stride, dilation, tap index) if `index` is `o * stride + k * dilation` (a unit
    loop, or no tap index: 1)."""
    form = linear(index)
    if form is None or form.get(None, 0) != 0:
        return None
    form = {v: n for v, n in form.items() if n and v not in zero and v is not None}
    stride = form.pop(o, 0) if o is not None else 1
    if len(form) > 1 or stride < 1 or (form and min(form.values()) < 1):
        return None
    k, dilation = next(iter(form.items()), (None, 1))
    return stride, dilation, k


def match_conv(op: scf.ParallelOp) -> ConvNest | None:
    """The conv row kernel rooted at `op`, if it is one (module docstring)."""
    if contract.REGISTER_TILE.has(op) or (kernel := match_row_kernel(op)) is None:
        return None
    members = kernel.members
    positions = [i for i, m in enumerate(members) if isinstance(m, Contraction)]
    if len(positions) != 1:
        return None
    contraction = members[positions[0]]
    assert isinstance(contraction, Contraction)
    parallel_args = set(op.body.block.args)
    loop_ivs = [
        lp.body.block.args[0]
        for lp in (*contraction.outer_loops, contraction.k_loop, contraction.j_loop)
    ]
    j = loop_ivs[-1]
    loops = (*contraction.outer_loops, contraction.k_loop)
    zero = {lp.body.block.args[0] for lp in loops if unit_loop_bound(lp.lb, lp.ub, lp.step) == 1}
    if (found := _operands(contraction)) is None:
        return None
    acc, *factors = found
    if not all(_plain(load.memref, strided=True) for load in found):
        return None
    out_shape = _shape(acc.memref)
    spatial = len(out_shape) - 2
    acc_indices = tuple(acc.indices)
    if spatial < 1 or acc_indices[-1] is not j:
        return None
    rows = _roles(acc_indices[:-1], out_shape[:-1], parallel_args, zero)
    if rows is None or set(rows) - {None} != parallel_args:
        return None
    outputs = (*rows[2:], j)
    reduced = set(loop_ivs[:-1]) - zero
    trips = {lp.body.block.args[0]: unit_loop_bound(lp.lb, lp.ub, lp.step) or 0 for lp in loops}
    for x, w in (factors, factors[::-1]):
        if not _plain(acc.memref) or not _plain(x.memref):  # only the weight may be a view
            continue
        x_shape = _shape(x.memref)
        x_indices = tuple(x.indices)
        if len(x_shape) != spatial + 2 or x_shape[0] != out_shape[0]:
            continue
        if _roles(x_indices[:1], x_shape[:1], parallel_args, zero) != [rows[0]]:
            continue
        if (c := x_indices[1]) not in reduced:
            continue
        windows = [_window(index, o, zero) for index, o in zip(x_indices[2:], outputs, strict=True)]
        if any(window is None for window in windows) or None in windows:
            continue
        taps = [window[2] for window in windows if window is not None]
        if {c, *taps} - {None} != reduced or len(reduced) != 1 + len(set(taps) - {None}):
            continue
        extents = tuple(trips[k] if k is not None else 1 for k in taps)
        layout = _weight_layout(w, rows[1], out_shape[1], c, x_shape[1], taps, extents, zero)
        if layout is None:
            continue
        before = members[: positions[0]]
        after = members[positions[0] + 1 :]
        return ConvNest(
            op,
            tuple(rows),
            kernel.invariant_ops,
            tuple(o for m in before if isinstance(m, RowSegment) for o in m.ops),
            tuple(o for m in after if isinstance(m, RowSegment) for o in m.ops),
            acc.memref,
            x.memref,
            w.memref,
            tuple(window[0] for window in windows if window is not None),
            tuple(window[1] for window in windows if window is not None),
            extents,
            layout,
            next(o for o in contraction.j_loop.body.block.ops if isinstance(o, memref.StoreOp)),
        )
    return None


@dataclass(frozen=True)
class WeightLayout:
    """Where the weight `w[f, c, k...]` lies in its memref (a permuted or reversed view
    of it, as a transposed convolution reads it): element strides of a filter and of a
    channel, the offset of tap 0 and the signed step of each tap dim."""

    filter_stride: int
    channel_stride: int
    origin: int
    tap_steps: tuple[int, ...]


def _weight_layout(
    w: memref.LoadOp,
    f: SSAValue | None,
    features: int,
    c: SSAValue,
    channels: int,
    taps: Sequence[SSAValue | None],
    extents: Sequence[int],
    zero: set[SSAValue],
) -> WeightLayout | None:
    """The layout of `w`'s load if each index is the filter, the channel, a tap (forward or
    reversed: `K - 1 - k`) or the 0 of a unit dim, each found once."""
    shape, strides = _shape(w.memref), strides_of(w.memref)
    found: dict[str, int] = {}
    origin, steps = 0, [0] * len(taps)
    for index, extent, stride in zip(w.indices, shape, strides, strict=True):
        form = linear(index)
        if form is None:
            return None
        form = {v: n for v, n in form.items() if n and v not in zero}
        if not form and extent == 1:
            continue
        if f is not None and form == {f: 1} and extent == features:
            role = "f"
        elif form == {c: 1} and extent == channels:
            role = "c"
        else:
            matches = [
                (i, n) for i, k in enumerate(taps)
                if k is not None and extent == extents[i]
                and form in ({k: 1}, {k: -1, None: extents[i] - 1})
                for n in [form[k]]
            ]  # fmt: skip
            if len(matches) != 1:
                return None
            i, sign = matches[0]
            role = f"k{i}"
            steps[i] = sign * stride
            origin += 0 if sign > 0 else (extent - 1) * stride
        if role in found:
            return None
        found[role] = stride
    wanted = {"c", *(f"k{i}" for i, k in enumerate(taps) if k is not None)}
    if f is not None:
        wanted.add("f")
    if set(found) != wanted:
        return None
    return WeightLayout(found.get("f", 1), found["c"], origin, tuple(steps))


def column_tiles(cols: int, width: int, lanes: int) -> list[tuple[int, int, int]]:
    """(first column, columns, lanes) of the tiles covering `cols` output columns: tiles of
    `width`, then one of the whole vectors left, then one vector as wide as the rest."""
    tiles = [(start, width, lanes) for start in range(0, cols - width + 1, width)]
    done = len(tiles) * width
    if (whole := (cols - done) // lanes * lanes) > 0:
        tiles.append((done, whole, lanes))
        done += whole
    if cols > done:
        tiles.append((done, cols - done, cols - done))
    return tiles


def strides_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    strides = value.type.get_strides()
    assert strides is not None
    return tuple(strides)


def output_rows(nest: ConvNest) -> tuple[list[Operation], SSAValue]:
    """The output in (N, F, prod O) form, where the tiles' rows are filters a row stride
    apart: a collapsing view (for 2+ spatial dims) and the value to address.

    The caller puts the view inside its parallel loop's body: Numba hands a view made
    outside a parfor to the parfor's body as a separate argument and, seeing no alias
    among the body's arguments (its analysis ignores aliases of the kernel's own
    arguments), marks them all `noalias`, so LLVM may reorder the row segments' stores
    to the output past the products' loads through the view (test_conv_im2col.py's
    weight-gradient regression gave wrong values exactly so)."""
    out_shape, acc = nest.out_shape, nest.out
    spatial = len(out_shape) - 2
    if spatial <= 1:
        return [], acc
    element = acc.type.element_type  # type: ignore[attr-defined]
    flat = (out_shape[0], out_shape[1], math.prod(out_shape[2:]))
    groups = ArrayAttr(
        [ArrayAttr([IntegerAttr(d, i64) for d in g]) for g in ([0], [1], range(2, 2 + spatial))]
    )
    view = memref.CollapseShapeOp(
        operands=[acc],
        result_types=[MemRefType(element, flat)],
        properties={"reassociation": groups},
    )
    view.results[0].name_hint = "rows"
    return [view], view.results[0]


__all__ = [
    "ConvNest",
    "WeightLayout",
    "column_tiles",
    "linear",
    "match_conv",
    "output_rows",
    "strides_of",
]
