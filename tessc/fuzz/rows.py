"""
Random row-epilogue programs: a matmul of few rows followed by row-wise work, the shapes
that reach `tess-pack-matmul` (operands read in place, one-tile-tall products),
`tess-interchange-rows` (short inner loops of a row loop) and `tess-row-dots` (narrow
products in a packed kernel's rows), which `tessc.fuzz.programs` reaches rarely (its
shapes are 1-5 wide).

Each program is one product `z = a @ b` and an epilogue on its rows:

- `a` of `rows` x `k` (1-16 rows mostly, some 17-40), with an optional batch of 2 or 3:
  an argument, the transpose of one (`permute`), a computed value (`tanh`), an integer
  argument cast, or a round trip through the other float type; `b` of `k` x `cols`: an
  argument (batched like `a`, broadcast over its batch, or not batched), the transpose of
  one (`w.T`), a cast or a computed value.
- `big` programs make rows x k x cols at least 2^17 (`tess-pack-matmul`'s `min-work`; some
  at least `PACKED_MIN_WORK`, where `tess-fuse` fuses transposed operands) with
  `cols` a multiple of 8/16/32 or not; the others are small (the `fuzz-pack*` pipelines of
  `tessc.fuzz.check` force packing at any size).
- the epilogue, 1-5 steps on the current value: a bias (a row, a column or a scalar), an
  activation, `exp(tanh z)`, `log(1 + z*z)`, a reduction over the last dim (`keepdim` or
  not, reshaped back), subtracted or divided back by broadcast (a softmax, `max` or `sum`),
  and a second narrow product (2-16 columns) whose softmax then runs over a short last dim.

`smooth` programs (gradient checks) use no kinks (`relu`, `max`) and keep values tame.
"""

from __future__ import annotations

import random

from tessc.fuzz.programs import Program, ProgramBuilder, Shape, broadcast
from tessc.lowering.linalg.loop_nests import PACKED_MIN_WORK

MIN_WORK = 1 << 17
"""`tess-pack-matmul`'s default `min-work`."""


