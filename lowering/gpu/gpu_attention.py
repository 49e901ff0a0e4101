"""
`tess-gpu-attention`: each fused attention kernel (a `func.call` of a private declaration
tagged `tess.attention_kernel`, see `tess-to-linalg`) becomes flash-attention launches
(level 5 -> 5g); lowering/gpu/README.md draws them (shape 4).

- forward (`out`, `lse`): a block per (batch, block of `ROWS` query rows), a thread per
  row; the Q block staged in workgroup memory, K/V tiles streamed through it, each row's
  running maximum, sum and output accumulator in registers (`scf.for` `iter_args`), the
  row's scores of one tile in a `ROWS x tile` workgroup scratch; causal tiles past the
  block's diagonal are never loaded;
- `dk`/`dv`: a block per (batch, block of keys), a thread per key, the queries streamed
  in tiles, each probability recomputed from the row's logsumexp; `dq`: a block per query
  block, the keys streamed. Every output element has one writer: no atomics, the same
  bits every run. No `(L, S)` buffer exists; the causal mask is index arithmetic.
xDSL has no such lowering; the loop-level kernel is `tess-attention-kernels`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import AnyFloat, FloatAttr, MemRefType, ModuleOp, i1
from xdsl.ir import Attribute, Block, BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.lowering.gpu.gpu_common import Body, GpuKernel, Launch, launch_ops
from tessc.lowering.linalg.flash_shapes import flash_supported

ROWS = 32
"""Threads per block: query rows (forward, `dq`) or keys (`dk`/`dv`) a block owns."""
MAX_TILE = 32
"""Rows of a streamed tile; halved until the block's workgroup memory fits."""
WORKGROUP_BYTES = 48 * 1024
NEG_INF = float("-inf")


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    typ = value.type if isinstance(value, SSAValue) else value
    assert isinstance(typ, MemRefType)
    return tuple(typ.get_shape())


@dataclass
class Attention:
    """One attention kernel's operands (gpu.func arguments) and shapes."""

    spec: contract.AttentionKernel
    args: Sequence[SSAValue]
    operands: dict[str, SSAValue] = field(init=False)
    outs: dict[str, SSAValue] = field(init=False)
    mask: SSAValue | None = field(init=False)

    def __post_init__(self) -> None:
        outputs = len(self.spec.computes)
        inputs = list(self.args[:-outputs])
        self.outs = dict(zip(self.spec.computes, self.args[-outputs:], strict=True))
        if self.backward:
            names: tuple[str, ...] = ("q", "k", "v", "lse", "delta", "dout")
        else:
            names = ("q", "k", "v") if "out" in self.spec.computes else ("q", "k")
        self.operands = dict(zip(names, inputs, strict=False))
        self.mask = inputs[len(names)] if len(inputs) > len(names) else None

    @property
    def backward(self) -> bool:
        return any(c.startswith("d") for c in self.spec.computes)

    @property
    def batch(self) -> tuple[int, ...]:
        return shape_of(self.operands["q"])[:-2]

    @property
    def rows(self) -> int:
        return shape_of(self.operands["q"])[-2]

    @property
    def keys(self) -> int:
        return shape_of(self.operands["k"])[-2]

    @property
    def depth(self) -> int:
        return shape_of(self.operands["q"])[-1]

    @property
    def value_depth(self) -> int:
        return shape_of(self.operands["v"])[-1] if "v" in self.operands else 0

    @property
    def element(self) -> AnyFloat:
        typ = self.operands["q"].type
        assert isinstance(typ, MemRefType) and isinstance(typ.element_type, AnyFloat)
        return typ.element_type


def supported(attention: Attention) -> bool:
    """What this pass maps (`tess-decompose-attention{fallback-only}` took the rest)."""
    return flash_supported(
        (*attention.batch, attention.rows, attention.depth), attention.keys, attention.value_depth
    )


