"""
`tess-attention-views`: an attention kernel reads and writes its operands through permuted
views, so a transformer's head split and merge around it (`reshape` then `transpose(1,
2)`) leave no copy kernel (level 3 -> 3, `cpu`, after `tess-fuse`).

A call of a `tess.attention_kernel` declaration whose operand is a transposing copy
(`out[x] = in[x[p0], x[p1], ...]`, nothing else computed) reads the copy's source instead,
with layout `p` (`contract.AttentionKernel.layouts`). A result read by such a copy is
written where the copy would have put it: the call yields the copy's tensor (layout the
inverse permutation), and the result's other readers, generics, read it through their
maps composed with that layout. Each declaration is called once, so its signature takes
the new types. `tess-attention-kernels` permutes each load and store index of an argument
with a layout; it only loads and stores elements, so any permutation is read in place.
The `cuda` pipeline does not run it (`tess-gpu-attention` reads no layouts); the copies
are `tess-gpu-fold-transposes`' to fold there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, FunctionType, ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import OpResult, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable

from tessc.dialects import contract
from tessc.lowering.linalg.generic_analysis import copy_permutation, generic_maps

Layout = tuple[int, ...]


def transposing_copy(op: object) -> tuple[SSAValue, Layout] | None:
    """`(source, p)` when `op` is a generic computing only `out[x] = source[x[p0], ...]`
    for a permutation `p` other than the identity."""
    if not isinstance(op, GenericOp) or (positions := copy_permutation(op)) is None:
        return None
    if positions == tuple(range(len(positions))):
        return None
    return op.inputs[0], positions


def inverse(p: Layout) -> Layout:
    found = [0] * len(p)
    for k, position in enumerate(p):
        found[position] = k
    return tuple(found)


def read_through(op: GenericOp, index: int, layout: Layout) -> None:
    """Input `index` of `op` now holds element `x` at `(x[p] for p in layout)`."""
    maps = generic_maps(op)
    m = maps[index]
    maps[index] = AffineMap(m.num_dims, m.num_symbols, tuple(m.results[p] for p in layout))
    op.properties["indexing_maps"] = ArrayAttr([AffineMapAttr(a) for a in maps])


def reread_result(result: OpResult) -> tuple[GenericOp, Layout] | None:
    """A transposing copy of `result` whose place the kernel may write it in: every other
    reader is a generic reading it as an input, in the same block."""
    copy: tuple[GenericOp, Layout] | None = None
    for use in result.uses:
        user = use.operation
        if not isinstance(user, GenericOp) or use.index >= len(user.inputs):
            return None
        if user.parent_block() is not result.op.parent_block():
            return None
        found = transposing_copy(user)
        if copy is None and found is not None:
            copy = (user, inverse(found[1]))
    return copy


@dataclass(frozen=True)
class ViewOperands(RewritePattern):
    """A call of an attention declaration: its operands and results through views."""

    shared: frozenset[str]
    """Declarations called more than once: their signatures stay."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, call: func.CallOp, rewriter: PatternRewriter) -> None:
        declaration = SymbolTable.lookup_symbol(call, call.callee.root_reference.data)
        if not isinstance(declaration, func.FuncOp) or not declaration.is_declaration:
            return
        spec = contract.ATTENTION_KERNEL.get(declaration)
        if spec is None or declaration.sym_name.data in self.shared:
            return
        n = len(call.arguments)
        layouts = [spec.layout(k) for k in range(n + len(call.res))]
        operands = list(call.arguments)
        for k, operand in enumerate(operands):
            found = transposing_copy(operand.op) if isinstance(operand, OpResult) else None
            if not layouts[k] and found is not None:
                operands[k], layouts[k] = found
        copies: dict[int, GenericOp] = {}
        for j, result in enumerate(call.res):
            found_copy = reread_result(result) if not layouts[n + j] else None
            if found_copy is not None:
                copies[j], layouts[n + j] = found_copy
        if operands == list(call.arguments) and not copies:
            return
        types = [copies[j].res[0].type if j in copies else r.type for j, r in enumerate(call.res)]
        new_call = func.CallOp(call.callee, operands, types)
        new_call.attributes.update(call.attributes)
        rewriter.insert(new_call, InsertPoint.before(call))
        for j, copy in copies.items():
            for use in list(call.res[j].uses):
                if use.operation is not copy:
                    assert isinstance(use.operation, GenericOp)
                    read_through(use.operation, use.index, layouts[n + j])
            init = copy.outputs[0]
            rewriter.replace(copy, [], [new_call.res[j]])
            if isinstance(init, OpResult) and not init.uses:
                rewriter.erase(init.op)
        old_operands = [v for v in call.arguments if v not in operands]
        rewriter.replace(call, [], list(new_call.res))
        for value in old_operands:
            if isinstance(value, OpResult) and not any(r.uses for r in value.op.results):
                init = value.op.operands[-1]
                rewriter.erase(value.op)
                if isinstance(init, OpResult) and not init.uses:
                    rewriter.erase(init.op)
        declaration.function_type = FunctionType.from_lists([v.type for v in operands], types)
        contract.ATTENTION_KERNEL.set(declaration, replace(spec, layouts=tuple(layouts)))


@dataclass(frozen=True)
class TessAttentionViewsPass(ModulePass):
    """Attention kernels read and write through permuted views (module docstring)."""

    name = "tess-attention-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        counts: dict[str, int] = {}
        for call in op.walk():
            if isinstance(call, func.CallOp):
                name = call.callee.root_reference.data
                counts[name] = counts.get(name, 0) + 1
        shared = frozenset(name for name, count in counts.items() if count > 1)
        walker = PatternRewriteWalker(ViewOperands(shared), apply_recursively=False)
        walker.rewrite_module(op)


__all__ = ["TessAttentionViewsPass", "transposing_copy"]