class _Rows:
    def __init__(self, rng: random.Random, smooth: bool, dtype: str, big: bool):
        self.rng = rng
        self.b = ProgramBuilder(rng, smooth, dtype)
        self.smooth = smooth
        self.dtype = dtype
        self.big = big

    # operands ----------------------------------------------------------------------

    def matrix(self, batch: Shape, rows: int, cols: int, *, plain: bool = False) -> str:
        """A float value of shape (*batch, rows, cols), made one of several ways."""
        b, rng = self.b, self.rng
        shape = (*batch, rows, cols)
        way = (
            "arg" if plain else rng.choice(("arg", "arg", "arg", "t", "t", "tanh", "cast", "trip"))
        )
        if way == "t":
            dims = (*range(len(batch)), len(batch) + 1, len(batch))
            return b.emit("permute", [b.new_arg((*batch, cols, rows))], shape, dims=dims)
        if way == "tanh":
            return b.emit("tanh", [b.new_arg(shape)], shape)
        if way == "cast" and not self.smooth:
            return b.emit("cast", [b.new_arg(shape, rng.choice(("i32", "i64")))], shape)
        if way == "trip" and not self.smooth:  # f32 steps would swamp central differences
            other = "f64" if self.dtype == "f32" else "f32"
            there = b.emit("cast", [b.new_arg(shape)], shape, other)
            return b.emit("cast", [there], shape)
        return b.new_arg(shape)

    def sizes(self, rows: int) -> tuple[int, int]:
        rng = self.rng
        if not self.big:
            return rng.randint(1, 40), rng.choice(
                (1, 2, 3, 5, 8, 10, 16, 17, 24, 32, 32, 33, 40, 64, 64)
            )
        cols = rng.choice((16, 24, 32, 32, 40, 64, 64, 96, 100, 128, 128, 130, 160, 256))
        # Some from `PACKED_MIN_WORK`, where `tess-fuse` fuses transposed operands into the
        # product (`a @ w.T` becomes a dot nest, which the pass packs too).
        work = PACKED_MIN_WORK if rng.random() < 0.3 else MIN_WORK
        if work == PACKED_MIN_WORK:
            cols = max(cols, 128)  # b within a few MiB
        k = -(-work // (rows * cols))
        k += rng.choice((0, 0, 0, 1, 3, 7, k // 3))
        return k, cols

    # epilogue steps ----------------------------------------------------------------

    def reduce(self, z: str, kind: str) -> str:
        """`kind` over the last dim of `z`, shaped to broadcast back against it."""
        b, rng = self.b, self.rng
        shape = b.shapes[z]
        last = len(shape) - 1
        kept = (*shape[:-1], 1)
        if rng.random() < 0.7:
            return b.emit(kind, [z], kept, dims=(last,), keepdim=True)
        flat = b.emit(kind, [z], shape[:-1], dims=(last,), keepdim=False)
        return b.emit("reshape", [flat], kept)

    def softmax(self, z: str) -> str:
        b, rng = self.b, self.rng
        shape = b.shapes[z]
        shift = "mean" if self.smooth else rng.choice(("reduce_max", "reduce_max", "mean"))
        centred = b.emit("sub", [z, self.reduce(z, shift)], shape)
        if shift == "mean" or rng.random() < 0.3:
            centred = b.emit("tanh", [centred], shape)  # exp of a mean-shifted row may overflow
        e = b.emit("exp", [centred], shape)
        total = self.reduce(e, "sum")
        if rng.random() < 0.5:
            return b.emit("div", [e, total], shape)
        return b.emit("sub", [centred, b.emit("log", [total], b.shapes[total])], shape)

    def step(self, z: str, narrow_left: bool, kind: str | None = None) -> tuple[str, bool]:
        b, rng = self.b, self.rng
        shape = b.shapes[z]
        kinds = ["bias", "act", "act", "exp", "log", "softmax", "reduce", "binary"]
        if narrow_left:
            kinds += ["narrow", "narrow"]
        kind = kind or rng.choice(kinds)
        if kind == "bias":
            where = rng.choice(("row", "row", "col", "scalar", "full"))
            bias_shape = {
                "row": (shape[-1],),
                "col": (shape[-2], 1),
                "scalar": (),
                "full": shape,
            }[where]
            pair = [z, b.new_arg(bias_shape)]
            return b.emit(rng.choice(("add", "add", "sub", "mul")), pair, shape), narrow_left
        if kind == "act":
            acts = ("tanh", "sigmoid", "neg") if self.smooth else ("relu", "relu", "tanh", "abs")
            return b.emit(rng.choice(acts), [z], shape), narrow_left
        if kind == "exp":
            return b.emit("exp", [b.emit("tanh", [z], shape)], shape), narrow_left
        if kind == "log":
            square = b.emit("mul", [z, z], shape)
            one = b.emit("fill", [], shape, value=1.0)
            return b.emit("log", [b.emit("add", [one, square], shape)], shape), narrow_left
        if kind == "softmax":
            return self.softmax(z), narrow_left
        if kind == "reduce":
            kinds = ("sum", "mean") if self.smooth else ("sum", "mean", "reduce_max")
            r = self.reduce(z, rng.choice(kinds))
            op = rng.choice(("sub", "add", "mul"))
            return b.emit(op, [z, r] if rng.random() < 0.7 else [r, z], shape), narrow_left
        if kind == "binary":  # with an earlier value of the same shape, or a new argument
            y = b.operand(shape)
            ops = ("add", "sub", "mul") if self.smooth else ("add", "sub", "mul", "max", "min")
            return b.emit(rng.choice(ops), [z, y], shape), narrow_left
        # a second narrow product: (.., rows, cols) @ (cols, c)
        c = rng.randint(2, 17)
        batch = shape[:-2]
        wbatch = batch if batch and rng.random() < 0.3 else ()
        w = self.matrix(wbatch, shape[-1], c)
        h = b.emit("tanh", [z], shape) if rng.random() < 0.5 else z  # keeps logits tame
        return b.emit("matmul", [h, w], (*batch, shape[-2], c)), False


def generate_rows(
    rng: random.Random, *, dtype: str = "f32", smooth: bool = False, big: bool | None = None
) -> Program:
    """A random matmul-and-row-epilogue program (module docstring); `big`: shapes above
    `tess-pack-matmul`'s default `min-work` (None: a coin flip)."""
    big = rng.random() < 0.5 if big is None else big
    g = _Rows(rng, smooth, dtype, big)
    b = g.b
    rows = rng.choice((1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 12, 13, 14, 15, 16, 16, 17, 24, 32, 40))
    k, cols = g.sizes(rows)
    batch: Shape = rng.choice(((), (), (), (2,), (3,)))
    a = g.matrix(batch, rows, k)
    choice = rng.random()
    wbatch: Shape = batch if choice < 0.4 else () if choice < 0.8 else (1,) * len(batch)
    if not batch and rng.random() < 0.1:
        wbatch = (2,)  # batched on the right only
    w = g.matrix(wbatch, k, cols)
    out_batch = broadcast(batch, wbatch)
    assert out_batch is not None
    z = b.emit("matmul", [a, w], (*out_batch, rows, cols))
    if rng.random() < 0.2:  # scale the product down: rows of K terms make big logits
        z = b.emit("mul", [z, b.emit("fill", [], b.shapes[z], value=0.25)], b.shapes[z])
    outputs = []
    narrow = True
    # Half of them an MLP's forward shape: [bias] [activation] narrow product, then its
    # rows' softmax or reduction (the short inner loops) and maybe more.
    steps: list[str | None] = [None] * rng.randint(1, 5)
    if rng.random() < 0.5:
        mlp = ["bias"] * (rng.random() < 0.7) + ["act"] * (rng.random() < 0.7) + ["narrow"]
        steps = [*mlp, rng.choice(("softmax", "softmax", "reduce")), *steps[: rng.randint(0, 2)]]
    for kind in steps:
        z, narrow = g.step(z, narrow, kind)
        if rng.random() < 0.15:
            outputs.append(z)  # an intermediate result: a second output of the kernel
    outputs = [v for v in outputs if v != z][-1:] + [z]
    program = Program(b.args, b.ops, outputs, dtype, arg_types=b.types)
    return program.pruned()


__all__ = ["generate_rows"]
