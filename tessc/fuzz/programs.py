"""
Random `tess` programs: DAGs of broadcasting zips, maps, reductions (with and without
`keepdim`), matmul and batched matmul, reshape/permute/broadcast_to, slices (negative
strides too) and concatenation, fills and selects; integer inputs (`i32`/`i64`) and integer
zips, casts (float -> int -> float, f32 <-> f64), gathers (`take`, whose indices may be
negative, repeated or out of range: clamped), `one_hot` and `argmax`/`argmin`; 1-D and 2-D
`conv` (strides, dilations, padding, groups), `pool` (max, avg, argmax) and `pad`. Now and then
a shape has a zero-size dim (`ZERO_DIM_CHANCE`), which broadcasting, matmuls, reductions
and reshapes carry on; a reduction over an empty dim is a sum (0: the mean, NaN, and the
max, -inf, are not tame); `take` and the arg-reductions, which the verifier refuses on an
empty dim, use a non-empty one.

Every value but the integer ones has the program's float type. A float -> int cast and an
arg-reduction only read arguments: a value computed in two orders may differ in its last
bit, which truncation or a near tie would turn into a different integer, a false alarm.

A `Program` is a list of `Op`s over named values; operands come from earlier results or
from function arguments created on demand (`ProgramBuilder.operand`), so every op can ask for
an operand of the exact shape it needs. Values are kept in a numerically tame range: maps
that blow up (`exp`, `log`, `sqrt`, `reciprocal`, `div`, `pow`) only ever see operands made
safe first (`tanh`, `1 + x*x`), so a difference between a pipeline and the reference
interpreter is a miscompile, not rounding of an overflow.

`Program.text()` prints the `.mlir`; `Program.without(i)` is the program with op `i`
replaced by a new argument (what the shrinker tries).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tessc.dialects.tess_conv import conv_shape, pool_shape

Shape = tuple[int, ...]

UNARY = ("neg", "relu", "sigmoid", "tanh", "abs", "erf")
SAFE_UNARY = ("exp", "log", "sqrt", "reciprocal")  # applied to 1 + x*x or tanh(x)
BINARY = ("add", "sub", "mul", "max", "min")
COMPARE = ("lt", "gt")
REDUCE = ("sum", "mean", "reduce_max")
INTEGER_BINARY = ("add", "sub", "mul", "max", "min")
INTEGER_TYPES = ("i32", "i64")
SMOOTH_UNARY = ("neg", "sigmoid", "tanh", "erf")  # for gradient programs: no kinks
POOL_KINDS = ("max", "avg", "argmax")
ZERO_DIM_CHANCE = 0.04
"""The chance that a new shape (of rank >= 1) has one dim of size 0."""


@dataclass(frozen=True)
class Op:
    """`result = tess.<kind> operands {attrs} : ... -> shape`."""

    result: str
    kind: str
    operands: tuple[str, ...]
    shape: Shape
    attrs: tuple[tuple[str, object], ...] = ()
    dtype: str | None = None
    """The result's element type when it is not the program's (integers, a cast)."""

    def attr(self, name: str) -> object:
        return dict(self.attrs)[name]


@dataclass
class Program:
    args: list[tuple[str, Shape]]
    ops: list[Op]
    outputs: list[str]
    dtype: str = "f32"
    name: str = "f"
    arg_types: dict[str, str] = field(default_factory=dict)
    """Element types of the arguments that are not the program's (integer inputs)."""
    shapes: dict[str, Shape] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.shapes = dict(self.args) | {op.result: op.shape for op in self.ops}
        self.types = dict(self.arg_types) | {op.result: op.dtype for op in self.ops if op.dtype}

    def element(self, value: str) -> str:
        return self.types.get(value, self.dtype)

    def tensor(self, shape: Shape, element: str | None = None) -> str:
        return "tensor<" + "".join(f"{d}x" for d in shape) + (element or self.dtype) + ">"

    def type_of(self, value: str) -> str:
        return self.tensor(self.shapes[value], self.element(value))

    def text(self) -> str:
        params = ", ".join(f"%{name}: {self.type_of(name)}" for name, _ in self.args)
        results = [self.type_of(v) for v in self.outputs]
        result_text = results[0] if len(results) == 1 else f"({', '.join(results)})"
        lines = [f"func.func @{self.name}({params}) -> {result_text} {{"]
        for op in self.ops:
            lines.append("  " + self._op_text(op))
        outs = ", ".join(f"%{v}" for v in self.outputs)
        lines.append(f"  func.return {outs} : {', '.join(results)}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _op_text(self, op: Op) -> str:
        ins = ", ".join(f"%{v}" for v in op.operands)
        in_types = ", ".join(self.type_of(v) for v in op.operands)
        out_type = self.tensor(op.shape, op.dtype)
        head = f"%{op.result} = tess.{op.kind}"
        if op.kind in UNARY or op.kind in SAFE_UNARY:
            return f"{head} {ins} : {out_type}"
        if op.kind in BINARY or op.kind in COMPARE or op.kind in ("div", "pow", "matmul"):
            return f"{head} {ins} : {in_types} -> {out_type}"
        if op.kind in ("cast", "one_hot"):
            return f"{head} {ins} : {in_types} -> {out_type}"
        if op.kind in ("argmax", "argmin", "take"):
            keep = " keepdim" if op.kind != "take" and op.attr("keepdim") else ""
            return f"{head} {ins} dim = [{op.attr('dim')}]{keep} : {in_types} -> {out_type}"
        if op.kind in REDUCE:
            dims = ", ".join(str(d) for d in op.attr("dims"))  # type: ignore[attr-defined]
            keep = " keepdim" if op.attr("keepdim") else ""
            return f"{head} {ins} dims = [{dims}]{keep} : {in_types} -> {out_type}"
        if op.kind == "permute":
            dims = ", ".join(str(d) for d in op.attr("dims"))  # type: ignore[attr-defined]
            return f"{head} {ins} dims = [{dims}] : {in_types} -> {out_type}"
        if op.kind in ("reshape", "broadcast_to"):
            return f"{head} {ins} : {in_types} -> {out_type}"
        if op.kind == "fill":
            return f"{head} {op.attr('value')!r} : {out_type}"
        if op.kind == "select":
            return f"{head} {ins} : {in_types} -> {out_type}"
        if op.kind == "concat":
            return f"{head} {ins} dim = [{op.attr('dim')}] : {in_types} -> {out_type}"
        if op.kind == "conv":
            return (
                f"{head} {ins} strides = {_ints(op.attr('strides'))} dilations = "
                f"{_ints(op.attr('dilations'))} padding_low = {_ints(op.attr('low'))} "
                f"padding_high = {_ints(op.attr('high'))} groups = {op.attr('groups')} : "
                f"{in_types} -> {out_type}"
            )
        if op.kind == "pool":
            return (
                f'{head} {ins} kind = "{op.attr("pool")}" kernel = {_ints(op.attr("kernel"))} '
                f"strides = {_ints(op.attr('strides'))} padding_low = {_ints(op.attr('low'))} "
                f"padding_high = {_ints(op.attr('high'))} : {in_types} -> {out_type}"
            )
        if op.kind == "pad":
            return (
                f"{head} {ins} low = {_ints(op.attr('low'))} high = {_ints(op.attr('high'))} "
                f"value = {op.attr('value')!r} : {in_types} -> {out_type}"
            )
        if op.kind == "slice":
            offsets = ", ".join(str(d) for d in op.attr("offsets"))  # type: ignore[attr-defined]
            strides = ", ".join(str(d) for d in op.attr("strides"))  # type: ignore[attr-defined]
            return (
                f"{head} {ins} offsets = [{offsets}] strides = [{strides}] : "
                f"{in_types} -> {out_type}"
            )
        raise ValueError(f"unknown op kind {op.kind}")

    def without(self, index: int) -> Program:
        """The program with op `index` removed and its result made a new argument."""
        op = self.ops[index]
        arg_types = self.arg_types | ({op.result: op.dtype} if op.dtype else {})
        return replace(
            self,
            args=[*self.args, (op.result, op.shape)],
            ops=self.ops[:index] + self.ops[index + 1 :],
            arg_types=arg_types,
        )

    def pruned(self) -> Program:
        """Only the ops and arguments the outputs depend on."""
        needed = set(self.outputs)
        kept: list[Op] = []
        for op in reversed(self.ops):
            if op.result in needed:
                kept.append(op)
                needed.update(op.operands)
        args = [(n, s) for n, s in self.args if n in needed]
        return replace(self, args=args or self.args[:1], ops=kept[::-1])


def _ints(values: object) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"  # type: ignore[attr-defined]


def broadcast(a: Shape, b: Shape) -> Shape | None:
    out: list[int] = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else 1
        y = b[-k] if k <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)  # a 1 stretches to the other size, 0 included
    return tuple(reversed(out))


