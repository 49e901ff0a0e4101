"""
`tess-fuse-horizontal`'s step 1 (`merge-siblings`): two all-parallel generics over one
iteration space that read a common tensor become one multi-output generic.

Both bodies go into one block and xDSL's `cse` computes once what `tess-fuse` duplicated
into each (Adagrad's `s + g * g`), so that each parameter's update is one generic before
the grouping. Legal when every use of the first one's results comes after the second; the
merged op takes the second's place. A step of its own, apart from the arena rewrite
(`fuse_horizontal_arenas.py`); the pass is `fuse_horizontal.py`, its algorithm in
lowering/fusion/README.md.
"""

from __future__ import annotations

from xdsl.dialects.builtin import AffineMapAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.transforms.common_subexpression_elimination import cse

from tessc.lowering.fusion.fuse_horizontal_groups import (
    append_body,
    element_of,
    elementwise_refusal,
    inputs_with_maps,
    is_shared_operand,
    shape_of,
)
from tessc.lowering.linalg.generic_analysis import generic_maps


def can_merge_siblings(first: GenericOp, second: GenericOp, block: Block) -> bool:
    """`first` and the later `second` iterate the same space, share a tensor input, and
    every use of `first`'s results comes after `second` (so `second` does not depend on it).
    Their outputs may differ in dtype (each output position is an arena of its own)."""
    if elementwise_refusal(first) or elementwise_refusal(second):
        return False
    if shape_of(first.results[0]) != shape_of(second.results[0]):
        return False
    shared = {v for v, m in inputs_with_maps(first) if not is_shared_operand(v, m)}
    if not any(v in shared for v in second.inputs):
        return False
    for result in first.results:
        for use in result.uses:
            user = block.find_ancestor_op_in_block(use.operation)
            if user is None or user is second or not second.is_before_in_block(user):
                return False
    return True


def merge_siblings(first: GenericOp, second: GenericOp) -> GenericOp:
    """One generic computing both, in `second`'s place; both are erased."""
    inputs: list[tuple[SSAValue, AffineMap]] = []
    for value, affine_map in inputs_with_maps(first) + inputs_with_maps(second):
        if not any(v is value and m == affine_map for v, m in inputs):
            inputs.append((value, affine_map))
    outputs = [*first.outputs, *second.outputs]
    out_maps = [
        *generic_maps(first)[len(first.inputs) :],
        *generic_maps(second)[len(second.inputs) :],
    ]
    block = Block(arg_types=[element_of(v) for v in (*(v for v, _ in inputs), *outputs)])
    yielded: list[SSAValue] = []
    for op, offset in ((first, 0), (second, len(first.outputs))):
        body = op.body.block
        mapping: dict[SSAValue, SSAValue] = {}
        for index, (value, affine_map) in enumerate(inputs_with_maps(op)):
            slot = next(k for k, (v, m) in enumerate(inputs) if v is value and m == affine_map)
            mapping[body.args[index]] = block.args[slot]
        for index in range(len(op.outputs)):
            mapping[body.args[len(op.inputs) + index]] = block.args[len(inputs) + offset + index]
        yielded += append_body(body, block, mapping)
    block.add_op(YieldOp(*yielded))
    merged = GenericOp(
        [v for v, _ in inputs],
        outputs,
        Region(block),
        [AffineMapAttr(m) for m in (*(m for _, m in inputs), *out_maps)],
        second.iterator_types,
        [*first.result_types, *second.result_types],
    )
    merged.attributes.update({**first.attributes, **second.attributes})
    parent = second.parent_block()
    assert parent is not None
    parent.insert_op_before(merged, second)
    cse(merged.body.block)
    for old, new in zip([*first.results, *second.results], merged.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for op in (second, first):
        op.detach()
        op.erase()
    return merged


def merge_all_siblings(block: Block) -> None:
    """Merge sibling generics of `block` until none is left: each generic, in program
    order, with the first later reader of one of its tensors it can merge with, again and
    again (the merged op may have further siblings)."""
    worklist = [op for op in block.ops if isinstance(op, GenericOp)][::-1]
    while worklist:
        first = worklist.pop()
        if first.parent is not block or elementwise_refusal(first):
            continue
        readers = {use.operation for v in first.inputs if shape_of(v) for use in v.uses}
        candidates = [
            op
            for op in block.ops
            if op in readers and op is not first and first.is_before_in_block(op)
        ]
        for second in candidates:
            if isinstance(second, GenericOp) and can_merge_siblings(first, second, block):
                worklist.append(merge_siblings(first, second))
                break
