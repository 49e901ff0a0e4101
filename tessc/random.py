"""
`tessc.random`: functional, counter-based random numbers, as JAX's `jax.random`.

A key is an int32 array of shape (2,) holding the two 32-bit words of a Threefry-2x32 key
(JAX's raw key, in a dtype `jit` takes; `key(seed)`). It is an ordinary argument of a
jitted step, so a new key each call reuses the compiled program. Inside a traced function,
element i of a draw is Threefry-2x32(key, counter (0, i)), built from `tess.iota` and the
integer bit ops (`tess.xor/or/shl/shru`, wrapping `tess.add`): the generator lowers to the
body of the `linalg.generic` that consumes its bits, so `dropout(x) * y` is one kernel and
no mask buffer exists; every target computes the same bits. `split` counts (1, j) and
`fold_in` (2, data), so the streams of a key, its splits and its folds never overlap.
`uniform` keeps 23 bits (f32) or 42 (f64) of each draw, `randint` scales a 42-bit uniform:
both are bit-identical on every target. `normal` is Box-Muller on a draw's two words (23 or
31 bits each); its log/cos may differ in the last ulp between targets' math libraries.
`split`, `fold_in`, `permutation` and `key` also run eagerly on NumPy keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from xdsl.dialects.builtin import TensorType, i32
from xdsl.ir import SSAValue

from tessc.dialects import tess
from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import DTypeLike, TessError
from tessc.frontend.tracer import Tensor, Trace, trace_of
from tessc.frontend.user_location import located

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA
"""Threefry's key-schedule constant (Salmon et al. 2011; JAX's `threefry2x32`)."""
SPLIT_STREAM, FOLD_STREAM = 1, 2
"""The first counter word of `split` and `fold_in` (draws: 0). The element index is the
second, so the first round's rotation already works on whole tensors: a rank-0 rotation
would be a kernel of its own."""
MASK32 = 0xFFFFFFFF


class WordOps(Protocol):
    """32-bit word arithmetic, wrapping: NumPy's uint32 or traced `tess` ops on i32."""

    def add(self, a: Any, b: Any) -> Any: ...
    def xor(self, a: Any, b: Any) -> Any: ...
    def rotl(self, a: Any, r: int) -> Any: ...
    def const(self, value: int) -> Any: ...