class ProgramBuilder:
    def __init__(self, rng: random.Random, smooth: bool, dtype: str = "f32"):
        self.rng = rng
        self.smooth = smooth
        self.program_dtype = dtype
        self.args: list[tuple[str, Shape]] = []
        self.ops: list[Op] = []
        self.shapes: dict[str, Shape] = {}
        self.types: dict[str, str] = {}  # the integer values' element types
        self.uses: dict[str, int] = {}

    def random_shape(self, rank: int | None = None) -> Shape:
        rank = self.rng.choice((0, 1, 2, 2, 3, 3)) if rank is None else rank
        shape = [self.rng.choice((1, 2, 3, 4, 5)) for _ in range(rank)]
        if shape and self.rng.random() < ZERO_DIM_CHANCE:
            shape[self.rng.randrange(rank)] = 0
        return tuple(shape)

    def new_arg(self, shape: Shape, dtype: str | None = None) -> str:
        name = f"a{len(self.args)}"
        self.args.append((name, shape))
        self.shapes[name] = shape
        if dtype is not None:
            self.types[name] = dtype
        return name

    def emit(
        self,
        kind: str,
        operands: Sequence[str],
        shape: Shape,
        dtype: str | None = None,
        **attrs: object,
    ) -> str:
        name = f"v{len(self.ops)}"
        self.ops.append(Op(name, kind, tuple(operands), shape, tuple(attrs.items()), dtype))
        self.shapes[name] = shape
        if dtype is not None:
            self.types[name] = dtype
        for v in operands:
            self.uses[v] = self.uses.get(v, 0) + 1
        return name

    def floats(self) -> list[str]:
        return [n for n in self.shapes if n not in self.types]

    def value(self) -> str:
        """An existing float value, recent ones (and unused ones) more likely."""
        names = self.floats()
        if not names or self.rng.random() < 0.1:
            return self.new_arg(self.random_shape())
        weights = [1 + k + 4 * (self.uses.get(n, 0) == 0) for k, n in enumerate(names)]
        return self.rng.choices(names, weights)[0]

    def int_value(self, shape: Shape | None = None, dtype: str | None = None) -> str:
        """An integer value (of `shape` and `dtype` if given): an existing one or a new
        argument."""
        names = [
            n
            for n, t in self.types.items()
            if t in INTEGER_TYPES  # not the other float type a round-trip cast goes through
            and (shape is None or self.shapes[n] == shape)
            and (dtype is None or t == dtype)
        ]
        if names and self.rng.random() < 0.6:
            return self.rng.choice(names)
        shape = self.random_shape(self.rng.choice((0, 1, 1, 2))) if shape is None else shape
        return self.new_arg(shape, dtype or self.rng.choice(INTEGER_TYPES))

    def float_arg(self) -> str:
        """An argument of the program's float type and rank >= 1 (exact values: see the
        module docstring)."""
        names = [n for n, shape in self.args if n not in self.types and shape]
        if names and self.rng.random() < 0.7:
            return self.rng.choice(names)
        return self.new_arg(self.random_shape(self.rng.choice((1, 2, 3))))

    def operand(self, shape: Shape) -> str:
        """A float value of exactly `shape`: an existing one if there is, else a new
        argument."""
        same = [n for n in self.floats() if self.shapes[n] == shape]
        if same and self.rng.random() < 0.7:
            return self.rng.choice(same)
        return self.new_arg(shape)

    def broadcastable_to(self, shape: Shape) -> Shape:
        """A shape that broadcasts with `shape` (dims dropped or set to 1)."""
        out = [d if self.rng.random() < 0.6 else 1 for d in shape]
        drop = self.rng.randint(0, len(out))
        out = out[drop:] if self.rng.random() < 0.3 else out
        if len(out) == len(shape) < 4 and self.rng.random() < 0.15:
            out = [self.rng.choice((1, 2, 3)), *out]  # a new leading dim
        return tuple(out)

    # one random op ------------------------------------------------------------------

    def step(self) -> None:
        kinds = ["unary", "binary", "binary", "reduce", "matmul", "reshape", "permute", "safe"]
        kinds += ["concat", "slice", "take", "one_hot", "conv", "pool", "pad"]
        kinds += ["select", "broadcast_to", "fill"] if not self.smooth else ["broadcast_to"]
        if not self.smooth:  # integers: no gradient flows through them
            kinds += ["cast", "arg_reduce", "int_binary"]
        getattr(self, "_" + self.rng.choice(kinds))()

    def _unary(self) -> None:
        x = self.value()
        self.emit(self.rng.choice(SMOOTH_UNARY if self.smooth else UNARY), [x], self.shapes[x])

    def _safe(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        kind = self.rng.choice(SAFE_UNARY + ("div", "pow"))
        if kind == "exp":
            self.emit("exp", [self.emit("tanh", [x], shape)], shape)
            return
        square = self.emit("mul", [x, x], shape)
        one = self.emit("fill", [], shape, value=1.0)
        positive = self.emit("add", [one, square], shape)
        if kind in SAFE_UNARY:
            self.emit(kind, [positive], shape)
            return
        y = self.operand(self.broadcastable_to(shape))
        out = broadcast(self.shapes[y], shape)
        assert out is not None
        if kind == "div":
            self.emit("div", [y, positive], out)
        else:  # (1 + x*x) ** tanh(y): positive base, tame exponent
            self.emit("pow", [positive, self.emit("tanh", [y], self.shapes[y])], out)

    def _binary(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        y = self.operand(self.broadcastable_to(shape))
        pair = [x, y] if self.rng.random() < 0.5 else [y, x]
        out = broadcast(self.shapes[pair[0]], self.shapes[pair[1]])
        assert out is not None
        kinds = BINARY[:3] if self.smooth else BINARY
        self.emit(self.rng.choice(kinds), pair, out)

    def _reduce(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        if not shape:
            return self._unary()
        count = self.rng.randint(1, len(shape))
        dims = self.rng.sample(range(len(shape)), count)
        keep = self.rng.random() < 0.4
        out = tuple(1 if k in dims else d for k, d in enumerate(shape) if keep or k not in dims)
        kinds = ("sum", "mean") if self.smooth else REDUCE
        if any(shape[k] == 0 for k in dims):
            # Over no element: sum 0; mean NaN and max -inf are not tame (fast-math may turn
            # `nan - nan` into 0, as it may reassociate).
            kinds = ("sum",)
        self.emit(self.rng.choice(kinds), [x], out, dims=tuple(dims), keepdim=keep)

    def _matmul(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        if len(shape) < 2:
            shape = self.random_shape(2)
            x = self.operand(shape)
        k, n = shape[-1], self.rng.choice((1, 2, 3, 4, 5))
        batch = shape[:-2]
        other_batch = self.broadcastable_to(batch) if batch and self.rng.random() < 0.5 else ()
        if self.rng.random() < 0.2:  # batched on the right only
            other_batch = (self.rng.choice((2, 3)),) if not batch else other_batch
        y = self.operand((*other_batch, k, n))
        out_batch = broadcast(batch, other_batch)
        assert out_batch is not None
        self.emit("matmul", [x, y], (*out_batch, shape[-2], n))

    def _reshape(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        size = 1
        for d in shape:
            size *= d
        factors: list[int] = []
        rest = size
        if size == 0:  # an empty tensor: any shape with a 0
            factors, rest = [0, *self.rng.sample((1, 2, 3), self.rng.randint(0, 2))], 1
        while rest > 1 and len(factors) < 3:
            divisors = [d for d in range(2, rest + 1) if rest % d == 0]
            d = self.rng.choice(divisors)
            factors.append(d)
            rest //= d
        if rest > 1:
            factors.append(rest)
        if self.rng.random() < 0.3:
            factors.insert(self.rng.randint(0, len(factors)), 1)
        self.rng.shuffle(factors)
        self.emit("reshape", [x], tuple(factors))

    def _permute(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        dims = list(range(len(shape)))
        self.rng.shuffle(dims)
        self.emit("permute", [x], tuple(shape[d] for d in dims), dims=tuple(dims))

    def _broadcast_to(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        out = tuple(self.rng.choice((2, 3)) if d == 1 else d for d in shape)
        if len(out) < 4 and self.rng.random() < 0.5:
            out = (self.rng.choice((1, 2, 3)), *out)
        self.emit("broadcast_to", [x], out)

    def _fill(self) -> None:
        value = self.rng.choice((0.0, 1.0, -0.5, 2.0, 0.25))
        x = self.value()
        y = self.emit("fill", [], self.shapes[x], value=value)
        self.emit(self.rng.choice(BINARY), [x, y], self.shapes[x])

    def _concat(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        if not shape:
            return self._unary()
        dim = self.rng.randrange(len(shape))
        other = list(shape)
        other[dim] = self.rng.choice((1, 2, 3))
        y = self.operand(tuple(other))
        pair = [x, y] if self.rng.random() < 0.5 else [y, x]
        out = list(shape)
        out[dim] = shape[dim] + other[dim]
        self.emit("concat", pair, tuple(out), dim=dim)

    def _slice(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        if not shape or 0 in shape:
            return self._unary()
        offsets, strides, out = [], [], []
        for n in shape:
            stride = self.rng.choice((1, 1, 2, -1))
            offset = self.rng.randrange(n)
            count = len(range(offset, n, stride) if stride > 0 else range(offset, -1, stride))
            offsets.append(offset)
            strides.append(stride)
            out.append(count)
        self.emit("slice", [x], tuple(out), offsets=tuple(offsets), strides=tuple(strides))

    def _take(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        gatherable = [k for k, n in enumerate(shape) if n > 0]  # not from an empty dim
        if not gatherable:
            return self._unary()
        dim = self.rng.choice(gatherable)
        indices = self.int_value()
        out = (*shape[:dim], *self.shapes[indices], *shape[dim + 1 :])
        self.emit("take", [x, indices], out, dim=dim)

    def _one_hot(self) -> None:
        labels = self.int_value()
        classes = self.rng.choice((1, 2, 3, 4, 5))
        hot = self.emit("one_hot", [labels], (*self.shapes[labels], classes))
        x = self.operand(self.broadcastable_to(self.shapes[hot]))
        out = broadcast(self.shapes[hot], self.shapes[x])
        assert out is not None
        self.emit(self.rng.choice(BINARY[:3]), [hot, x], out)

    def _conv(self) -> None:
        """A 1-D or 2-D conv of an existing (N, C, *spatial) value or a new one."""
        x = self.value()
        shape = self.shapes[x]
        if len(shape) not in (3, 4) or shape[1] == 0:
            spatial = self.rng.choice((1, 2))
            sizes = [self.rng.choice((3, 4, 5, 6)) for _ in range(spatial)]
            shape = (self.rng.choice((1, 2)), self.rng.choice((1, 2, 3, 4)), *sizes)
            x = self.operand(shape)
        channels = shape[1]
        groups = self.rng.choice([1, 1, 1] + [g for g in (2, 3, 4) if channels % g == 0])
        features = groups * self.rng.choice((1, 2))
        kernel, strides, dilations, low, high = [], [], [], [], []
        for n in shape[2:]:
            lo, hi = self.rng.choice((0, 0, 1, 2)), self.rng.choice((0, 0, 1))
            k, d = self.rng.choice((1, 2, 3)), self.rng.choice((1, 1, 2))
            if d * (k - 1) + 1 > n + lo + hi:  # the window must fit the padded input
                d, k = 1, max(1, n + lo + hi)
                lo += k > n + lo + hi  # an empty dim, unpadded: pad it to one element
            kernel.append(k)
            strides.append(self.rng.choice((1, 1, 2)))
            dilations.append(d)
            low.append(lo)
            high.append(hi)
        w = self.operand((features, channels // groups, *kernel))
        out = conv_shape(shape, self.shapes[w], strides, dilations, low, high, groups)
        self.emit(
            "conv", [x, w], out, strides=tuple(strides), dilations=tuple(dilations),
            low=tuple(low), high=tuple(high), groups=groups,
        )  # fmt: skip

    def _pool(self) -> None:
        """Pooling over the last one or two dims: max and avg of any float value (avg only
        in gradient programs: max has kinks), argmax of an argument (as `_arg_reduce`)."""
        kind = "avg" if self.smooth else self.rng.choice(POOL_KINDS)
        x = self.float_arg() if kind == "argmax" else self.value()
        shape = self.shapes[x]
        if not shape:
            return self._unary()
        spatial = self.rng.randint(1, min(2, len(shape)))
        kernel, strides, low, high = [], [], [], []
        for n in shape[len(shape) - spatial :]:
            k = self.rng.choice((1, 2, 2, 3))
            lo, hi = self.rng.randint(0, k // 2), self.rng.randint(0, k // 2)
            if n == 0 and kind != "avg":  # a window of padding only: -inf, or no index
                return self._unary()
            if k > n + lo + hi:
                k, lo, hi = max(1, n), 0, 0
                if n == 0:
                    k, lo, hi = 2, 1, 1
            kernel.append(k)
            strides.append(self.rng.choice((1, 2, k)))
            low.append(lo)
            high.append(hi)
        out = pool_shape(shape, kernel, strides, low, high)
        self.emit(
            "pool", [x], out, "i64" if kind == "argmax" else None, pool=kind,
            kernel=tuple(kernel), strides=tuple(strides), low=tuple(low), high=tuple(high),
        )  # fmt: skip

    def _pad(self) -> None:
        """Constant padding of a float value, or (not for gradients) of an integer one."""
        integer = not self.smooth and self.rng.random() < 0.2
        x = self.int_value() if integer else self.value()
        shape = self.shapes[x]
        low = tuple(self.rng.choice((0, 0, 1, 2)) for _ in shape)
        high = tuple(self.rng.choice((0, 0, 1, 2)) for _ in shape)
        value = self.rng.choice((0.0, 0.0, 1.0, -0.5)) if not integer else 2.0
        out = tuple(n + lo + hi for n, lo, hi in zip(shape, low, high, strict=True))
        self.emit("pad", [x], out, self.types.get(x), low=low, high=high, value=value)

    def _arg_reduce(self) -> None:
        x = self.float_arg()
        shape = self.shapes[x]
        nonempty = [k for k, n in enumerate(shape) if n > 0]  # an empty dim has no index
        if not nonempty:
            return self._unary()
        dim = self.rng.choice(nonempty)
        keep = self.rng.random() < 0.3
        out = tuple(1 if k == dim else d for k, d in enumerate(shape) if keep or k != dim)
        kind = self.rng.choice(("argmax", "argmin"))
        self.emit(kind, [x], out, "i64", dim=dim, keepdim=keep)

    def _cast(self) -> None:
        choice = self.rng.random()
        if choice < 0.35:  # float -> int, of an argument
            x = self.float_arg()
            self.emit("cast", [x], self.shapes[x], self.rng.choice(INTEGER_TYPES))
        elif choice < 0.7:  # int -> float
            x = self.int_value()
            self.emit("cast", [x], self.shapes[x])
        else:  # to the other float type and back
            x = self.value()
            other = "f64" if self.program_dtype == "f32" else "f32"
            there = self.emit("cast", [x], self.shapes[x], other)
            self.emit("cast", [there], self.shapes[x])

    def _int_binary(self) -> None:
        x = self.int_value()
        dtype = self.types[x]
        y = self.int_value(self.broadcastable_to(self.shapes[x]), dtype)
        pair = [x, y] if self.rng.random() < 0.5 else [y, x]
        out = broadcast(self.shapes[pair[0]], self.shapes[pair[1]])
        assert out is not None
        self.emit(self.rng.choice(INTEGER_BINARY), pair, out, dtype)

    def _select(self) -> None:
        x = self.value()
        shape = self.shapes[x]
        y = self.operand(self.broadcastable_to(shape))
        cshape = broadcast(shape, self.shapes[y])
        assert cshape is not None
        cond = self.emit(self.rng.choice(COMPARE), [x, y], cshape)
        z = self.operand(self.broadcastable_to(cshape))
        out = broadcast(cshape, self.shapes[z])
        assert out is not None
        branches = [x, z] if self.rng.random() < 0.5 else [z, x]
        out = broadcast(out, self.shapes[branches[0]]) or out
        self.emit("select", [cond, *branches], out)


def generate(
    rng: random.Random, *, ops: int = 8, dtype: str = "f32", smooth: bool = False
) -> Program:
    """A random program of about `ops` ops (`smooth`: differentiable everywhere, for
    gradient checks)."""
    builder = ProgramBuilder(rng, smooth, dtype)
    builder.new_arg(builder.random_shape())
    for _ in range(rng.randint(1, ops)):
        builder.step()
    # Gradients are of float results (an integer one has none).
    returnable = [op for op in builder.ops if not (smooth and op.dtype)]
    unused = [op.result for op in returnable if builder.uses.get(op.result, 0) == 0]
    outputs = unused[-2:] if rng.random() < 0.3 else unused[-1:]
    if not outputs:
        outputs = [builder.args[0][0]] if not returnable else [returnable[-1].result]
    program = Program(builder.args, builder.ops, outputs, dtype, arg_types=builder.types)
    return program.pruned()


def chain_program(
    n: int, size: int, *, matmul_every: int | None = None, name: str = "chain"
) -> str:
    """`n` ops in one dependence chain on `size` x `size` f32: add, mul and the unary
    relu/exp/neg/tanh in turn, and with `matmul_every` a matmul ending every such stretch.

    Not random: the compile-latency benchmark (bench/bench_compile.py's 1,000-op program),
    the tests that count a pass's work on it, and bench/snapshot_outputs.py all build it
    here, so a figure and the test guarding it are about the same program."""
    t = f"tensor<{size}x{size}xf32>"
    lines = [f"func.func @{name}(%x: {t}, %w: {t}) -> {t} {{"]
    unary = ["tess.relu", "tess.exp", "tess.neg", "tess.tanh"]
    prev = "%x"
    for count in range(n):
        k = count % matmul_every if matmul_every else count
        if matmul_every and k == matmul_every - 1:
            lines.append(f"  %v{count} = tess.matmul {prev}, %w : {t}, {t} -> {t}")
        elif k % 3 == 0:
            lines.append(f"  %v{count} = tess.add {prev}, %x : {t}, {t} -> {t}")
        elif k % 3 == 1:
            lines.append(f"  %v{count} = tess.mul {prev}, %w : {t}, {t} -> {t}")
        else:
            lines.append(f"  %v{count} = {unary[k % 4]} {prev} : {t}")
        prev = f"%v{count}"
    lines += [f"  func.return {prev} : {t}", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["Op", "Program", "broadcast", "chain_program", "generate"]
