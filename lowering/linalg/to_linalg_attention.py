"""
`tess-to-linalg`'s attention patterns: each attention op becomes a `func.call` of a private
declaration carrying `tess.attention_kernel` (what it computes, the scale, causal), which
`tess-attention-kernels` defines at the loop level as a loop nest streaming the keys with
an online softmax. No `linalg.generic` can hold that nest (a row's running maximum and
sum rescale a vector accumulator), and the generics that could spell attention build the
`(L, S)` scores: a call keeps them out of fusion and bufferizes as any call (out-params).

Siblings share one kernel: an `attention` and the `attention_lse` of the same operands
(its gradient's) become one call computing both, and the `attention_grad`s of the same
operands for `q`, `k` and `v` one call computing them all (they recompute the same
probabilities; the kernel of enough batch entries does so once per tile).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract
from tessc.dialects.tess_attention import AttentionGradOp, AttentionLseOp, AttentionOp

AnyAttention = AttentionOp | AttentionLseOp | AttentionGradOp


def _module(op: Operation) -> ModuleOp:
    parent = op.parent_op()
    while not isinstance(parent, ModuleOp):
        assert parent is not None
        parent = parent.parent_op()
    return parent


def _declare(module: ModuleOp, operands: Sequence[SSAValue], results: Sequence[SSAValue],
             kernel: contract.AttentionKernel) -> str:  # fmt: skip
    """A new private declaration `@attention_kernel_<n>` for `kernel`; its name."""
    names = {f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp)}
    n = 0
    while f"attention_kernel_{n}" in names:
        n += 1
    name = f"attention_kernel_{n}"
    declaration = func.FuncOp.external(name, [v.type for v in operands], [r.type for r in results])
    declaration.sym_visibility = StringAttr("private")
    contract.ATTENTION_KERNEL.set(declaration, kernel)
    module.body.block.add_op(declaration)
    return name


def _same_attention(a: AnyAttention, b: AnyAttention) -> bool:
    return (a.scale_value, a.is_causal, a.mask) == (b.scale_value, b.is_causal, b.mask)


def _replace(
    rewriter: PatternRewriter,
    ops: Sequence[AnyAttention],
    computes: Sequence[str],
    operands: Sequence[SSAValue],
) -> None:
    """One call computing `computes` for `ops` (one op per result), at the first op."""
    first = ops[0]
    kernel = contract.AttentionKernel(tuple(computes), first.scale_value, first.is_causal)
    callee = _declare(_module(first), operands, [op.result for op in ops], kernel)
    call = func.CallOp(callee, list(operands), [op.result.type for op in ops])
    contract.ORIGIN.set(call, first.name)
    rewriter.insert(call, InsertPoint.before(first))
    for op, result in zip(ops, call.res, strict=True):
        if op is not first:
            rewriter.replace(op, [], [result])
    rewriter.replace(first, [], [call.res[0]])


def _mask(op: AnyAttention) -> list[SSAValue]:
    return [] if op.mask is None else [op.mask]


class AttentionToCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionOp, rewriter: PatternRewriter) -> None:
        lse = next(
            (
                use.operation
                for use in op.q.uses
                if isinstance(use.operation, AttentionLseOp)
                and use.operation.k is op.k
                and _same_attention(use.operation, op)
                and use.operation.parent_block() is op.parent_block()
                and op.is_before_in_block(use.operation)
            ),
            None,
        )
        operands = [op.q, op.k, op.v, *_mask(op)]
        if lse is None:
            _replace(rewriter, [op], ["out"], operands)
        else:
            _replace(rewriter, [op, lse], ["out", "lse"], operands)


class AttentionLseToCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionLseOp, rewriter: PatternRewriter) -> None:
        # Not merged into an attention before it: that one's pattern takes this op.
        _replace(rewriter, [op], ["lse"], [op.q, op.k, *_mask(op)])


class AttentionGradToCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionGradOp, rewriter: PatternRewriter) -> None:
        operands = [op.q, op.k, op.v, op.lse, op.delta, op.dout, *_mask(op)]
        siblings: list[AttentionGradOp] = []
        for use in op.dout.uses:
            other = use.operation
            if (
                isinstance(other, AttentionGradOp)
                and other.wrt_name != op.wrt_name
                and other.wrt_name not in [s.wrt_name for s in siblings]
                and list(other.operands) == list(op.operands)
                and _same_attention(other, op)
                and other.parent_block() is op.parent_block()
                and op.is_before_in_block(other)
            ):
                siblings.append(other)
        if len(siblings) > 1:  # in program order: the uses' order is not the block's
            block = op.parent_block()
            assert block is not None
            position = {o: n for n, o in enumerate(block.ops)}
            siblings.sort(key=position.__getitem__)
        ops = [op, *siblings]
        _replace(rewriter, ops, [f"d{o.wrt_name}" for o in ops], operands)


def attention_patterns() -> list[RewritePattern]:
    return [AttentionToCall(), AttentionLseToCall(), AttentionGradToCall()]


__all__ = ["attention_patterns"]
