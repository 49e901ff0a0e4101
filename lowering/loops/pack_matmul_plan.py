"""
What `tess-pack-matmul` packs, and with which blocks: the match of a large contraction's
loop nest (a row kernel `out[.., i, j] += x * y`, or a dot nest, with the work before and
after it), the register tile for the vector width, and the cache blocks for the shape and
the threads. A zero fill of the output is dropped: the first k block stores instead of
adding. MR x NR follows the vector width read from the host CPU (or
`NUMBA_CPU_FEATURES`); MC, KC, NC come from the pass options clamped to the shape, MC then
shrunk until the row blocks split evenly over the threads. The nest itself is built in
`pack_matmul_build.py`; the algorithm is in lowering/loops/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    MemRefType,
    NoneAttr,
)
from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free

from tessc.lowering.linalg.generic_analysis import depends_on
from tessc.lowering.linalg.loop_nests import NOMINAL_SIZE
from tessc.lowering.loops.contraction_match import (
    Contraction,
    RowSegment,
    match_dot,
    match_row_kernel,
    without_zero_fill,
)
from tessc.lowering.loops.trip_counts import unit_loop_bound

DEFAULT_BLOCKS: tuple[int, int, int] = (128, 256, 4096)
"""(MC, KC, NC): a KC x NR micro-panel of B (32 KiB f32) stays in L1 (48 KiB here), an MC x
KC block of A (128 KiB f32) in L2 (2 MiB); NC covers the whole right-hand side of the
benchmarked sizes (NC = 512 ran 2048 f32 3% slower: four times the parallel loops). MC is
the largest block `clamp_blocks` starts from: it shrinks to balance the threads."""
DEFAULT_MIN_WORK = 1 << 17
"""N * K * M from which a contraction is packed; smaller ones stay with `tess-tile`. The
digits MLP step's 128x64x128 (x @ w1, x.T @ dh) and 128x10x128 (dz @ w2.T) products ran
2-6x faster packed than `tess-tile`'s i-k-j (one thread, kernels timed one by one).
`tess-fuse` still fuses transposes only from `PACKED_MIN_WORK`: below it a transposed
narrow operand stays a copy, so `tess-pack-narrow` can run the product as dot products
(packed with a 10-column operand, the step's `h.T @ dz` went parallel and ran 100x slower)."""
DEFAULT_MIN_ROWS = 16
"""Rows (N, per batch) below which a product is left to `tess-tile`: packing copies all
of B (in each thread) for N rows of products, and a row of A uses a tile of MR rows. A 1 x
2048 x 2048 vector-matrix product ran 30x slower than np.matmul packed (loaded machine,
by CPU time); tess-tile's i-k-j loop streams B once."""
DEFAULT_MIN_ROW_BLOCKS = 4
"""MC shrinks until the rows make this many blocks, so both threads have work."""


DEFAULT_IN_PLACE_BYTES = 768 * 1024
"""Operands up to this size are read where they lie (no packed copy) when their layout
allows it (`in_place_operand`). The digits MLP step's operands (5-64 KiB) sit in L1/L2
between kernels, and packing them was ~8 us of its ~60. The seed's N^3 product, one
thread, packed -> both in place (us, min of 200 calls, 2-core AVX-512 Zen 4, 32 KiB L1,
1 MiB L2, loaded): 160^3 93 -> 80, 192^3 161 -> 126, 224^3 240 -> 201, 256^3 353 -> 294,
320^3 657 -> 572, 384^3 1093 -> 987 (576 KiB each), 512^3 2582 -> 2473 (medians equal):
the micro-kernel reads unpacked rows about as fast as panels (256^3: 287 packed, 288
in place) and packing cost 48 us of 335 (B 19, A 29). In place, a parallel product also
copies nothing per thread (each thread packed all of B). Up to 768 KiB: 384^3 in, 512^3
and larger packed (a 1 MiB operand no longer fits L2 beside the others)."""


# -- matching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PackedMatmul:
    """A contraction `out[.., i, j] += x(i, k) * y(k, j)` to pack, with the work around it:
    `before` and `after` run per row (a row kernel's segments, which loop over `j`
    themselves) or, `per_element`, per output element (a dot nest's body around its k loop)."""

    parallel: scf.ParallelOp
    batch: tuple[tuple[int, SSAValue], ...]  # extent and old index of each batch dim
    i: SSAValue
    j: SSAValue
    k: SSAValue
    shape: tuple[int | SSAValue, int | SSAValue, int]  # N, K, M (N or K may be a `?` dim's N)
    invariant_ops: tuple[Operation, ...]
    before: tuple[Operation, ...]
    after: tuple[Operation, ...]
    per_element: bool
    x_ops: tuple[Operation, ...]  # the loop body's ops computing x, in order
    y_ops: tuple[Operation, ...]
    x: SSAValue
    y: SSAValue
    store: memref.StoreOp
    zero_filled: bool = False  # `before`'s zero fill of `out` dropped: the first k block stores

    @property
    def element_bits(self) -> int:
        return 32 if isinstance(self.x.type, Float32Type) else 64


def nominal(extent: int | SSAValue) -> int:
    """An extent as planned: a `?` dim's N (an SSA value) as `NOMINAL_SIZE`."""
    return extent if isinstance(extent, int) else NOMINAL_SIZE


def backward_slice(value: SSAValue, ops: Sequence[Operation]) -> tuple[Operation, ...]:
    """The ops of `ops` that `value` is computed from, in order."""
    members, needed = set(ops), set[Operation]()
    stack = [value]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner in members and owner not in needed:
            needed.add(owner)
            stack.extend(owner.operands)
    return tuple(op for op in ops if op in needed)


@dataclass(frozen=True)
class Product:
    """The operands of a contraction body's `out = out + x * y` and the ops computing them."""

    x_ops: tuple[Operation, ...]
    y_ops: tuple[Operation, ...]
    x: SSAValue
    y: SSAValue


def split_product(
    body: Sequence[Operation], store: memref.StoreOp, i: SSAValue, j: SSAValue, k: SSAValue
) -> Product | None:
    """`x` (from i and k) and `y` (from k and j) when `store` writes `out[.., i, j] +
    x * y` to an identity-layout f32/f64 `out` at indices of which only the last two
    move with i, j or k."""
    out_type = store.memref.type
    if not isinstance(out_type, MemRefType) or not isinstance(out_type.layout, NoneAttr):
        return None
    if not isinstance(out_type.element_type, Float32Type | Float64Type):
        return None
    *prefix, row, col = store.indices
    if row is not i or col is not j or any(depends_on(v, x) for v in prefix for x in (i, j, k)):
        return None
    if not isinstance(total := store.value.owner, arith.AddfOp):
        return None
    loads = [
        v
        for v in total.operands
        if isinstance(v.owner, memref.LoadOp) and v.owner.memref is store.memref
    ]
    if len(loads) != 1:
        return None
    product = total.rhs if loads[0] is total.lhs else total.lhs
    if not isinstance(mul := product.owner, arith.MulfOp):
        return None
    for x, y in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        if depends_on(x, j) or depends_on(y, i):
            continue
        x_ops, y_ops = backward_slice(x, body), backward_slice(y, body)
        if any(isinstance(o, memref.LoadOp) and o.memref is store.memref for o in (*x_ops, *y_ops)):
            return None
        if x.type == y.type == out_type.element_type:
            return Product(x_ops, y_ops, x, y)
    return None


def match_packed(op: scf.ParallelOp) -> PackedMatmul | None:
    """A row kernel's largest i-k-j contraction (`tess-tile`'s form), or a dot nest (k
    innermost: `tess-tile-dot`'s form, which `a @ w.T` takes)."""
    if (kernel := match_row_kernel(op, dynamic=True)) is not None:
        # The largest contraction is packed; any other runs per row with the segments
        # around it (`relu(x @ w1) @ w2`'s second product, which `tess-row-dots` may then
        # run as tiles): a row kernel's rows are independent, whatever they hold.
        nest = max(kernel.contractions, key=lambda c: nominal(c.depth) * nominal(c.cols))
        if nest.outer_loops or len(nest.stored) != 1 or not isinstance(nest.cols, int):
            return None
        if not isinstance(kernel.rows, int) and kernel.batch_extents:
            return None  # a `?` row count in a batched product
        body = list(nest.j_loop.body.block.ops)[:-1]
        (store,) = (o for o in body if isinstance(o, memref.StoreOp))
        i, k, j = kernel.i, nest.k_loop.body.block.args[0], nest.j_loop.body.block.args[0]
        if (product := split_product(body, store, i, j, k)) is None:
            return None
        at = kernel.members.index(nest)
        segments = [
            [o for m in members for o in _member_ops(m)]
            for members in (kernel.members[:at], kernel.members[at + 1 :])
        ]
        batch = tuple(zip(kernel.batch_extents, op.body.block.args, strict=False))
        shape = (kernel.rows, nest.depth, nest.cols)
        before, filled = without_zero_fill(segments[0], store, i, None, nest.cols)
        return PackedMatmul(
            op, batch, i, j, k, shape, kernel.invariant_ops, before, tuple(segments[1]), False,
            product.x_ops, product.y_ops, product.x, product.y, store, filled,
        )  # fmt: skip
    if (dot := match_dot(op)) is None:
        return None
    *batch_extents, rows, cols = dot.extents
    *batch_args, i, j = op.body.block.args
    k = dot.k_loop.body.block.args[0]
    depth = unit_loop_bound(dot.k_loop.lb, dot.k_loop.ub, dot.k_loop.step)
    # Pure ops of the per-element prologue (constants, index arithmetic) may feed the
    # product and the epilogue, which run in other loops now: they are cloned with them.
    pure = [o for o in dot.before if is_side_effect_free(o) and not o.regions]
    body = [*pure, *list(dot.k_loop.body.block.ops)[:-1]]
    if depth is None or (product := split_product(body, dot.acc_store, i, j, k)) is None:
        return None
    after = [*pure, *dot.after]
    after = [o for o in after if o in set(dot.after) or o in _operand_slice(dot.after, pure)]
    scope = {*op.body.block.args, k}
    if not all(
        _closed(ops, op, scope) for ops in (dot.before, after, product.x_ops, product.y_ops)
    ):
        return None
    batch = tuple(zip(batch_extents, batch_args, strict=True))
    before, filled = without_zero_fill(dot.before, dot.acc_store, i, j, cols)
    return PackedMatmul(
        op, batch, i, j, k, (rows, depth, cols), (), before, tuple(after), True,
        product.x_ops, product.y_ops, product.x, product.y, dot.acc_store, filled,
    )  # fmt: skip


def _member_ops(member: Contraction | RowSegment) -> tuple[Operation, ...]:
    """A row kernel member's top-level ops (a contraction's: its outermost loop)."""
    if isinstance(member, RowSegment):
        return member.ops
    return ((member.outer_loops or (member.k_loop,))[0],)


def _operand_slice(users: Sequence[Operation], ops: Sequence[Operation]) -> set[Operation]:
    """The ops of `ops` that the operands of `users` are computed from."""
    return {o for user in users for v in user.operands for o in backward_slice(v, ops)}


def _closed(ops: Sequence[Operation], nest: Operation, scope: set[SSAValue]) -> bool:
    """Whether every value `ops` read is defined by one of them, is in `scope`, or is
    defined outside `nest` (a function argument or an op before the nest)."""
    defined = {r for o in ops for r in o.results}
    for o in ops:
        for v in o.operands:
            if v in defined or v in scope:
                continue
            owner = v.owner
            anchor = owner if isinstance(owner, Operation) else owner.parent_op()
            if anchor is not None and nest.is_ancestor(anchor):
                return False
    return True


def largest_share(rows: int, mc: int, threads: int, batches: int = 1) -> int:
    """The most rows one thread gets when `threads` split the row blocks of `mc` rows (of
    every batch, in order) into contiguous shares of block counts within one
    (`tessc.runtime.threads.shares`, Numba's static parfor schedule)."""
    count = -(-rows // mc)
    items = batches * count
    bounds = [items * t // threads for t in range(threads + 1)]
    size = [min(mc, rows - (t % count) * mc) for t in range(items)]
    return max(sum(size[lo:hi]) for lo, hi in zip(bounds, bounds[1:], strict=False))


def clamp_blocks(
    shape: tuple[int, int, int],
    tile: tuple[int, int, int],
    blocks: tuple[int, int, int],
    min_row_blocks: int,
    threads: int = 1,
    batches: int = 1,
) -> tuple[int, int, int]:
    """(MC, KC, NC) for the shape: MC a multiple of MR giving at least `min_row_blocks`
    blocks where the rows allow, balanced over `threads`; NC a multiple of NR; none beyond
    the shape. Balance (the row blocks of all `batches` shared out together): of the block
    counts from the fewest to twice that, the one whose largest thread share has the
    fewest rows (then the fewest blocks): 1024 rows in 11
    blocks of 96 gave one of two threads 576 rows, 8 blocks of 128 give each 512."""
    n, depth, cols = shape
    mr, nr, _ = tile
    mc, kc, nc = blocks
    tiles = -(-n // mr)
    fewest = max(-(-n // max(mr, mc - mc % mr)), min(min_row_blocks, tiles))
    sizes = {mr * -(-tiles // count) for count in range(fewest, min(2 * fewest, tiles) + 1)}
    mc = min(sizes, key=lambda size: (largest_share(n, size, max(1, threads), batches), -size))
    nc = min(-(-max(nr, nc - nc % nr) // nr) * nr, -(-cols // nr) * nr)
    return mc, min(kc, depth), nc


__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_IN_PLACE_BYTES",
    "DEFAULT_MIN_ROWS",
    "DEFAULT_MIN_ROW_BLOCKS",
    "DEFAULT_MIN_WORK",
    "PackedMatmul",
    "clamp_blocks",
    "largest_share",
    "match_packed",
    "nominal",
]
