"""
`tess-attention-kernels`: the body of each fused attention kernel (level 5, loops).

`tess-to-linalg` leaves a private declaration with `tess.attention_kernel` for each
attention op (bufferized to out-params); this pass writes its loop nest, flash attention's:

- forward (`out`, `lse`): parallel over the batch dims and the query rows; the keys in
  blocks of `block` (a row's scores of one block in a `block`-long scratch), an online
  softmax carrying the row's maximum and sum through the block loop and rescaling the
  output row once per block; `lse` is `max + log(sum)`;
- `dq`: parallel over query rows, the keys streamed, each probability recomputed as
  `exp(s - lse)`; `dk`/`dv`: parallel over key rows, the queries streamed the same way.

No buffer of the `(L, S)` scores exists; a causal mask is loop bounds (`j <= i`), not data.
xDSL has no such lowering; the algorithm is in lowering/loops/README.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    i1,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract

DEFAULT_BLOCK = 64
"""Keys per block of the forward's online softmax (a row's scores of one block: 512 bytes
of f64 scratch)."""

Body = Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]]


@dataclass
class NestBuilder:
    """Builds scalar loop nests on memrefs at one insertion point."""

    builder: Builder
    element: AnyFloat

    def insert(self, op: arith.ArithmeticBinaryOperation | object) -> SSAValue:
        self.builder.insert(op)  # type: ignore[arg-type]
        return op.results[0]  # type: ignore[attr-defined]

    def index(self, value: int) -> SSAValue:
        return self.insert(arith.ConstantOp(IntegerAttr.from_index_int_value(value)))

    def real(self, value: float) -> SSAValue:
        return self.insert(arith.ConstantOp(FloatAttr(value, self.element)))

    def load(self, ref: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        return self.insert(memref.LoadOp.get(ref, indices))

    def store(self, value: SSAValue, ref: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.builder.insert(memref.StoreOp.get(value, ref, indices))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.MulfOp(a, b))

    def exp(self, a: SSAValue) -> SSAValue:
        return self.insert(math.ExpOp(a))

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.SelectOp(condition, a, b))

    def compare(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.insert(arith.CmpfOp(a, b, predicate))

    def loop(
        self, lower: SSAValue, upper: SSAValue, step: SSAValue, inits: Sequence[SSAValue],
        body: Body, name: str,
    ) -> list[SSAValue]:  # fmt: skip
        """An `scf.for` carrying `inits`; `body(iv, carried)` returns what it yields."""
        block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        block.args[0].name_hint = name
        loop = scf.ForOp(lower, upper, step, list(inits), Region(block))
        self.builder.insert(loop)
        after = self.builder.insertion_point
        self.builder.insertion_point = InsertPoint.at_end(block)
        yielded = body(block.args[0], list(block.args[1:]))
        self.builder.insert(scf.YieldOp(*yielded))
        self.builder.insertion_point = after
        return list(loop.results)

    def range(self, upper: SSAValue, body: Callable[[SSAValue], None], name: str) -> None:
        """`for name in range(upper): body(name)`, carrying nothing."""

        def step(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            body(iv)
            return []

        self.loop(self.index(0), upper, self.index(1), [], step, name)

    def dot(self, a: SSAValue, a_at: Sequence[SSAValue], b: SSAValue, b_at: Sequence[SSAValue],
            length: int) -> SSAValue:  # fmt: skip
        """`sum_e a[*a_at, e] * b[*b_at, e]`, accumulated in a loop-carried scalar."""

        def step(e: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            product = self.mul(self.load(a, [*a_at, e]), self.load(b, [*b_at, e]))
            return [self.add(carried[0], product)]

        zero = self.real(0.0)
        return self.loop(self.index(0), self.index(length), self.index(1), [zero], step, "e")[0]

    def scale_row(self, ref: SSAValue, at: Sequence[SSAValue], factor: SSAValue, n: int) -> None:
        """`ref[*at, :] *= factor`."""
        self.range(
            self.index(n),
            lambda e: self.store(self.mul(self.load(ref, [*at, e]), factor), ref, [*at, e]),
            "e",
        )

    def axpy_row(self, ref: SSAValue, at: Sequence[SSAValue], factor: SSAValue,
                 src: SSAValue, src_at: Sequence[SSAValue], n: int) -> None:  # fmt: skip
        """`ref[*at, :] += factor * src[*src_at, :]`."""

        def body(e: SSAValue) -> None:
            term = self.mul(factor, self.load(src, [*src_at, e]))
            self.store(self.add(self.load(ref, [*at, e]), term), ref, [*at, e])

        self.range(self.index(n), body, "e")

    def fill_row(self, ref: SSAValue, at: Sequence[SSAValue], n: int) -> None:
        zero = self.real(0.0)
        self.range(self.index(n), lambda e: self.store(zero, ref, [*at, e]), "e")


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


@dataclass
class AttentionKernelBuilder:
    """The body of one attention kernel (module docstring), argument by argument."""

    spec: contract.AttentionKernel
    args: list[SSAValue]
    block_size: int

    def __post_init__(self) -> None:
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
        *self.batch, self.rows, self.depth = _shape(q)
        self.keys = _shape(k)[-2]
        self.value_depth = _shape(self.operands["v"])[-1] if "v" in self.operands else 0
        q_type = q.type
        assert isinstance(q_type, MemRefType) and isinstance(q_type.element_type, AnyFloat)
        self.element = q_type.element_type

    def build(self, block: Block) -> None:
        nest = NestBuilder(Builder(InsertPoint.at_end(block)), self.element)
        computes = self.spec.computes
        if "out" in computes or "lse" in computes:
            self.parallel(nest, self.rows, self.forward_row)
        if "dq" in computes:
            self.parallel(nest, self.rows, self.dq_row)
        if "dk" in computes or "dv" in computes:
            self.parallel(nest, self.keys, self.dkv_row)
        nest.builder.insert(func.ReturnOp())

    def parallel(
        self, nest: NestBuilder, rows: int,
        body: Callable[[NestBuilder, list[SSAValue], SSAValue], None],
    ) -> None:  # fmt: skip
        """`scf.parallel` over the batch dims and `rows`; `body(nest, batch, row)`."""
        extents = [*self.batch, rows]
        zero, one = nest.index(0), nest.index(1)
        inner = Block([scf.ReduceOp()], arg_types=[IndexType()] * len(extents))
        for d, arg in enumerate(inner.args):
            arg.name_hint = f"b{d}" if d < len(self.batch) else "r"
        bounds = [nest.index(n) for n in extents]
        nest.builder.insert(scf.ParallelOp([zero] * len(extents), bounds, [one] * len(extents),
                                           Region(inner)))  # fmt: skip
        inside = NestBuilder(Builder(InsertPoint.before(inner.last_op)), self.element)  # type: ignore[arg-type]
        body(inside, list(inner.args[:-1]), inner.args[-1])

    def score(self, nest: NestBuilder, batch: list[SSAValue], i: SSAValue, j: SSAValue) -> SSAValue:
        """`scale * q[b, i] . k[b, j]`, masked."""
        q, k = self.operands["q"], self.operands["k"]
        dot = nest.dot(q, [*batch, i], k, [*batch, j], self.depth)
        x = nest.mul(dot, nest.real(self.spec.scale))
        if self.mask is None:
            return x
        zero = nest.index(0)
        extents = _shape(self.mask)
        at = [v if n > 1 else zero for v, n in zip([*batch, i, j], extents, strict=True)]
        value = nest.load(self.mask, at)
        assert isinstance(self.mask.type, MemRefType)
        if self.mask.type.element_type == i1:
            return nest.select(value, x, nest.real(float("-inf")))
        return nest.add(x, value)

    def key_end(self, nest: NestBuilder, i: SSAValue) -> SSAValue:
        """The keys row `i` sees: `min(S, i + 1)` when causal, else `S`."""
        keys = nest.index(self.keys)
        if not self.spec.causal:
            return keys
        return nest.insert(arith.MinSIOp(keys, nest.insert(arith.AddiOp(i, nest.index(1)))))

    def live(self, nest: NestBuilder, value: SSAValue) -> tuple[SSAValue, SSAValue]:
        """(whether `value` is not -inf, `value` or 0 where it is -inf): the shift of a row
        that attends to nothing, where `exp(-inf - -inf)` would be NaN."""
        alive = nest.compare(value, nest.real(float("-inf")), "one")
        return alive, nest.select(alive, value, nest.real(0.0))

    def forward_row(self, nest: NestBuilder, batch: list[SSAValue], i: SSAValue) -> None:
        out = self.outs.get("out")
        v = self.operands.get("v")
        at = [*batch, i]
        if out is not None:
            nest.fill_row(out, at, self.value_depth)
        scores = nest.insert(memref.AllocOp.get(self.element, shape=[self.block_size]))
        end = self.key_end(nest, i)
        block = nest.index(self.block_size)

        def key_block(j0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            top, total = carried
            count = nest.insert(arith.MinSIOp(block, nest.insert(arith.SubiOp(end, j0))))

            def block_max(jj: SSAValue, running: list[SSAValue]) -> list[SSAValue]:
                x = self.score(nest, batch, i, nest.insert(arith.AddiOp(j0, jj)))
                nest.store(x, scores, [jj])
                return [nest.insert(arith.MaximumfOp(running[0], x))]

            zero, one = nest.index(0), nest.index(1)
            peak = nest.loop(zero, count, one, [nest.real(float("-inf"))], block_max, "jj")[0]
            new_top = nest.insert(arith.MaximumfOp(top, peak))
            _, shift = self.live(nest, new_top)
            rescale = nest.exp(nest.sub(top, shift))
            if out is not None:
                nest.scale_row(out, at, rescale, self.value_depth)

            def accumulate(jj: SSAValue, running: list[SSAValue]) -> list[SSAValue]:
                p = nest.exp(nest.sub(nest.load(scores, [jj]), shift))
                if out is not None and v is not None:
                    j = nest.insert(arith.AddiOp(j0, jj))
                    nest.axpy_row(out, at, p, v, [*batch, j], self.value_depth)
                return [nest.add(running[0], p)]

            block_sum = nest.loop(zero, count, one, [nest.real(0.0)], accumulate, "jj")[0]
            return [new_top, nest.add(nest.mul(total, rescale), block_sum)]

        inits = [nest.real(float("-inf")), nest.real(0.0)]
        top, total = nest.loop(nest.index(0), end, block, inits, key_block, "j0")
        attends = nest.compare(total, nest.real(0.0), "ogt")
        if out is not None:
            one = nest.real(1.0)
            inverse = nest.select(attends, nest.insert(arith.DivfOp(one, total)), nest.real(0.0))
            nest.scale_row(out, at, inverse, self.value_depth)
        if (lse := self.outs.get("lse")) is not None:
            _, shift = self.live(nest, top)
            log_total = nest.add(shift, nest.insert(math.LogOp(total)))
            nest.store(nest.select(attends, log_total, nest.real(float("-inf"))), lse, at)

    def probability(self, nest: NestBuilder, batch: list[SSAValue], i: SSAValue,
                    j: SSAValue) -> SSAValue:  # fmt: skip
        """`exp(s[i, j] - lse[i])`, 0 in a row that attends to nothing."""
        _, shift = self.live(nest, nest.load(self.operands["lse"], [*batch, i]))
        return nest.exp(nest.sub(self.score(nest, batch, i, j), shift))

    def score_gradient(self, nest: NestBuilder, batch: list[SSAValue], i: SSAValue,
                       j: SSAValue, p: SSAValue) -> SSAValue:  # fmt: skip
        """`scale * p * (dout[i] . v[j] - delta[i])`, the score's gradient times scale."""
        dp = nest.dot(
            self.operands["dout"], [*batch, i], self.operands["v"], [*batch, j], self.value_depth
        )
        centred = nest.sub(dp, nest.load(self.operands["delta"], [*batch, i]))
        return nest.mul(nest.mul(p, centred), nest.real(self.spec.scale))

    def dq_row(self, nest: NestBuilder, batch: list[SSAValue], i: SSAValue) -> None:
        dq, at = self.outs["dq"], [*batch, i]
        nest.fill_row(dq, at, self.depth)

        def key(j: SSAValue) -> None:
            p = self.probability(nest, batch, i, j)
            ds = self.score_gradient(nest, batch, i, j, p)
            nest.axpy_row(dq, at, ds, self.operands["k"], [*batch, j], self.depth)

        nest.range(self.key_end(nest, i), key, "j")

    def dkv_row(self, nest: NestBuilder, batch: list[SSAValue], j: SSAValue) -> None:
        dk, dv, at = self.outs.get("dk"), self.outs.get("dv"), [*batch, j]
        if dk is not None:
            nest.fill_row(dk, at, self.depth)
        if dv is not None:
            nest.fill_row(dv, at, self.value_depth)

        def accumulate(i: SSAValue) -> None:
            p = self.probability(nest, batch, i, j)
            if dv is not None:
                nest.axpy_row(dv, at, p, self.operands["dout"], [*batch, i], self.value_depth)
            if dk is not None:
                ds = self.score_gradient(nest, batch, i, j, p)
                nest.axpy_row(dk, at, ds, self.operands["q"], [*batch, i], self.depth)

        def query(i: SSAValue) -> None:
            if not self.spec.causal:
                return accumulate(i)
            # The rows i >= j, under a test rather than from `j`: the loop keeps a static
            # trip count, which codegen's parallel threshold reads.
            sees = nest.insert(arith.CmpiOp(i, j, "sge"))
            inside = Block([scf.YieldOp()])
            nest.builder.insert(scf.IfOp(sees, [], Region(inside)))
            after = nest.builder.insertion_point
            nest.builder.insertion_point = InsertPoint.before(inside.last_op)  # type: ignore[arg-type]
            accumulate(i)
            nest.builder.insertion_point = after

        nest.range(nest.index(self.rows), query, "i")


def define_attention_kernel(
    function: func.FuncOp, block_size: int, call: func.CallOp | None = None
) -> None:
    """Give the declaration `function` its loop nest and mark it `tess.kernel`. Its
    argument types become those `call` (its one call) passes: a strided view of a slice
    is read where it lies (the nest only loads and stores elements)."""
    spec = contract.ATTENTION_KERNEL.get(function)
    assert spec is not None
    if call is not None:
        types = [v.type for v in call.arguments]
        function.function_type = FunctionType.from_lists(types, [])
    block = Block(arg_types=function.function_type.inputs.data)
    AttentionKernelBuilder(spec, list(block.args), block_size).build(block)
    function.body.add_block(block)
    contract.KERNEL.set(function)


@dataclass(frozen=True)
class TessAttentionKernelsPass(ModulePass):
    """Write the loop nest of every `tess.attention_kernel` declaration."""

    name = "tess-attention-kernels"

    block: int = DEFAULT_BLOCK

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
                define_attention_kernel(function, max(1, self.block), call)


__all__ = ["DEFAULT_BLOCK", "TessAttentionKernelsPass", "define_attention_kernel"]
