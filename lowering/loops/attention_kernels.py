"""
`tess-attention-kernels`: the body of each fused attention kernel (level 5, loops).

`tess-to-linalg` leaves a private declaration with `tess.attention_kernel` for each
attention op (bufferized to out-params); this pass writes flash attention's loop nests,
parallel over the batch dims and blocks of `block` queries (forward, `dq`) or keys (`dk`,
`dv`). Per pair of blocks the products run as `micro.mma` register tiles (the
`tess-pack-matmul` micro-kernel) over packed block scratch: scores `Q K^T`, `P V` and, in
the backward, `dO V^T`, `dS K`, `P^T dO`, `dS^T Q`; the softmax work between them is row
loops over the block. Forward: an online softmax (row maximum and sum per block, the
output accumulator rescaled); `lse = max + log(sum)`. Backward without atomics: `dk`/`dv`
stream the query blocks per key block, `dq` is a second pass streaming the key blocks
per query block; both recompute `P = exp(s - lse)`. A kernel computing all three for at
least `JOINT_MIN_BATCH` batch entries runs one pass per entry instead: the `dk`/`dv` pass
adding each tile's `dS K` into the entry's whole-`L` dq accumulator (O(L E) scratch).
Causal: key blocks past a query block's last row are skipped, the mask a select
(`j <= i`). No `(L, S)` buffer exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import lcm as math_lcm

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    FunctionType,
    IndexType,
    MemRefType,
    ModuleOp,
    i1,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract
from tessc.lowering.loops.attention_kernels_nest import NestBuilder
from tessc.lowering.loops.register_tiles import host_vector_bits, register_tile

DEFAULT_BLOCK = 64
"""Queries and keys per block: a block's scores (16 KiB f32) and its packed q, k, v, dout
rows (16 KiB each at E = 64) stay in L1/L2 while the register tiles run over them."""

JOINT_MIN_BATCH = 8
"""A kernel computing dq, dk and dv of at least this many batch entries (the flat batch)
does so in one pass parallel over the entries only (`joint_backward`): 7 tile products per
pair of blocks instead of 9. Fewer entries keep the two passes' parallel blocks."""

Body = Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]]


