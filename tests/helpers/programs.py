"""
tess programs for tests: `build_single_op_module` (one op, built with the op's own
`__init__`, which infers the result type), `random_program` (a hypothesis strategy for small
random programs: a DAG of maps, broadcasting zips, reductions, shape ops, matmul and
select) and `compiled_examples` (hypothesis settings for tests that compile kernels).

Random programs stay numerically tame on inputs in [-2, 2] (the `random_inputs`
default), so that a difference between the compiler and the oracle is a bug rather than
rounding: `log`, `sqrt` and `reciprocal` only see `abs(x) + 1`, `exp` only sees `tanh(x)`,
a divisor is always `abs(y) + 1`, `pow` raises `abs(x) + 1` to `tanh(y)`, and any value
whose magnitude bound exceeds `MAGNITUDE_LIMIT` is squashed by `tanh` before it is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from tessc.dialects import tess
from tessc.dialects.tess import broadcast_shapes, tensor_shape

from helpers.shapes import (
    MAX_RANK,
    Shape,
    _as_tensor_type,
    element_type,
    reduce_dims,
    shapes,
    tensor_type,
)

MAX_RESULTS = 3
MAGNITUDE_LIMIT = 100.0
"""Values whose magnitude bound exceeds this are passed through tanh before further use."""


TESS_OPS: dict[str, type[Operation]] = {op.name: op for op in tess.Tess.operations}


def _module_with_func(func_name: str, block: Block, results: Sequence[SSAValue]) -> ModuleOp:
    block.add_op(func.ReturnOp(*results))
    function_type = ([arg.type for arg in block.args], [r.type for r in results])
    func_op = func.FuncOp(func_name, function_type, Region(block))
    return ModuleOp([func_op])


def build_single_op_module(
    op_name: str,
    input_types: Sequence[TensorType | tuple[Sequence[int], Any]],
    *,
    func_name: str = "main",
    **props: Any,
) -> ModuleOp:
    """
    `func.func @main(inputs...) { %r = tess.<op>(inputs...); return %r }`.

    `op_name` is `"tess.add"` or just `"add"`; `input_types` are TensorTypes or
    `(shape, dtype)` pairs; `props` go to the op's `__init__`: `dims=[1], keepdim=True`
    for reductions, `dims=` for permute, `shape=` for reshape/broadcast_to,
    `value=, type=` for fill (which takes no inputs). The module is verified.
    """
    name = op_name if op_name.startswith("tess.") else f"tess.{op_name}"
    op_class = TESS_OPS.get(name)
    if op_class is None:
        raise KeyError(f"no op {name} in the tess dialect")
    types = [_as_tensor_type(t) for t in input_types]
    if "type" in props:
        props["type"] = _as_tensor_type(props["type"])
    block = Block(arg_types=types)
    op = op_class(*block.args, **props)
    block.add_op(op)
    module = _module_with_func(func_name, block, op.results)
    module.verify()
    return module


_UNARY_STEPS = ("neg", "relu", "sigmoid", "tanh", "abs", "exp", "log", "sqrt", "reciprocal")
_BINARY_STEPS = ("add", "sub", "mul", "max", "min", "div", "pow")
_COMPARISON_STEPS = ("lt", "gt", "eq")
STEP_KINDS = (
    "unary", "binary", "reduce", "permute", "reshape", "broadcast_to", "matmul", "select",
)  # fmt: skip
"""What one step of `random_program` may be; pass a subset as its `kinds`."""
_STEP_WEIGHTS = {"unary": 2, "binary": 3, "reduce": 2}  # the rest weigh 1


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


class _ProgramBuilder:
    """Draws the ops of one random program into a block, tracking a magnitude bound."""

    def __init__(self, draw: st.DrawFn, dtype: Attribute, max_inputs: int, max_side: int) -> None:
        self.draw = draw
        self.dtype = dtype
        self.max_inputs = max_inputs
        self.max_side = max_side
        self.block = Block()
        self.pool: list[SSAValue] = []  # values later steps may use
        self.bound: dict[SSAValue, float] = {}  # |value| <= bound on inputs in [-2, 2]

    # -- values ---------------------------------------------------------------------

    def new_input(self, shape: Shape) -> SSAValue:
        arg = self.block.insert_arg(tensor_type(shape, self.dtype), len(self.block.args))
        self.pool.append(arg)
        self.bound[arg] = 2.0
        return arg

    def can_add_input(self) -> bool:
        return len(self.block.args) < self.max_inputs

    def add(self, op: Operation, bound: float, *, pool: bool = True) -> SSAValue:
        self.block.add_op(op)
        result = op.results[0]
        self.bound[result] = bound
        if pool:
            self.pool.append(result)
        return result

    def tame(self, value: SSAValue) -> SSAValue:
        """`value`, or `tanh(value)` if its magnitude bound is too large to build on."""
        if self.bound[value] <= MAGNITUDE_LIMIT:
            return value
        return self.add(tess.TanhOp(value), 1.0, pool=False)

    def scalar(self, constant: float) -> SSAValue:
        return self.add(
            tess.FillOp(constant, tensor_type((), self.dtype)), abs(constant), pool=False
        )

    def abs_plus_one(self, value: SSAValue) -> SSAValue:
        magnitude = self.add(tess.AbsOp(value), self.bound[value], pool=False)
        one = self.scalar(1.0)
        return self.add(tess.AddOp(magnitude, one), self.bound[value] + 1, pool=False)

    def pick(self, values: Sequence[SSAValue] | None = None) -> SSAValue:
        """One of `values` (default: the pool), often the newest, to grow chains not fans."""
        candidates = list(values or self.pool)
        if self.draw(st.booleans()):
            return self.tame(candidates[-1])
        return self.tame(self.draw(st.sampled_from(candidates)))

    def partner(self, shape: Shape) -> SSAValue:
        """A value (existing or a new input) whose shape broadcasts with `shape`."""
        fits = [v for v in self.pool if _broadcast_rank(tensor_shape(v), shape) <= MAX_RANK]
        if fits and (not self.can_add_input() or self.draw(st.booleans())):
            return self.pick(fits)
        return self.new_input(self.draw(self.partner_shape(shape)))

    def partner_shape(self, shape: Shape, max_rank: int = MAX_RANK) -> st.SearchStrategy[Shape]:
        """Shapes that broadcast with `shape` to a shape of rank <= max_rank."""
        side = st.integers(1, self.max_side)

        @st.composite
        def strategy(draw: st.DrawFn) -> Shape:
            aligned = tuple(draw(side) if d == 1 else draw(st.sampled_from((d, 1))) for d in shape)
            if draw(st.booleans()):  # drop leading dims of the partner
                return aligned[draw(st.integers(0, len(aligned))) :]
            extra = draw(st.lists(side, max_size=max(0, max_rank - len(shape))))
            return (*extra, *aligned)

        return strategy()

    # -- steps ----------------------------------------------------------------------

    def step(self, kind: str, comparisons: bool) -> SSAValue | None:
        """One logical op of the program (plus the helper ops that keep it tame)."""
        draw = self.draw
        if kind == "unary":
            return self.unary(draw(st.sampled_from(_UNARY_STEPS)), self.pick())
        if kind == "binary":
            names = _BINARY_STEPS + (_COMPARISON_STEPS if comparisons else ())
            lhs = self.pick()
            return self.binary(draw(st.sampled_from(names)), lhs, self.partner(tensor_shape(lhs)))
        if kind == "reduce":
            ranked = [v for v in self.pool if tensor_shape(v)]
            if not ranked:
                return None
            value = self.pick(ranked)
            shape = tensor_shape(value)
            dims = draw(reduce_dims(shape, min_size=1))
            keepdim = draw(st.booleans())
            op_class = draw(st.sampled_from(tess.REDUCE_OPS))
            count = int(np.prod([shape[d] for d in dims]))
            bound = self.bound[value] * (count if op_class is tess.SumOp else 1)
            return self.add(op_class(value, dims, keepdim), bound)
        if kind == "permute":
            ranked = [v for v in self.pool if len(tensor_shape(v)) >= 2]
            if not ranked:
                return None
            value = self.pick(ranked)
            perm = draw(st.permutations(range(len(tensor_shape(value)))))
            return self.add(tess.PermuteOp(value, perm), self.bound[value])
        if kind == "reshape":
            value = self.pick()
            return self.add(
                tess.ReshapeOp(value, self.reshape_target(tensor_shape(value))), self.bound[value]
            )
        if kind == "broadcast_to":
            value = self.pick()
            shape = tensor_shape(value)
            extra = draw(st.lists(st.integers(1, self.max_side), max_size=MAX_RANK - len(shape)))
            grown = tuple(draw(st.integers(1, self.max_side)) if d == 1 else d for d in shape)
            return self.add(tess.BroadcastToOp(value, (*extra, *grown)), self.bound[value])
        if kind == "matmul":
            return self.matmul()
        if kind == "select":
            lhs = self.pick()
            test = self.partner(tensor_shape(lhs))
            cond = self.add(tess.GtOp(test, self.scalar(0.0)), 1.0, pool=False)
            rhs = self.partner(broadcast_shapes(tensor_shape(lhs), tensor_shape(cond)))
            bound = max(self.bound[lhs], self.bound[rhs])
            return self.add(tess.SelectOp(cond, lhs, rhs), bound)
        raise ValueError(f"unknown step kind {kind}")

    def unary(self, name: str, x: SSAValue) -> SSAValue:
        b = self.bound[x]
        if name == "exp":
            return self.add(tess.ExpOp(self.add(tess.TanhOp(x), 1.0, pool=False)), float(np.e))
        if name in ("log", "sqrt", "reciprocal"):
            shifted = self.abs_plus_one(x)
            op_class = {"log": tess.LogOp, "sqrt": tess.SqrtOp, "reciprocal": tess.ReciprocalOp}
            bounds = {"log": float(np.log1p(b)), "sqrt": float(np.sqrt(b + 1)), "reciprocal": 1.0}
            return self.add(op_class[name](shifted), bounds[name])
        op_class = TESS_OPS[f"tess.{name}"]
        return self.add(op_class(x), 1.0 if name in ("sigmoid", "tanh") else b)

    def binary(self, name: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        bl, br = self.bound[lhs], self.bound[rhs]
        if name == "div":
            return self.add(tess.DivOp(lhs, self.abs_plus_one(rhs)), bl)
        if name == "pow":
            base = self.abs_plus_one(lhs)
            exponent = self.add(tess.TanhOp(rhs), 1.0, pool=False)
            return self.add(tess.PowOp(base, exponent), bl + 1)
        bounds = {"add": bl + br, "sub": bl + br, "mul": bl * br, "max": max(bl, br)}
        bounds |= {"min": max(bl, br), "lt": 1.0, "gt": 1.0, "eq": 1.0}
        return self.add(TESS_OPS[f"tess.{name}"](lhs, rhs), bounds[name])

    def matmul(self) -> SSAValue | None:
        draw = self.draw
        matrices = [v for v in self.pool if len(tensor_shape(v)) >= 2]
        if matrices and (not self.can_add_input() or draw(st.booleans())):
            lhs = self.pick(matrices)
        elif self.can_add_input():
            lhs = self.new_input(draw(shapes(2, 3, self.max_side)))
        else:
            return None
        lhs_shape = tensor_shape(lhs)
        batch, k = lhs_shape[:-2], lhs_shape[-1]

        def fits(v: SSAValue) -> bool:
            s = tensor_shape(v)
            return len(s) >= 2 and s[-2] == k and _broadcast_rank(s[:-2], batch) <= MAX_RANK - 2

        rhs_candidates = [v for v in self.pool if fits(v)]
        if rhs_candidates and (not self.can_add_input() or draw(st.booleans())):
            rhs = self.pick(rhs_candidates)
        elif self.can_add_input():
            rhs_batch = draw(self.partner_shape(batch, MAX_RANK - 2))
            rhs = self.new_input((*rhs_batch, k, draw(st.integers(1, self.max_side))))
        else:
            return None
        return self.add(tess.MatmulOp(lhs, rhs), self.bound[lhs] * self.bound[rhs] * k)

    def reshape_target(self, shape: Shape) -> Shape:
        factors = _prime_factors(int(np.prod(shape)))
        rank = self.draw(st.integers(1 if factors else 0, MAX_RANK))
        dims = [1] * rank
        for factor in factors:
            dims[self.draw(st.integers(0, rank - 1))] *= factor
        return tuple(dims)


def _broadcast_rank(a: Shape, b: Shape) -> int:
    """The rank of the broadcast of `a` and `b`, or MAX_RANK + 1 if they do not broadcast."""
    try:
        return len(broadcast_shapes(a, b))
    except ValueError:
        return MAX_RANK + 1


@st.composite
def random_program(
    draw: st.DrawFn,
    min_ops: int = 2,
    max_ops: int = 8,
    dtypes: Sequence[str] = ("f32", "f64"),
    comparisons: bool = True,
    kinds: Sequence[str] = STEP_KINDS,
    max_inputs: int = 4,
    max_side: int = 4,
    func_name: str = "main",
) -> tuple[ModuleOp, str]:
    """
    A random, verified tess program `(module, func_name)` of `min_ops`..`max_ops` steps.

    Each step is one op drawn from maps, broadcasting zips (comparisons optional),
    reductions with and without keepdim, permute, reshape, broadcast_to, batched matmul
    and select, restricted to `kinds` (a subset of STEP_KINDS; a step that cannot be
    built, e.g. a permute with no value of rank >= 2, becomes a map). Tame-making helper
    ops (abs, +1, tanh, fills, and the `gt` that makes a select's condition) come on top
    of that count.
    Operands are earlier values or new func arguments (up to `max_inputs`) of shapes that
    broadcast with them. The func returns the values no later op uses (at most
    MAX_RESULTS, always including the last step's). Inputs from `random_inputs` (in
    [-2, 2]) give finite results.
    """
    unknown = set(kinds) - set(STEP_KINDS)
    if unknown or not kinds:
        raise ValueError(f"step kinds must be a non-empty subset of {STEP_KINDS}, not {kinds}")
    weighted_kinds = [k for k in STEP_KINDS if k in kinds for _ in range(_STEP_WEIGHTS.get(k, 1))]
    dtype = element_type(draw(st.sampled_from(list(dtypes))))
    builder = _ProgramBuilder(draw, dtype, max_inputs, max_side)
    builder.new_input(draw(shapes(0, 3, max_side)))
    if draw(st.booleans()):
        builder.new_input(draw(shapes(0, 3, max_side)))
    results: list[SSAValue] = []
    for _ in range(draw(st.integers(min_ops, max_ops))):
        kind = draw(st.sampled_from(weighted_kinds))
        value = builder.step(kind, comparisons)
        if value is None:  # the step had nothing to work on: a map always can
            value = builder.unary(draw(st.sampled_from(_UNARY_STEPS)), builder.pick())
        results.append(value)
    # Return the values nothing else uses (the sinks of the DAG), so that no step is dead
    # code, except that at most MAX_RESULTS are returned and the last step always is.
    sinks = [v for v in dict.fromkeys(results) if not v.uses]
    returned = sinks[-MAX_RESULTS:]
    module = _module_with_func(func_name, builder.block, returned)
    module.verify()
    return module, func_name


def compiled_examples(n: int) -> settings:
    """Hypothesis settings for tests that compile kernels: `n` derandomized examples (the same
    programs every run, so the on-disk kernel cache makes reruns fast), no deadline."""
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
