"""
`tess-fuse-horizontal`'s step 4 (`computed-groups`): the updates of a train step, which
read gradients computed in the same function, as ONE kernel.

Inside a jitted train step every parameter's update `p - lr * g` reads a gradient `g` some
kernel of the step computed, so step 2 refuses it (its arena would have to be written by
the gradients' producers). A 12-layer MLP would still run 12 identical bias-update kernels
(`b - lr * sum(dz, 0)`: the column sum shares no loop with anything, so the update is a
kernel of its own). Updates that step 2 left alone, are elementwise over identity maps,
read at least one computed tensor and are read only by the return, are grouped as step 2
groups (`body_fingerprint`, element type, shared rank-0 operands) and each group with at
least `min-group-size` members becomes one `kernel.group`: one kernel running the members'
loops one after the other, each reading its operands where they lie (no packing copy).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from xdsl.dialects import func
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Block, Operation, OpResult

from tessc.dialects.kernel import GroupOp, wrap_in_group
from tessc.lowering.fusion.fuse_horizontal_groups import (
    body_fingerprint,
    element_of,
    elementwise_refusal,
    inputs_with_maps,
    is_shared_operand,
)


def computed_update_key(op: GenericOp, ret: func.ReturnOp) -> Hashable | None:
    """The class of `op` as an update reading a computed tensor, or None if it is not one:
    elementwise, some full-rank operand is an op's result, every result read only by the
    return."""
    if elementwise_refusal(op) is not None:
        return None
    inputs = inputs_with_maps(op)
    shared = tuple((k, v) for k, (v, m) in enumerate(inputs) if is_shared_operand(v, m))
    if not any(isinstance(v, OpResult) and not is_shared_operand(v, m) for v, m in inputs):
        return None
    if not all(use.operation is ret for result in op.results for use in result.uses):
        return None
    return (body_fingerprint(op.body.block), element_of(op.results[0]), shared)


def group_computed_updates(
    block: Block, ret: func.ReturnOp, refused: Mapping[Operation, str], min_size: int
) -> list[GroupOp]:
    """Wrap each class of at least `min_size` updates of `block` that reading a computed
    tensor kept out of an arena (`refused` by step 2) in one `kernel.group`, in program
    order; the groups made."""
    classes: dict[Hashable, list[GenericOp]] = {}
    for op in block.ops:
        if isinstance(op, GenericOp) and op in refused:
            key = computed_update_key(op, ret)
            if key is not None:
                classes.setdefault(key, []).append(op)
    return [wrap_in_group(members) for members in classes.values() if len(members) >= min_size]


__all__ = ["computed_update_key", "group_computed_updates"]
