"""
Split-bf16 master weights (IPEX's "BF16 Split"): an fp32 parameter kept as two 16-bit halves.

The top half of the fp32 bits is a bfloat16, the weight that forward and backward read as
it is (no cast copy); the trailing half, the low 16 bits, lives in the optimizer state
(`state["master_trail"]`, an int16 pytree shaped like the parameters). An optimizer made
with `master_weights="split"` joins the halves into the exact fp32 master, updates it as
it would an fp32 parameter and splits it back, all inside its one fused update kernel, so
the masters evolve bit for bit as an fp32 run's do while the model stores 2 + 2 bytes a
weight and has no separate bf16 copy.

    params, trail = ts.optim.split_params(fp32_params)      # bf16 tops, int16 trails
    opt = ts.optim.SGD(lr=0.1, master_weights="split")
    state = opt.init(params, trail=trail)
    params, state = opt.step(params, grads, state)          # params: the new bf16 tops
    masters = ts.optim.master_params(params, state)         # the fp32 masters, exactly
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import bf16, f32, i16, i32
from xdsl.ir import SSAValue

from tessc.dialects import tess
from tessc.dialects.builder import TessBuilder
from tessc.frontend.pytree import flatten_tree, unflatten_tree
from tessc.frontend.tracer import Tensor, build_in_trace

TRAIL = "master_trail"
"""The optimizer state's slot of trailing halves."""

MASTER_WEIGHTS = (None, "split")


def _is_leaf(value: Any) -> bool:
    return isinstance(value, Tensor | np.ndarray)


def _sixteen(b: TessBuilder) -> SSAValue:
    return b.fill(16, (), "i32")


def join_halves(b: TessBuilder, top: SSAValue, trail: SSAValue) -> SSAValue:
    """The f32 whose top 16 bits are bf16 `top`'s and low 16 bits int16 `trail`'s."""
    sixteen = _sixteen(b)
    high = b.insert(tess.ShLOp(b.cast(b.bitcast(top, i16), i32), sixteen))
    # The trail sign-extends to i32: shifted up and logically down, its bits alone remain.
    low = b.insert(tess.ShLOp(b.cast(trail, i32), sixteen))
    low = b.insert(tess.ShRUOp(low, sixteen))
    return b.bitcast(b.insert(tess.OrOp(high, low)), f32)


def top_half(b: TessBuilder, master: SSAValue) -> SSAValue:
    """The bf16 of `master`'s top 16 bits (truncated, not rounded: the split is lossless)."""
    bits = b.insert(tess.ShRUOp(b.bitcast(master, i32), _sixteen(b)))
    return b.bitcast(b.cast(bits, i16), bf16)


def trailing_half(b: TessBuilder, master: SSAValue) -> SSAValue:
    """`master`'s low 16 bits as an int16."""
    return b.cast(b.bitcast(master, i32), i16)


def join(top: Tensor, trail: Tensor) -> Tensor:
    return build_in_trace(join_halves, top, trail)


class Deferred:
    """A value a traced split step builds anew at each use (`fresh`), so that every
    kernel reading it reads the step's arguments themselves, as an fp32 step reads its
    parameters and gradients, instead of a tensor another kernel computed (which the
    horizontal fusion of per-parameter norms refuses to pack)."""

    def build(self) -> Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class Halves(Deferred):
    """A split parameter: its fp32 master is the join of `top` and `trail`."""

    top: Tensor
    trail: Tensor

    def build(self) -> Tensor:
        return join(self.top, self.trail)


@dataclass(frozen=True)
class Widened(Deferred):
    """A bf16 gradient read as the f32 it exactly is."""

    narrow: Tensor

    def build(self) -> Tensor:
        return self.narrow.astype(np.float32)


def fresh(value: Tensor | Deferred) -> Tensor:
    """`value`, or a new build of a `Deferred` one."""
    return value.build() if isinstance(value, Deferred) else value


def split(master: Tensor) -> tuple[Tensor, Tensor]:
    return build_in_trace(top_half, master), build_in_trace(trailing_half, master)


# ---------------------------------------------------------------------------------------
# on arrays
# ---------------------------------------------------------------------------------------


def _split_array(master: Any) -> tuple[Any, Any]:
    if isinstance(master, Tensor):
        return split(master.astype(np.float32))
    bits = np.ascontiguousarray(master, np.float32).view(np.uint32)
    top = (bits >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
    return top, (bits & 0xFFFF).astype(np.uint16).view(np.int16)


def _join_array(top: Any, trail: Any) -> Any:
    if isinstance(top, Tensor) or isinstance(trail, Tensor):
        return join(top, trail)
    top, trail = np.asarray(top), np.asarray(trail)
    if top.dtype != ml_dtypes.bfloat16 or trail.dtype != np.int16:
        raise TypeError(
            f"split master weights are bfloat16 tops and int16 trails, got {top.dtype} and "
            f"{trail.dtype}"
        )
    high = top.view(np.uint16).astype(np.uint32) << 16
    return (high | trail.view(np.uint16).astype(np.uint32)).view(np.float32)


def split_params(masters: Any) -> tuple[Any, Any]:
    """`(params, trail)`: the bf16 top halves of the fp32 `masters` pytree (the weights a
    model reads) and their int16 trailing halves (for `opt.init(params, trail=trail)`)."""
    structure, leaves = flatten_tree(masters, _is_leaf, "masters")
    halves = [_split_array(leaf) for _, leaf in leaves]
    return (
        unflatten_tree(structure, [top for top, _ in halves]),
        unflatten_tree(structure, [trail for _, trail in halves]),
    )


def master_params(params: Any, state: dict[str, Any]) -> Any:
    """The fp32 master weights of split-bf16 `params` (bf16 top halves) and the optimizer
    `state` of a `master_weights="split"` optimizer (which holds the trailing halves)."""
    if not isinstance(state, dict) or TRAIL not in state:
        raise ValueError(
            f"master_params: `state` has no '{TRAIL}': it is not the state of an optimizer "
            'made with master_weights="split"'
        )
    structure, tops = flatten_tree(params, _is_leaf, "params")
    other, trails = flatten_tree(state[TRAIL], _is_leaf, TRAIL)
    if other != structure:
        raise ValueError(f"master_params: state['{TRAIL}'] does not have the params' structure")
    joined = [_join_array(t, r) for (_, t), (_, r) in zip(tops, trails, strict=True)]
    return unflatten_tree(structure, joined)


def check_master_weights(value: Any) -> str | None:
    if value not in MASTER_WEIGHTS:
        raise ValueError(f'invalid master_weights: {value!r} (None or "split")')
    return value


__all__ = ["TRAIL", "master_params", "split_params"]
