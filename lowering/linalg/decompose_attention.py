"""
`tess-decompose-attention`: the attention ops as the tess ops they compute (level 2 ->
level 2), for the `cuda` pipeline.

The CPU lowers `tess.attention` to flash-attention loop nests (`tess-attention-kernels`),
which the gpu passes cannot map: they read outlined linalg kernels. Here each attention op
becomes `scale * q @ k^T` (the mask added or selected, a causal mask from `tess.iota`
rows and columns), a safe softmax (a row of `-inf` gives 0 and a logsumexp of `-inf`) and
the matmuls of the output or of flash attention's gradient: correct on the GPU, with the
`(L, S)` scores built. With `fallback-only` (the `cuda` pipeline) only the ops that
`tess-gpu-attention`'s flash kernels do not take: a head dim (E of q/k or of v) over
`flash_shapes.MAX_FUSED_DEPTH` (each thread keeps a row's accumulators in registers) or an empty
operand. xDSL has no such rewrite: these are tessc's ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.dialects.builder import TessBuilder
from tessc.dialects.tess_attention import AttentionGradOp, AttentionLseOp, AttentionOp
from tessc.dialects.tess_base import is_bool, tensor_shape
from tessc.dialects.tess_elementwise import IotaOp
from tessc.lowering.linalg.flash_shapes import flash_supported

NEG_INF = float("-inf")


def fused_on_gpu(op: AttentionOp | AttentionLseOp | AttentionGradOp) -> bool:
    """Whether `tess-gpu-attention`'s flash kernels compute `op` (module docstring)."""
    value_depth = 0 if isinstance(op, AttentionLseOp) else tensor_shape(op.v)[-1]
    return flash_supported(tensor_shape(op.q), tensor_shape(op.k)[-2], value_depth)


def scores(b: TessBuilder, op: AttentionOp | AttentionLseOp | AttentionGradOp) -> SSAValue:
    """`scale * q @ k^T`, masked: `(..., L, S)`."""
    s = b.mul(b.matmul(op.q, b.transpose(op.k)), b.scalar(op.scale_value, op.q))
    if op.mask is not None:
        if is_bool(op.mask.type.element_type):
            s = b.select(op.mask, s, b.scalar(NEG_INF, s))
        else:
            s = b.add(s, op.mask)
    if op.is_causal:
        rows, cols = tensor_shape(s)[-2:]
        i = b.insert(IotaOp(TensorType(i64, (rows, 1))))
        j = b.insert(IotaOp(TensorType(i64, (1, cols))))
        s = b.select(b.le(j, i), s, b.scalar(NEG_INF, s))
    return s


def finite_or_zero(b: TessBuilder, x: SSAValue) -> SSAValue:
    """`x` where it is not -inf, else 0: the shift of a row that attends to nothing."""
    return b.select(b.gt(x, b.scalar(NEG_INF, x)), x, b.scalar(0.0, x))


def softmax_parts(b: TessBuilder, s: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(`exp(s - top)`, its row sum, `top`), `top` the safe row maximum, sums kept dims."""
    top = finite_or_zero(b, b.reduce_max(s, [-1], keepdim=True))
    e = b.exp(b.sub(s, top))
    return e, b.sum(e, [-1], keepdim=True), top


@dataclass
class Decompose(RewritePattern):
    fallback_only: bool = False


class DecomposeAttention(Decompose):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionOp, rewriter: PatternRewriter) -> None:
        if self.fallback_only and fused_on_gpu(op):
            return
        b = TessBuilder.before(op)
        e, total, _ = softmax_parts(b, scores(b, op))
        attends = b.gt(total, b.scalar(0.0, total))
        inverse = b.select(attends, b.div(b.scalar(1.0, total), total), b.scalar(0.0, total))
        rewriter.replace(op, [], [b.mul(b.matmul(e, op.v), inverse)])


class DecomposeAttentionLse(Decompose):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionLseOp, rewriter: PatternRewriter) -> None:
        if self.fallback_only and fused_on_gpu(op):
            return
        b = TessBuilder.before(op)
        _, total, top = softmax_parts(b, scores(b, op))
        attends = b.gt(total, b.scalar(0.0, total))
        lse = b.select(attends, b.add(top, b.log(total)), b.scalar(NEG_INF, total))
        rewriter.replace(op, [], [b.squeeze(lse, [-1])])


class DecomposeAttentionGrad(Decompose):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionGradOp, rewriter: PatternRewriter) -> None:
        if self.fallback_only and fused_on_gpu(op):
            return
        b = TessBuilder.before(op)
        shift = b.unsqueeze(finite_or_zero(b, op.lse), -1)
        p = b.exp(b.sub(scores(b, op), shift))
        if op.wrt_name == "v":
            rewriter.replace(op, [], [b.matmul(b.transpose(p), op.dout)])
            return
        dp = b.matmul(op.dout, b.transpose(op.v))
        ds = b.mul(b.mul(p, b.sub(dp, b.unsqueeze(op.delta, -1))), b.scalar(op.scale_value, p))
        grad = b.matmul(ds, op.k) if op.wrt_name == "q" else b.matmul(b.transpose(ds), op.q)
        rewriter.replace(op, [], [grad])


@dataclass(frozen=True)
class TessDecomposeAttentionPass(ModulePass):
    """Rewrite the attention ops as the tess ops they compute (module docstring)."""

    name = "tess-decompose-attention"

    fallback_only: bool = False
    """Only what `tess-gpu-attention` does not take (module docstring)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        only = self.fallback_only
        patterns = [DecomposeAttention(only), DecomposeAttentionLse(only),
                    DecomposeAttentionGrad(only)]  # fmt: skip
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns),  # type: ignore[arg-type]
            apply_recursively=False,
        ).rewrite_module(op)


__all__ = ["TessDecomposeAttentionPass"]