class NumpyWords:
    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(a + b, np.uint32)

    def xor(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(a ^ b, np.uint32)

    def rotl(self, a: np.ndarray, r: int) -> np.ndarray:
        return np.asarray((a << np.uint32(r)) | (a >> np.uint32(32 - r)), np.uint32)

    def const(self, value: int) -> np.ndarray:
        return np.asarray(value & MASK32, np.uint32)


class IntWords:
    """The same words as Python ints: an eager `fold_in` (a training loop's key every step)
    in ~15 us, where NumPy's uint32 scalars (an `errstate` per add) took ~180 us."""

    def add(self, a: int, b: int) -> int:
        return (a + b) & MASK32

    def xor(self, a: int, b: int) -> int:
        return a ^ b

    def rotl(self, a: int, r: int) -> int:
        return ((a << r) | (a >> (32 - r))) & MASK32

    def const(self, value: int) -> int:
        return value & MASK32


class TracedWords:
    """The same words as i32 tensors in a trace (two's complement: the bits are equal)."""

    def __init__(self, builder: TessBuilder):
        self.builder = builder

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(tess.AddOp(a, b))

    def xor(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.builder.insert(tess.XOrOp(a, b))

    def rotl(self, a: SSAValue, r: int) -> SSAValue:
        left = self.builder.insert(tess.ShLOp(a, self.const(r)))
        right = self.builder.insert(tess.ShRUOp(a, self.const(32 - r)))
        return self.builder.insert(tess.OrOp(left, right))

    def const(self, value: int) -> SSAValue:
        signed = (value & MASK32) - ((value & 0x80000000) << 1)
        return self.builder.fill(signed, (), "i32")


def iota(b: TessBuilder, shape: Sequence[int]) -> SSAValue:
    return b.insert(tess.IotaOp(TensorType(i32, list(shape))))


def threefry2x32(ops: WordOps, k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """Threefry-2x32 with 20 rounds, exactly as JAX's `threefry_2x32`: counters (x0, x1)
    under key (k0, k1) to two pseudo-random words."""
    schedule = (k0, k1, ops.xor(ops.xor(k0, k1), ops.const(PARITY)))
    x0, x1 = ops.add(x0, schedule[0]), ops.add(x1, schedule[1])
    for block in range(5):
        for r in ROTATIONS[block % 2]:
            x0 = ops.add(x0, x1)
            x1 = ops.xor(ops.rotl(x1, r), x0)
        x0 = ops.add(x0, schedule[(block + 1) % 3])
        x1 = ops.add(x1, ops.add(schedule[(block + 2) % 3], ops.const(block + 1)))
    return x0, x1


# ---------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------


def key(seed: int) -> np.ndarray:
    """The key of an integer seed: int32 words (seed >> 32, seed & 0xFFFFFFFF), as JAX's."""
    seed = int(seed)
    words = np.array([(seed >> 32) & MASK32, seed & MASK32], np.uint32)
    return words.view(np.int32)


def _check_key(value: Any, name: str = "key") -> None:
    if isinstance(value, Tensor):
        shape, dtype = tuple(value.shape), np.dtype(value.dtype)
    else:
        array = np.asarray(value)
        shape, dtype = array.shape, array.dtype
    if shape != (2,) or dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise TessError(
            f"{name}: expected a random key, an int32 array of shape (2,) from "
            f"tessc.random.key(seed), got {dtype} of shape {shape}"
        )


def _traced_key(value: Any, trace: Trace) -> tuple[SSAValue, SSAValue]:
    """The two key words as rank-0 i32 values in `trace`."""
    _check_key(value)
    if isinstance(value, Tensor):
        words = trace.own(value)
    else:
        words = trace.constant(np.asarray(value).view(np.int32), "i32")
    b = trace.builder
    return tuple(  # type: ignore[return-value]
        b.reshape(b.slice(words, [i], [1], [1]), ()) for i in range(2)
    )


def _eager_words(value: Any) -> tuple[np.ndarray, np.ndarray]:
    _check_key(value)
    words = np.asarray(value).view(np.uint32)
    return words[0], words[1]


def _traced(*values: Any) -> bool:
    return any(isinstance(v, Tensor) for v in values)


@located
def split(key: Any, num: int = 2) -> Any:
    """`num` new keys, shape (num, 2): key j is Threefry(key, (1, j))."""
    if not _traced(key):
        k0, k1 = _eager_words(key)
        counters = np.arange(num, dtype=np.uint32)
        y0, y1 = threefry2x32(NumpyWords(), k0, k1, np.uint32(SPLIT_STREAM), counters)
        return np.stack([y0, y1], axis=1).view(np.int32)
    trace = trace_of(key)
    ops, b = TracedWords(trace.builder), trace.builder
    k0, k1 = _traced_key(key, trace)
    counters = iota(b, (num,))
    y0, y1 = threefry2x32(ops, k0, k1, ops.const(SPLIT_STREAM), counters)
    return Tensor(b.stack([y0, y1], dim=1), trace)


@located
def fold_in(key: Any, data: int) -> Any:
    """A new key from `key` and an integer: Threefry(key, (2, data))."""
    if not isinstance(data, int | np.integer):
        raise TessError(f"data: expected a Python integer, got {type(data).__name__}")
    if not _traced(key):
        k0, k1 = (int(w) for w in _eager_words(key))
        y0, y1 = threefry2x32(IntWords(), k0, k1, FOLD_STREAM, int(data) & MASK32)
        return np.array([y0, y1], np.uint32).view(np.int32)
    trace = trace_of(key)
    ops, b = TracedWords(trace.builder), trace.builder
    k0, k1 = _traced_key(key, trace)
    y0, y1 = threefry2x32(ops, k0, k1, ops.const(FOLD_STREAM), ops.const(int(data)))
    return Tensor(b.stack([y0, y1]), trace)


# ---------------------------------------------------------------------------------------
# draws
# ---------------------------------------------------------------------------------------


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TessError(f"shape: expected a tuple of integers, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise TessError(f"shape: dims must be non-negative, got {dims}")
    return dims


def random_bits(key: Any, shape: Sequence[int]) -> tuple[Trace, SSAValue, SSAValue]:
    """The two Threefry words of each element of `shape` (i32 values in the trace)."""
    trace = key.trace if isinstance(key, Tensor) else trace_of()
    b = trace.builder
    k0, k1 = _traced_key(key, trace)
    ops = TracedWords(b)
    counters = iota(b, _shape(shape))
    y0, y1 = threefry2x32(ops, k0, k1, ops.const(0), counters)
    return trace, y0, y1


def _float_dtype(dtype: DTypeLike) -> np.dtype:
    float_type = np.dtype(dtype)
    if float_type not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TessError(f"dtype: expected float32 or float64, got {float_type}")
    return float_type


def _word_fraction(b: TessBuilder, word: SSAValue, bits: int, dtype: np.dtype) -> SSAValue:
    """The top `bits` bits of a word as a fraction in [0, 1) of `dtype`."""
    top = b.insert(tess.ShRUOp(word, TracedWords(b).const(32 - bits)))
    return b.mul(b.cast(top, dtype), 2.0**-bits)


def _unit_interval(b: TessBuilder, y0: SSAValue, y1: SSAValue, dtype: DTypeLike) -> SSAValue:
    """Uniform on [0, 1) in `dtype` from a draw's words: 23 bits for f32, 42 for f64."""
    if _float_dtype(dtype) == np.float32:
        return _word_fraction(b, y0, 23, np.dtype(np.float32))
    high = _word_fraction(b, y0, 21, np.dtype(np.float64))
    low = _word_fraction(b, y1, 21, np.dtype(np.float64))
    return b.add(high, b.mul(low, 2.0**-21))


@located
def uniform(
    key: Any,
    shape: Sequence[int] = (),
    dtype: DTypeLike = np.float32,
    minval: float = 0.0,
    maxval: float = 1.0,
) -> Tensor:
    """Uniform samples on [minval, maxval) of `shape` (inside a traced function)."""
    trace, y0, y1 = random_bits(key, shape)
    b = trace.builder
    unit = _unit_interval(b, y0, y1, dtype)
    if (minval, maxval) != (0.0, 1.0):
        unit = b.add(b.mul(unit, float(maxval) - float(minval)), float(minval))
    return Tensor(unit, trace)


@located
def normal(key: Any, shape: Sequence[int] = (), dtype: DTypeLike = np.float32) -> Tensor:
    """Standard normal samples (Box-Muller on each draw's two words)."""
    trace, y0, y1 = random_bits(key, shape)
    b = trace.builder
    float_type = _float_dtype(dtype)
    bits = 23 if float_type == np.float32 else 31  # exact in the float's mantissa
    u_radius = _word_fraction(b, y0, bits, float_type)
    u_angle = _word_fraction(b, y1, bits, float_type)
    radius = b.sqrt(b.mul(b.log(b.sub(1.0, u_radius)), -2.0))
    return Tensor(b.mul(radius, b.cos(b.mul(u_angle, 2 * math.pi))), trace)


@located
def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] = ()) -> Tensor:
    """True with probability `p` (a number or a tensor broadcasting against `shape`)."""
    trace, y0, y1 = random_bits(key, shape)
    b = trace.builder
    unit = _unit_interval(b, y0, y1, np.float32)
    probability = trace.operand(p, np.float32)
    if probability is None:
        raise TessError(f"p: expected a number or a tensor, got {type(p).__name__}")
    return Tensor(b.lt(unit, probability), trace)


@located
def randint(
    key: Any, shape: Sequence[int], minval: int, maxval: int, dtype: DTypeLike = np.int32
) -> Tensor:
    """Integers uniform on [minval, maxval) (Python ints; the span at most 2**31)."""
    if not all(isinstance(v, int | np.integer) for v in (minval, maxval)):
        raise TessError("minval, maxval: expected Python integers")
    span = int(maxval) - int(minval)
    if not 0 < span <= 2**31:
        raise TessError(f"maxval - minval: expected 1 to 2**31, got {span}")
    trace, y0, y1 = random_bits(key, shape)
    b = trace.builder
    scaled = b.mul(_unit_interval(b, y0, y1, np.float64), float(span))
    return Tensor(b.add(b.cast(scaled, dtype), int(minval)), trace)


@located
def permutation(key: Any, n: int) -> Any:
    """A random permutation of `range(n)` (int32): the order of n draws, ties broken by
    index. Traced, each element's rank counts the draws before it (an n x n comparison,
    summed in one kernel) and the ranks scatter the indices; eagerly, NumPy's `lexsort`."""
    if not isinstance(n, int | np.integer) or n < 1:
        raise TessError(f"n: expected a positive Python integer, got {n!r}")
    n = int(n)
    if not _traced(key) and not _in_trace():
        k0, k1 = _eager_words(key)
        y0, _ = threefry2x32(NumpyWords(), k0, k1, np.uint32(0), np.arange(n, dtype=np.uint32))
        draws = np.asarray(y0, np.uint32).view(np.int32)
        return np.lexsort((np.arange(n), draws)).astype(np.int32)
    trace, y0, _ = random_bits(key, (n,))
    b = trace.builder
    index = iota(b, (n,))
    draw_i, draw_j = b.reshape(y0, (n, 1)), b.reshape(y0, (1, n))
    index_i, index_j = b.reshape(index, (n, 1)), b.reshape(index, (1, n))
    tie = b.logical_and(b.eq(draw_j, draw_i), b.lt(index_j, index_i))
    before = b.logical_or(b.lt(draw_j, draw_i), tie)
    rank = b.sum(b.cast(before, "i32"), dims=1)
    return Tensor(b.scatter_add(index, b.cast(rank, "i32"), 0, (n,)), trace)


def _in_trace() -> bool:
    try:
        trace_of()
    except TessError:
        return False
    return True


__all__ = [
    "bernoulli",
    "permutation",
    "fold_in",
    "key",
    "normal",
    "randint",
    "random_bits",
    "split",
    "threefry2x32",
    "uniform",
]