def _memref_shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def _round_up(n: int, unit: int) -> int:
    return max(unit, -(-n // unit) * unit)


@dataclass
class AttentionKernelBuilder:
    """The body of one attention kernel (module docstring), argument by argument."""

    spec: contract.AttentionKernel
    args: list[SSAValue]
    block_size: int
    vector_bits: int

    def __post_init__(self) -> None:
        self.layouts = {
            arg: self.spec.layout(k) for k, arg in enumerate(self.args) if self.spec.layout(k)
        }
        outputs = len(self.spec.computes)
        inputs, self.outs = (
            self.args[:-outputs],
            dict(zip(self.spec.computes, self.args[-outputs:], strict=True)),
        )
        backward = any(c.startswith("d") for c in self.spec.computes)
        names = ("q", "k", "v", "lse", "delta", "dout") if backward else ("q", "k", "v")
        if not backward and "out" not in self.spec.computes:
            names = ("q", "k")
        self.operands = dict(zip(names, inputs, strict=False))
        self.mask = inputs[len(names)] if len(inputs) > len(names) else None
        q, k = self.operands["q"], self.operands["k"]
        *self.batch, self.rows, self.depth = self.shape(q)
        self.keys = self.shape(k)[-2]
        self.value_depth = self.shape(self.operands["v"])[-1] if "v" in self.operands else 0
        q_type = q.type
        assert isinstance(q_type, MemRefType) and isinstance(q_type.element_type, AnyFloat)
        self.element = q_type.element_type
        bits = 32 if isinstance(self.element, Float32Type) else 64
        self.tile = register_tile(self.vector_bits, bits)
        rows, cols, lanes = self.tile
        unit = math_lcm(rows, cols)
        self.block = min(
            _round_up(self.block_size, unit), _round_up(max(self.rows, self.keys, 1), unit)
        )
        self.depth_pad = _round_up(self.depth, lanes)
        self.value_pad = _round_up(self.value_depth, lanes)

    def shape(self, value: SSAValue) -> tuple[int, ...]:
        """The shape of the operand the kernel computes with (`layouts`: the array's,
        permuted back)."""
        lying = _memref_shape(value)
        layout = self.layouts.get(value)
        if layout is None:
            return lying
        found = [0] * len(lying)
        for k, p in enumerate(layout):
            found[p] = lying[k]
        return tuple(found)

    def build(self, block: Block) -> None:
        nest = NestBuilder(Builder(InsertPoint.at_end(block)), self.element, self.layouts)
        computes = self.spec.computes
        if "out" in computes or "lse" in computes:
            self.parallel(nest, self.rows, self.forward_block)
        flat = 1
        for n in self.batch:
            flat *= n
        if all(c in computes for c in ("dq", "dk", "dv")) and flat >= JOINT_MIN_BATCH:
            self.parallel(nest, 1, self.joint_backward)
            nest.builder.insert(func.ReturnOp())
            return
        if "dq" in computes:
            self.parallel(nest, self.rows, self.dq_block)
        if "dk" in computes or "dv" in computes:
            self.parallel(nest, self.keys, self.dkv_block)
        nest.builder.insert(func.ReturnOp())

    def parallel(
        self, nest: NestBuilder, rows: int,
        body: Callable[[NestBuilder, list[SSAValue], SSAValue], None],
    ) -> None:  # fmt: skip
        """`scf.parallel` over the batch dims and the blocks of `rows`;
        `body(nest, batch, first row of the block)`."""
        extents = [*self.batch, -(-rows // self.block)]
        zero, one = nest.index(0), nest.index(1)
        inner = Block([scf.ReduceOp()], arg_types=[IndexType()] * len(extents))
        for d, arg in enumerate(inner.args):
            arg.name_hint = f"b{d}" if d < len(self.batch) else "blk"
        bounds = [nest.index(n) for n in extents]
        nest.builder.insert(scf.ParallelOp([zero] * len(extents), bounds, [one] * len(extents),
                                           Region(inner)))  # fmt: skip
        inside = NestBuilder(Builder(InsertPoint.before(inner.last_op)), self.element,  # type: ignore[arg-type]
                             nest.layouts)  # fmt: skip
        first = inside.muli(inner.args[-1], inside.index(self.block))
        body(inside, list(inner.args[:-1]), first)

    # -- scratch and packing ------------------------------------------------------------

    def scratch(self, nest: NestBuilder, shape: Sequence[int]) -> SSAValue:
        """A zero-filled block buffer (its padding never holds a NaN or a denormal)."""
        ref = nest.insert(memref.AllocOp.get(self.element, shape=list(shape)))
        nest.fill(ref, shape)
        return ref

    def pack_rows(self, nest: NestBuilder, src: SSAValue, batch: list[SSAValue], first: SSAValue,
                  count: SSAValue, dst: SSAValue, pad: int, width: int) -> None:  # fmt: skip
        """`dst[r * pad + e] = src[b, first + r, e]` for `r < count`, `e < width`."""

        def row(r: SSAValue) -> None:
            base, at = nest.muli(r, nest.index(pad)), [*batch, nest.addi(first, r)]
            nest.range(
                nest.index(width),
                lambda e: nest.store(nest.load(src, [*at, e]), dst, [nest.addi(base, e)]),
                "e",
            )

        nest.range(count, row, "r")

    def pack_transposed(self, nest: NestBuilder, src: SSAValue, batch: list[SSAValue],
                        first: SSAValue, count: SSAValue, dst: SSAValue,
                        width: int) -> None:  # fmt: skip
        """`dst[e * block + c] = src[b, first + c, e]` for `c < count`, `e < width`."""

        def row(c: SSAValue) -> None:
            at = [*batch, nest.addi(first, c)]

            def element(e: SSAValue) -> None:
                to = nest.addi(nest.muli(e, nest.index(self.block)), c)
                nest.store(nest.load(src, [*at, e]), dst, [to])

            nest.range(nest.index(width), element, "e")

        nest.range(count, row, "c")

    def store_rows(self, nest: NestBuilder, acc: SSAValue, dst: SSAValue, batch: list[SSAValue],
                   first: SSAValue, count: SSAValue, width: int,
                   factor: Callable[[SSAValue], SSAValue] | None = None) -> None:  # fmt: skip
        """`dst[b, first + r, e] = acc[r, e] (* factor(r))` for `r < count`, `e < width`."""

        def row(r: SSAValue) -> None:
            at = [*batch, nest.addi(first, r)]
            scale = factor(r) if factor is not None else None

            def element(e: SSAValue) -> None:
                value = nest.load(acc, [r, e])
                nest.store(value if scale is None else nest.mul(value, scale), dst, [*at, e])

            nest.range(nest.index(width), element, "e")

        nest.range(count, row, "r")

    # -- scores -------------------------------------------------------------------------

    def count(self, nest: NestBuilder, first: SSAValue, extent: int) -> SSAValue:
        """The rows of the block at `first`: `min(block, extent - first)`."""
        return nest.mini(nest.index(self.block), nest.subi(nest.index(extent), first))

    def masked(self, nest: NestBuilder, batch: list[SSAValue], x: SSAValue, i: SSAValue,
               j: SSAValue) -> SSAValue:  # fmt: skip
        """The scaled score `x` at `(i, j)` with the mask applied (-inf where masked)."""
        if self.spec.causal:
            sees = nest.insert(arith.CmpiOp(j, i, "sle"))
            x = nest.select(sees, x, nest.real(float("-inf")))
        if self.mask is None:
            return x
        zero = nest.index(0)
        extents = self.shape(self.mask)
        at = [v if n > 1 else zero for v, n in zip([*batch, i, j], extents, strict=True)]
        value = nest.load(self.mask, at)
        assert isinstance(self.mask.type, MemRefType)
        if self.mask.type.element_type == i1:
            return nest.select(value, x, nest.real(float("-inf")))
        return nest.add(x, value)

    def key_end(self, nest: NestBuilder, first: SSAValue, count: SSAValue) -> SSAValue:
        """The keys the query block sees: `min(S, first + count)` when causal, else `S`."""
        keys = nest.index(self.keys)
        if not self.spec.causal:
            return keys
        return nest.mini(keys, nest.addi(first, count))

    def live(self, nest: NestBuilder, value: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(whether `value` is not -inf, `value` or 0 where it is -inf): the shift of a row
        that attends to nothing, where `exp(-inf - -inf)` would be NaN."""
        alive = nest.compare(value, nest.real(float("-inf")), "one")
        return alive, nest.select(alive, value, nest.real(0.0))

    def score_tile(self, nest: NestBuilder, qpad: SSAValue, kt: SSAValue, s: SSAValue) -> None:
        """`s[r, c] = q[i0 + r] . k[j0 + c]` for the whole block (register tiles)."""
        b = self.block
        nest.product(qpad, kt, nest.index(self.depth), s, (b, b), (self.depth_pad, 1, b),
                     self.tile, accumulate=False)  # fmt: skip

    # -- forward ------------------------------------------------------------------------

    def forward_block(self, nest: NestBuilder, batch: list[SSAValue], i0: SSAValue) -> None:
        b, out, v = self.block, self.outs.get("out"), self.operands.get("v")
        with_values = out is not None and v is not None
        rows = self.count(nest, i0, self.rows)
        qpad = self.scratch(nest, [b * self.depth_pad])
        self.pack_rows(nest, self.operands["q"], batch, i0, rows, qpad, self.depth_pad,
                       self.depth)  # fmt: skip
        kt, s = self.scratch(nest, [self.depth * b]), self.scratch(nest, [b, b])
        acc = self.scratch(nest, [b, self.value_pad]) if with_values else None
        vpad = self.scratch(nest, [b * self.value_pad]) if with_values else None
        top, total = self.scratch(nest, [b]), self.scratch(nest, [b])
        minus_inf = nest.real(float("-inf"))
        nest.range(rows, lambda r: nest.store(minus_inf, top, [r]), "r")
        scale = nest.real(self.spec.scale)

        def key_block(j0: SSAValue) -> None:
            keys = self.count(nest, j0, self.keys)
            self.pack_transposed(nest, self.operands["k"], batch, j0, keys, kt, self.depth)
            self.score_tile(nest, qpad, kt, s)

            def row(r: SSAValue) -> None:
                i, zero, one = nest.addi(i0, r), nest.index(0), nest.index(1)

                def scores(c: SSAValue, running: list[SSAValue]) -> list[SSAValue]:
                    x = nest.mul(nest.load(s, [r, c]), scale)
                    x = self.masked(nest, batch, x, i, nest.addi(j0, c))
                    nest.store(x, s, [r, c])
                    return [nest.insert(arith.MaximumfOp(running[0], x))]

                peak = nest.loop(zero, keys, one, [minus_inf], scores, "c")[0]
                old_top = nest.load(top, [r])
                new_top = nest.insert(arith.MaximumfOp(old_top, peak))
                _, shift = self.live(nest, new_top)

                def probabilities(c: SSAValue, running: list[SSAValue]) -> list[SSAValue]:
                    p = nest.exp(nest.sub(nest.load(s, [r, c]), shift))
                    nest.store(p, s, [r, c])
                    return [nest.add(running[0], p)]

                block_sum = nest.loop(zero, keys, one, [nest.real(0.0)], probabilities, "c")[0]
                rescale = nest.exp(nest.sub(old_top, shift))
                old_total = nest.mul(nest.load(total, [r]), rescale)
                nest.store(nest.add(old_total, block_sum), total, [r])
                nest.store(new_top, top, [r])
                if acc is not None:
                    nest.scale_row(acc, [r], rescale, self.value_pad)

            nest.range(rows, row, "r")
            if acc is not None and vpad is not None and v is not None:
                self.pack_rows(nest, v, batch, j0, keys, vpad, self.value_pad, self.value_depth)
                nest.product(s, vpad, keys, acc, (b, self.value_pad), (b, 1, self.value_pad),
                             self.tile, accumulate=True)  # fmt: skip

        end = self.key_end(nest, i0, rows)
        nest.steps(nest.index(0), end, b, key_block, "j0")

        def inverse(r: SSAValue) -> SSAValue:
            row_total = nest.load(total, [r])
            attends = nest.compare(row_total, nest.real(0.0), "ogt")
            quotient = nest.insert(arith.DivfOp(nest.real(1.0), row_total))
            return nest.select(attends, quotient, nest.real(0.0))

        if out is not None and acc is not None:
            self.store_rows(nest, acc, out, batch, i0, rows, self.value_depth, inverse)
        if (lse := self.outs.get("lse")) is not None:

            def row_lse(r: SSAValue) -> None:
                row_total = nest.load(total, [r])
                attends = nest.compare(row_total, nest.real(0.0), "ogt")
                _, shift = self.live(nest, nest.load(top, [r]))
                log_total = nest.add(shift, nest.insert(math.LogOp(row_total)))
                value = nest.select(attends, log_total, minus_inf)
                nest.store(value, lse, [*batch, nest.addi(i0, r)])

            nest.range(rows, row_lse, "r")

    # -- backward -----------------------------------------------------------------------

    def gradient_tile(self, nest: NestBuilder, batch: list[SSAValue], i0: SSAValue,
                      j0: SSAValue, rows: SSAValue, keys: SSAValue, s: SSAValue,
                      dp: SSAValue | None) -> None:  # fmt: skip
        """`s[r, c] = p = exp(scale * s - lse[i])` and, with `dp`, `dp[r, c] = scale * p *
        (dp - delta[i])`, the score's gradient times scale, over the live block."""
        scale = nest.real(self.spec.scale)

        def row(r: SSAValue) -> None:
            i = nest.addi(i0, r)
            _, shift = self.live(nest, nest.load(self.operands["lse"], [*batch, i]))
            delta = nest.load(self.operands["delta"], [*batch, i]) if dp is not None else None

            def element(c: SSAValue) -> None:
                x = nest.mul(nest.load(s, [r, c]), scale)
                x = self.masked(nest, batch, x, i, nest.addi(j0, c))
                p = nest.exp(nest.sub(x, shift))
                nest.store(p, s, [r, c])
                if dp is not None and delta is not None:
                    centred = nest.sub(nest.load(dp, [r, c]), delta)
                    nest.store(nest.mul(nest.mul(p, centred), scale), dp, [r, c])

            nest.range(keys, element, "c")

        nest.range(rows, row, "r")

    def backward_tiles(self, nest: NestBuilder, batch: list[SSAValue], i0: SSAValue,
                       j0: SSAValue, rows: SSAValue, keys: SSAValue, packs: dict[str, SSAValue],
                       with_dp: bool) -> None:  # fmt: skip
        """The block's probabilities in `packs["s"]` and (`with_dp`) score gradients in
        `packs["dp"]`, from the packed q, dout rows and transposed k, v blocks."""
        b = self.block
        self.score_tile(nest, packs["qpad"], packs["kt"], packs["s"])
        if with_dp:
            nest.product(packs["dopad"], packs["vt"], nest.index(self.value_depth), packs["dp"],
                         (b, b), (self.value_pad, 1, b), self.tile, accumulate=False)  # fmt: skip
        dp = packs["dp"] if with_dp else None
        self.gradient_tile(nest, batch, i0, j0, rows, keys, packs["s"], dp)

    def query_packs(self, nest: NestBuilder, with_dout: bool) -> dict[str, SSAValue]:
        b = self.block
        packs = {
            "qpad": self.scratch(nest, [b * self.depth_pad]),
            "kt": self.scratch(nest, [self.depth * b]),
            "s": self.scratch(nest, [b, b]),
        }
        if with_dout:
            packs["dopad"] = self.scratch(nest, [b * self.value_pad])
            packs["vt"] = self.scratch(nest, [self.value_depth * b])
            packs["dp"] = self.scratch(nest, [b, b])
        return packs

    def load_queries(self, nest: NestBuilder, batch: list[SSAValue], i0: SSAValue,
                     rows: SSAValue, packs: dict[str, SSAValue]) -> None:  # fmt: skip
        ops = self.operands
        self.pack_rows(nest, ops["q"], batch, i0, rows, packs["qpad"], self.depth_pad,
                       self.depth)  # fmt: skip
        if "dopad" in packs:
            self.pack_rows(nest, ops["dout"], batch, i0, rows, packs["dopad"], self.value_pad,
                           self.value_depth)  # fmt: skip

    def load_keys(self, nest: NestBuilder, batch: list[SSAValue], j0: SSAValue,
                  keys: SSAValue, packs: dict[str, SSAValue]) -> None:  # fmt: skip
        ops = self.operands
        self.pack_transposed(nest, ops["k"], batch, j0, keys, packs["kt"], self.depth)
        if "vt" in packs:
            self.pack_transposed(nest, ops["v"], batch, j0, keys, packs["vt"], self.value_depth)

    def dq_block(self, nest: NestBuilder, batch: list[SSAValue], i0: SSAValue) -> None:
        """dQ of a query block: the key blocks streamed, `dq += dS @ k` per block."""
        b, dq = self.block, self.outs["dq"]
        rows = self.count(nest, i0, self.rows)
        packs = self.query_packs(nest, with_dout=True)
        kpad = self.scratch(nest, [b * self.depth_pad])
        acc = self.scratch(nest, [b, self.depth_pad])
        self.load_queries(nest, batch, i0, rows, packs)

        def key_block(j0: SSAValue) -> None:
            keys = self.count(nest, j0, self.keys)
            self.load_keys(nest, batch, j0, keys, packs)
            self.pack_rows(nest, self.operands["k"], batch, j0, keys, kpad, self.depth_pad,
                           self.depth)  # fmt: skip
            self.backward_tiles(nest, batch, i0, j0, rows, keys, packs, with_dp=True)
            nest.product(packs["dp"], kpad, keys, acc, (b, self.depth_pad),
                         (b, 1, self.depth_pad), self.tile, accumulate=True)  # fmt: skip

        nest.steps(nest.index(0), self.key_end(nest, i0, rows), b, key_block, "j0")
        self.store_rows(nest, acc, dq, batch, i0, rows, self.depth)

    def dkv_block(self, nest: NestBuilder, batch: list[SSAValue], j0: SSAValue) -> None:
        """dK and dV of a key block: the query blocks streamed (from the block's first key
        when causal), `dv += P^T @ dout`, `dk += dS^T @ q` per block."""
        self.dkv_pass(nest, batch, j0, self.dkv_scratch(nest), None)

    def dkv_scratch(self, nest: NestBuilder) -> dict[str, SSAValue]:
        """`query_packs` and the dk, dv accumulators of one key block."""
        b, packs = self.block, self.query_packs(nest, with_dout=True)
        if "dk" in self.outs:
            packs["dk_acc"] = self.scratch(nest, [b, self.depth_pad])
        if "dv" in self.outs:
            packs["dv_acc"] = self.scratch(nest, [b, self.value_pad])
        return packs

    def dkv_pass(self, nest: NestBuilder, batch: list[SSAValue], j0: SSAValue,
                 packs: dict[str, SSAValue], dq_acc: SSAValue | None) -> None:  # fmt: skip
        """`dkv_block` on `packs` (its accumulators zero); with `dq_acc` (`joint_backward`)
        also `dq_acc[i0 + r] += dS @ k` per query block."""
        b, dk, dv = self.block, self.outs.get("dk"), self.outs.get("dv")
        dk_acc, dv_acc = packs.get("dk_acc"), packs.get("dv_acc")
        keys = self.count(nest, j0, self.keys)
        self.load_keys(nest, batch, j0, keys, packs)
        if dq_acc is not None:
            self.pack_rows(nest, self.operands["k"], batch, j0, keys, packs["kpad"],
                           self.depth_pad, self.depth)  # fmt: skip

        def query_block(i0: SSAValue) -> None:
            rows = self.count(nest, i0, self.rows)
            self.load_queries(nest, batch, i0, rows, packs)
            self.backward_tiles(nest, batch, i0, j0, rows, keys, packs, with_dp=dk is not None)
            if dv_acc is not None:
                nest.product(packs["s"], packs["dopad"], rows, dv_acc, (b, self.value_pad),
                             (1, b, self.value_pad), self.tile, accumulate=True)  # fmt: skip
            if dk_acc is not None:
                nest.product(packs["dp"], packs["qpad"], rows, dk_acc, (b, self.depth_pad),
                             (1, b, self.depth_pad), self.tile, accumulate=True)  # fmt: skip
            if dq_acc is not None:  # rows past L land in dq_acc's padding, never stored
                nest.product(packs["dp"], packs["kpad"], keys, dq_acc, (b, self.depth_pad),
                             (b, 1, self.depth_pad), self.tile, accumulate=True,
                             acc_row=i0)  # fmt: skip

        start = nest.mini(j0, nest.index(self.rows)) if self.spec.causal else nest.index(0)
        nest.steps(start, nest.index(self.rows), b, query_block, "i0")
        if dk is not None and dk_acc is not None:
            self.store_rows(nest, dk_acc, dk, batch, j0, keys, self.depth)
        if dv is not None and dv_acc is not None:
            self.store_rows(nest, dv_acc, dv, batch, j0, keys, self.value_depth)

    def joint_backward(self, nest: NestBuilder, batch: list[SSAValue], _: SSAValue) -> None:
        """dq, dk and dv of one batch entry in one pass: the key blocks in turn
        (`dkv_pass`), each tile's `dS K` added into the entry's whole-`L` dq accumulator,
        which only this iteration writes (no atomics)."""
        b, rows_pad = self.block, _round_up(self.rows, self.block)
        dq_acc = self.scratch(nest, [rows_pad, self.depth_pad])
        packs = self.dkv_scratch(nest)
        packs["kpad"] = self.scratch(nest, [b * self.depth_pad])

        def key_block(j0: SSAValue) -> None:
            nest.fill(packs["dk_acc"], [b, self.depth_pad])
            nest.fill(packs["dv_acc"], [b, self.value_pad])
            self.dkv_pass(nest, batch, j0, packs, dq_acc)

        nest.steps(nest.index(0), nest.index(self.keys), b, key_block, "j0")
        self.store_rows(nest, dq_acc, self.outs["dq"], batch, nest.index(0),
                        nest.index(self.rows), self.depth)  # fmt: skip


def define_attention_kernel(
    function: func.FuncOp, block_size: int, call: func.CallOp | None = None,
    vector_bits: int = 0,
) -> None:  # fmt: skip
    """Give the declaration `function` its loop nest and mark it `tess.kernel`. Its
    argument types become those `call` (its one call) passes: a strided view of a slice
    is read where it lies (the nest only loads and stores elements)."""
    spec = contract.ATTENTION_KERNEL.get(function)
    assert spec is not None
    if call is not None:
        types = [v.type for v in call.arguments]
        function.function_type = FunctionType.from_lists(types, [])
    block = Block(arg_types=function.function_type.inputs.data)
    bits = vector_bits or host_vector_bits()
    AttentionKernelBuilder(spec, list(block.args), block_size, bits).build(block)
    function.body.add_block(block)
    contract.KERNEL.set(function)


@dataclass(frozen=True)
class TessAttentionKernelsPass(ModulePass):
    """Write the loop nest of every `tess.attention_kernel` declaration."""

    name = "tess-attention-kernels"

    block: int = DEFAULT_BLOCK
    vector_bits: int = 0
    """The target's vector width (0: the host's, `register_tiles.host_vector_bits`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        calls = {
            call.callee.root_reference.data: call
            for call in op.walk()
            if isinstance(call, func.CallOp)
        }
        for function in list(op.ops):
            if (
                isinstance(function, func.FuncOp)
                and function.is_declaration
                and contract.ATTENTION_KERNEL.has(function)
            ):
                call = calls.get(function.sym_name.data)
                define_attention_kernel(function, max(1, self.block), call, self.vector_bits)


__all__ = [
    "DEFAULT_BLOCK",
    "JOINT_MIN_BATCH",
    "TessAttentionKernelsPass",
    "define_attention_kernel",
]
