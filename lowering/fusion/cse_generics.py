"""
`tess-cse-generics`: one `linalg.generic` on tensors for each computation the program
spells twice (level 3).

xDSL's `cse` never merges two generics on tensors: each writes its own `tensor.empty` and
holds a region. Fusion and `tess-pack-narrow` make such twins (an MLP's `w2` transposed
twice, `h = relu(pre + b)` recomputed by a transposed product). Two generics of one block
are merged when they read the same values through the same maps and iterators, their pure
bodies are structurally equal and their inits equal (or unread empties of one type); a
generic whose result is another's `outs` is left alone. The rule in full is in
lowering/fusion/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.traits import is_side_effect_free


def _merge_key(op: GenericOp) -> tuple[object, ...] | None:
    """What must be equal for `op` to compute what another generic computes (besides its
    body), or None if its results are not a function of its operands alone."""
    *body, _ = op.body.block.ops  # the last is the linalg.yield
    if not all(is_side_effect_free(inner) for inner in body) or _is_init(op):
        return None
    parallel = all(it.data == IteratorType.PARALLEL for it in op.iterator_types)
    out_args = op.body.block.args[len(op.inputs) :]
    if parallel and not any(arg.uses for arg in out_args):
        inits: tuple[object, ...] = tuple(v.type for v in op.outputs)
    else:
        inits = tuple(op.outputs)
    return (
        tuple(op.inputs),
        inits,
        tuple(r.type for r in op.results),
        op.indexing_maps,
        op.iterator_types,
    )


def _same_body(a: GenericOp, b: GenericOp) -> bool:
    """Whether the bodies of `a` and `b` compute the same: structurally equal and every op
    giving results of the same types. xDSL's structural equivalence compares operands,
    attributes and properties but not result types, and `arith.fptosi %x : f32 to i32`
    differs from `... to i64` by its result type alone (3e9 wraps in one, not the other)."""
    if not a.body.is_structurally_equivalent(b.body):
        return False
    types_a = [r.type for inner in a.body.walk() for r in inner.results]
    return types_a == [r.type for inner in b.body.walk() for r in inner.results]


def _is_init(op: GenericOp) -> bool:
    """Whether a result of `op` is some generic's init (`outs`): bufferized, that generic
    writes it in place, so a second reader would cost a copy of it."""
    return any(
        isinstance(use.operation, GenericOp) and use.index >= len(use.operation.inputs)
        for result in op.results
        for use in result.uses
    )


def merge_block(block: Block) -> int:
    """Merge the generics of `block` that repeat an earlier one; how many were erased."""
    seen: dict[tuple[object, ...], list[GenericOp]] = {}
    erased = 0
    for op in list(block.ops):
        if not isinstance(op, GenericOp) or (key := _merge_key(op)) is None:
            continue
        twins = seen.setdefault(key, [])
        kept = next((t for t in twins if _same_body(t, op)), None)
        if kept is None:
            twins.append(op)
            continue
        for old, new in zip(op.results, kept.results, strict=True):
            old.replace_all_uses_with(new)
        op.detach()
        op.erase()
        erased += 1
    return erased


@dataclass(frozen=True)
class TessCseGenericsPass(ModulePass):
    """Merge repeated tensor generics; see the module docstring."""

    name = "tess-cse-generics"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        blocks: list[Block] = [
            block for inner in op.walk() for region in inner.regions for block in region.blocks
        ]
        for block in blocks:
            if any(isinstance(o, GenericOp) for o in block.ops):
                merge_block(block)


__all__ = ["TessCseGenericsPass", "merge_block"]