@dataclass
class Emitter:
    """The ops one thread runs, on top of `Body` (index arithmetic) for the float math."""

    b: Body
    attention: Attention

    def real(self, value: float) -> SSAValue:
        return self.b.constants.get(FloatAttr(value, self.attention.element))

    def op(self, op: arith.ArithmeticBinaryOperation | object) -> SSAValue:
        return self.b.add_op(op).results[0]  # type: ignore[arg-type]

    def add(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.op(arith.AddfOp(x, y))

    def sub(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.op(arith.SubfOp(x, y))

    def mul(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.op(arith.MulfOp(x, y))

    def exp(self, x: SSAValue) -> SSAValue:
        return self.op(mathd.ExpOp(x))

    def select(self, condition: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.op(arith.SelectOp(condition, x, y))

    def live(self, value: SSAValue) -> SSAValue:
        """`value`, or 0 where it is -inf: the shift of a row that attends to nothing."""
        alive = self.op(arith.CmpfOp(value, self.real(NEG_INF), "one"))
        return self.select(alive, value, self.real(0.0))

    def dot(
        self,
        a: SSAValue,
        a_at: Sequence[SSAValue],
        b: SSAValue,
        b_at: Sequence[SSAValue],
        length: int,
    ) -> SSAValue:
        """`sum_e a[*a_at, e] * b[*b_at, e]`, one loop-carried scalar."""

        def step(inner: Body, e: SSAValue, carried: Sequence[SSAValue]) -> Sequence[SSAValue]:
            em = Emitter(inner, self.attention)
            product = em.mul(inner.load(a, [*a_at, e]), inner.load(b, [*b_at, e]))
            return [em.add(carried[0], product)]

        return self.b.loop(
            self.b.c(0), self.b.c(length), self.b.c(1), step, [self.real(0.0)], hint="e"
        )[0]

    def score(
        self,
        batch: Sequence[SSAValue],
        i: SSAValue,
        j: SSAValue,
        qs: SSAValue,
        q_at: Sequence[SSAValue],
        ks: SSAValue,
        k_at: Sequence[SSAValue],
    ) -> SSAValue:
        """`scale * q . k` of query row `i` and key `j` (staged at `q_at`, `k_at`), the mask
        read at (batch, i, j), -inf past the causal diagonal (`j > i`)."""
        x = self.mul(
            self.dot(qs, q_at, ks, k_at, self.attention.depth), self.real(self.attention.spec.scale)
        )
        mask = self.attention.mask
        if mask is not None:
            at = [
                v if n > 1 else self.b.c(0)
                for v, n in zip([*batch, i, j], shape_of(mask), strict=True)
            ]
            value = self.b.load(mask, at)
            assert isinstance(mask.type, MemRefType)
            if mask.type.element_type == i1:
                x = self.select(value, x, self.real(NEG_INF))
            else:
                x = self.add(x, value)
        if self.attention.spec.causal:
            x = self.select(self.b.cmp(j, i, "ule"), x, self.real(NEG_INF))
        return x


def tile_size(fixed_bytes: int, per_tile_row: int, extent: int) -> int:
    """Rows of a streamed tile: `MAX_TILE`, or the whole `extent` when shorter, halved until
    the block's workgroup buffers fit."""
    tile = min(MAX_TILE, extent)
    while tile > 1 and fixed_bytes + tile * per_tile_row > WORKGROUP_BYTES:
        tile //= 2
    return tile


@dataclass
class KernelBuilder:
    """The `gpu.func` of one launch of an attention call."""

    name: str
    spec: contract.AttentionKernel
    types: Sequence[Attribute]
    module: ModuleOp

    def start(self) -> tuple[GpuKernel, Attention, Body]:
        block = Block(arg_types=list(self.types))
        gk = GpuKernel(self.name, None, list(range(len(self.types))), block, {})  # type: ignore[arg-type]
        attention = Attention(self.spec, list(block.args))
        named = {**attention.operands, **attention.outs, "mask": attention.mask}
        for name, value in named.items():
            if isinstance(value, BlockArgument):
                value.name_hint = name
        return gk, attention, gk.body()

    def block_position(
        self, b: Body, blocks: int, attention: Attention
    ) -> tuple[list[SSAValue], SSAValue]:
        """(batch indices, first row of the block) of `block_id x`."""
        bx = b.block_id("x")
        batch = b.delinearize(b.divui(bx, b.c(blocks)), [*attention.batch, 1])[:-1]
        block = b.remui(bx, b.c(blocks)) if blocks > 1 else b.c(0)
        return batch, b.mul(block, b.c(ROWS))

    def stage(
        self,
        b: Body,
        tx: SSAValue,
        count: SSAValue,
        width: int,
        copies: Sequence[tuple[SSAValue, SSAValue, list[SSAValue]]],
        first: SSAValue,
        last: int | None = None,
    ) -> None:
        """Rows `first .. first + count` of each `(source, tile, batch)` into `tile` (of
        `width` columns; a rank-1 tile takes one element per row), strided by the block;
        source rows past `last` read row `last` (a block's rows past L or S: their threads
        compute on real data and store nothing)."""

        def element(inner: Body, lin: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            row = inner.divui(lin, inner.c(width))
            col = inner.remui(lin, inner.c(width)) if width > 1 else inner.c(0)
            for source, tile, batch in copies:
                source_row = inner.add(first, row)
                if last is not None:
                    source_row = inner.minsi(source_row, inner.c(last))
                if len(shape_of(tile)) == 1:
                    inner.store(inner.load(source, [*batch, source_row]), tile, [row])
                else:
                    inner.store(inner.load(source, [*batch, source_row, col]), tile, [row, col])
            return ()

        b.loop(tx, b.mul(count, b.c(width)), b.c(ROWS), element, hint="t")


def workgroup(gk: GpuKernel, a: Attention, shape: Sequence[int], name: str) -> SSAValue:
    return gk.workgroup_buffer(a.element, shape, name)


def forward_kernel(kb: KernelBuilder) -> Launch:
    gk, a, b = kb.start()
    item = a.element.bitwidth // 8
    out, v = a.outs.get("out"), a.operands.get("v")
    e, ev = a.depth, a.value_depth
    tile = tile_size(item * ROWS * (e + 1), item * (e + ev + ROWS + 1), a.keys)
    qs = workgroup(gk, a, [ROWS, e + 1], "q_block")  # +1: rows of a thread apart in banks
    ks = workgroup(gk, a, [tile, e], "k_tile")
    vs = workgroup(gk, a, [tile, max(ev, 1)], "v_tile") if out is not None else None
    scores = workgroup(gk, a, [ROWS, tile + 1], "scores")
    blocks = -(-a.rows // ROWS)
    tx = b.thread_id("x")
    batch, q0 = kb.block_position(b, blocks, a)
    last = b.c(a.rows - 1)
    kb.stage(b, tx, b.c(ROWS), e, [(a.operands["q"], qs, batch)], q0, a.rows - 1)
    i = b.minsi(b.add(q0, tx), last)  # a thread past the last row computes it, stores nothing
    em = Emitter(b, a)
    end = b.c(a.keys)
    if a.spec.causal:  # tiles past the block's last row are all masked
        end = b.minsi(end, b.add(q0, b.c(ROWS)))

    def key_tile(bt: Body, j0: SSAValue, carried: Sequence[SSAValue]) -> Sequence[SSAValue]:
        top, total, *acc = carried
        count = bt.minsi(bt.c(tile), bt.sub(bt.c(a.keys), j0))
        bt.barrier()  # the previous tile (and the Q block) are read
        copies = [(a.operands["k"], ks, batch)]
        kb.stage(bt, tx, count, e, copies, j0)
        if vs is not None and v is not None:
            kb.stage(bt, tx, count, ev, [(v, vs, batch)], j0)
        bt.barrier()

        def score(bs: Body, jj: SSAValue, peak: Sequence[SSAValue]) -> Sequence[SSAValue]:
            es = Emitter(bs, a)
            x = es.score(batch, i, bs.add(j0, jj), qs, [tx], ks, [jj])
            bs.store(x, scores, [tx, jj])
            return [es.op(arith.MaximumfOp(peak[0], x))]

        et = Emitter(bt, a)
        (peak,) = bt.loop(bt.c(0), count, bt.c(1), score, [et.real(NEG_INF)], hint="jj")
        new_top = et.op(arith.MaximumfOp(top, peak))
        shift = et.live(new_top)
        rescale = et.exp(et.sub(top, shift))
        scaled = [et.mul(x, rescale) for x in acc]

        def accumulate(ba: Body, jj: SSAValue, run: Sequence[SSAValue]) -> Sequence[SSAValue]:
            ea = Emitter(ba, a)
            p = ea.exp(ea.sub(ba.load(scores, [tx, jj]), shift))
            terms = [
                ea.add(x, ea.mul(p, ba.load(vs, [jj, ba.c(d)])))  # type: ignore[arg-type]
                for d, x in enumerate(run[1:])
            ]
            return [ea.add(run[0], p), *terms]

        block_sum, *acc = bt.loop(
            bt.c(0), count, bt.c(1), accumulate, [et.real(0.0), *scaled], hint="jj"
        )
        return [new_top, et.add(et.mul(total, rescale), block_sum), *acc]

    width = ev if out is not None else 0
    inits = [em.real(NEG_INF), em.real(0.0), *[em.real(0.0)] * width]
    top, total, *acc = b.loop(b.c(0), end, b.c(tile), key_tile, inits, hint="j0")
    row = b.add(q0, tx)

    def finish(bf: Body) -> Sequence[SSAValue]:
        ef = Emitter(bf, a)
        attends = ef.op(arith.CmpfOp(total, ef.real(0.0), "ogt"))
        if out is not None:
            inverse = ef.select(attends, ef.op(arith.DivfOp(ef.real(1.0), total)), ef.real(0.0))
            for d, x in enumerate(acc):
                bf.store(ef.mul(x, inverse), out, [*batch, row, bf.c(d)])
        if (lse := a.outs.get("lse")) is not None:
            log_total = ef.add(ef.live(top), ef.op(mathd.LogOp(total)))
            bf.store(ef.select(attends, log_total, ef.real(NEG_INF)), lse, [*batch, row])
        return ()

    b.when(b.cmp(row, b.c(a.rows), "ult"), finish)
    return gk.finish((math.prod(a.batch) * blocks, 1, 1), (ROWS, 1, 1), kb.module)


def dq_kernel(kb: KernelBuilder) -> Launch:
    gk, a, b = kb.start()
    item = a.element.bitwidth // 8
    e, ev = a.depth, a.value_depth
    tile = tile_size(item * ROWS * (e + ev + 2), item * (e + ev), a.keys)
    qs = workgroup(gk, a, [ROWS, e + 1], "q_block")
    dos = workgroup(gk, a, [ROWS, ev + 1], "dout_block")
    ks = workgroup(gk, a, [tile, e], "k_tile")
    vs = workgroup(gk, a, [tile, ev], "v_tile")
    blocks = -(-a.rows // ROWS)
    tx = b.thread_id("x")
    batch, q0 = kb.block_position(b, blocks, a)
    kb.stage(b, tx, b.c(ROWS), e, [(a.operands["q"], qs, batch)], q0, a.rows - 1)
    kb.stage(b, tx, b.c(ROWS), ev, [(a.operands["dout"], dos, batch)], q0, a.rows - 1)
    i = b.minsi(b.add(q0, tx), b.c(a.rows - 1))
    em = Emitter(b, a)
    shift = em.live(b.load(a.operands["lse"], [*batch, i]))
    delta = b.load(a.operands["delta"], [*batch, i])
    end = b.c(a.keys)
    if a.spec.causal:
        end = b.minsi(end, b.add(q0, b.c(ROWS)))

    def key_tile(bt: Body, j0: SSAValue, dq: Sequence[SSAValue]) -> Sequence[SSAValue]:
        count = bt.minsi(bt.c(tile), bt.sub(bt.c(a.keys), j0))
        bt.barrier()
        kb.stage(bt, tx, count, e, [(a.operands["k"], ks, batch)], j0)
        kb.stage(bt, tx, count, ev, [(a.operands["v"], vs, batch)], j0)
        bt.barrier()

        def key(bk: Body, jj: SSAValue, run: Sequence[SSAValue]) -> Sequence[SSAValue]:
            ek = Emitter(bk, a)
            p = ek.exp(ek.sub(ek.score(batch, i, bk.add(j0, jj), qs, [tx], ks, [jj]), shift))
            dp = ek.dot(dos, [tx], vs, [jj], ev)
            ds = ek.mul(ek.mul(p, ek.sub(dp, delta)), ek.real(a.spec.scale))
            return [ek.add(x, ek.mul(ds, bk.load(ks, [jj, bk.c(d)]))) for d, x in enumerate(run)]

        return bt.loop(bt.c(0), count, bt.c(1), key, dq, hint="jj")

    dq = b.loop(b.c(0), end, b.c(tile), key_tile, [em.real(0.0)] * e, hint="j0")
    row = b.add(q0, tx)

    def finish(bf: Body) -> Sequence[SSAValue]:
        for d, x in enumerate(dq):
            bf.store(x, a.outs["dq"], [*batch, row, bf.c(d)])
        return ()

    b.when(b.cmp(row, b.c(a.rows), "ult"), finish)
    return gk.finish((math.prod(a.batch) * blocks, 1, 1), (ROWS, 1, 1), kb.module)


def dkv_kernel(kb: KernelBuilder) -> Launch:
    gk, a, b = kb.start()
    item = a.element.bitwidth // 8
    e, ev = a.depth, a.value_depth
    dk, dv = a.outs.get("dk"), a.outs.get("dv")
    tile = tile_size(item * ROWS * (e + ev + 2), item * (e + ev + 2), a.rows)
    ks = workgroup(gk, a, [ROWS, e + 1], "k_block")
    vs = workgroup(gk, a, [ROWS, ev + 1], "v_block")
    qs = workgroup(gk, a, [tile, e], "q_tile")
    dos = workgroup(gk, a, [tile, ev], "dout_tile")
    lses = workgroup(gk, a, [tile], "lse_tile")
    deltas = workgroup(gk, a, [tile], "delta_tile")
    blocks = -(-a.keys // ROWS)
    tx = b.thread_id("x")
    batch, k0 = kb.block_position(b, blocks, a)
    kb.stage(b, tx, b.c(ROWS), e, [(a.operands["k"], ks, batch)], k0, a.keys - 1)
    kb.stage(b, tx, b.c(ROWS), ev, [(a.operands["v"], vs, batch)], k0, a.keys - 1)
    j = b.minsi(b.add(k0, tx), b.c(a.keys - 1))
    em = Emitter(b, a)
    # Causal: the query tiles before the block's first key see none of its keys.
    start = b.mul(b.divui(k0, b.c(tile)), b.c(tile)) if a.spec.causal else b.c(0)

    def query_tile(bt: Body, i0: SSAValue, run: Sequence[SSAValue]) -> Sequence[SSAValue]:
        count = bt.minsi(bt.c(tile), bt.sub(bt.c(a.rows), i0))
        bt.barrier()
        kb.stage(bt, tx, count, e, [(a.operands["q"], qs, batch)], i0)
        kb.stage(bt, tx, count, ev, [(a.operands["dout"], dos, batch)], i0)
        copies = [(a.operands["lse"], lses, batch), (a.operands["delta"], deltas, batch)]
        kb.stage(bt, tx, count, 1, copies, i0)
        bt.barrier()

        def query(bq: Body, ii: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            eq = Emitter(bq, a)
            shift = eq.live(bq.load(lses, [ii]))
            p = eq.exp(eq.sub(eq.score(batch, bq.add(i0, ii), j, qs, [ii], ks, [tx]), shift))
            new_dk, new_dv = list(acc[:dk_width]), list(acc[dk_width:])
            if dv is not None:
                new_dv = [
                    eq.add(x, eq.mul(p, bq.load(dos, [ii, bq.c(d)]))) for d, x in enumerate(new_dv)
                ]
            if dk is not None:
                dp = eq.dot(dos, [ii], vs, [tx], ev)
                centred = eq.sub(dp, bq.load(deltas, [ii]))
                ds = eq.mul(eq.mul(p, centred), eq.real(a.spec.scale))
                new_dk = [
                    eq.add(x, eq.mul(ds, bq.load(qs, [ii, bq.c(d)]))) for d, x in enumerate(new_dk)
                ]
            return [*new_dk, *new_dv]

        return bt.loop(bt.c(0), count, bt.c(1), query, run, hint="ii")

    dk_width, dv_width = (e if dk is not None else 0), (ev if dv is not None else 0)
    inits = [em.real(0.0)] * (dk_width + dv_width)
    acc = b.loop(start, b.c(a.rows), b.c(tile), query_tile, inits, hint="i0")
    key_row = b.add(k0, tx)

    def finish(bf: Body) -> Sequence[SSAValue]:
        for output, values in ((dk, acc[:dk_width]), (dv, acc[dk_width:])):
            if output is not None:
                for d, x in enumerate(values):
                    bf.store(x, output, [*batch, key_row, bf.c(d)])
        return ()

    b.when(b.cmp(key_row, b.c(a.keys), "ult"), finish)
    return gk.finish((math.prod(a.batch) * blocks, 1, 1), (ROWS, 1, 1), kb.module)


def attention_launches(
    call: func.CallOp, spec: contract.AttentionKernel, module: ModuleOp, name: str
) -> list[Launch]:
    """The launches computing `spec` for `call`'s operands, named `<name>_<part>`."""
    types = [v.type for v in call.arguments]
    if not supported(Attention(spec, list(call.arguments))):
        raise PassFailedException(
            f"@{name}: attention of these shapes is for tess-decompose-attention{{fallback-only}}"
        )
    launches: list[Launch] = []
    if "out" in spec.computes or "lse" in spec.computes:
        launches.append(forward_kernel(KernelBuilder(f"{name}_forward", spec, types, module)))
    if "dq" in spec.computes:
        launches.append(dq_kernel(KernelBuilder(f"{name}_dq", spec, types, module)))
    if "dk" in spec.computes or "dv" in spec.computes:
        launches.append(dkv_kernel(KernelBuilder(f"{name}_dkv", spec, types, module)))
    return launches


@dataclass(frozen=True)
class TessGpuAttentionPass(ModulePass):
    """Map every `tess.attention_kernel` call onto flash-attention launches."""

    name = "tess-gpu-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declarations = {
            f.sym_name.data: f
            for f in op.ops
            if isinstance(f, func.FuncOp) and f.is_declaration and contract.ATTENTION_KERNEL.has(f)
        }
        calls_so_far: dict[str, int] = {}
        for call in [c for c in op.walk() if isinstance(c, func.CallOp)]:
            declaration = declarations.get(name := call.callee.string_value())
            if declaration is None:
                continue
            spec = contract.ATTENTION_KERNEL.get(declaration)
            assert spec is not None
            assert not any(spec.layouts), "tess-attention-views is not for the cuda pipeline"
            # A kernel is launched once: a second call of a declaration gets kernels of its own.
            calls_so_far[name] = n = calls_so_far.get(name, 0) + 1
            launches = attention_launches(call, spec, op, name if n == 1 else f"{name}_call{n}")
            Rewriter.replace_op(call, launch_ops(call, launches, []), [])
        for declaration in declarations.values():
            Rewriter.erase_op(declaration)
        op.verify()


__all__ = ["ROWS", "WORKGROUP_BYTES", "TessGpuAttentionPass"]
