"""
`tess-expand-math`: scalar `math.exp`, `math.tanh` and `math.log` (f32, f64) and `math.erf`
(f32) become branch-free `arith` polynomials (level 5, loops).

Numba here has no SVML, so `np.exp` in a kernel is a scalar libm call that stops LLVM from
vectorising the loop around it. The expansions (range reduction with Cody-Waite constants,
minimax polynomials, 2^k by bit manipulation; tanh, log and erf built the same way) use only
`arith` ops, so a loop over them vectorises; every result is within ~1.3 ulp over the
whole float range and IEEE specials are exact. Only `contract` of the source op's
fast-math flags is carried over. A static cost model expands an op only where its loops
give the vectoriser enough to do (`min-inner-trip`, `min-iterations`). The algorithms,
the measured errors and timings are in lowering/loops/README.md. xDSL's
`expand-math-to-polynomials` is a bare Taylor series with no range reduction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    AnyFloat,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    i1,
)
from xdsl.dialects.utils import FastMathFlag
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from tessc.lowering.loops.trip_counts import enclosing_trips


@dataclass(frozen=True)
class FloatFormat:
    """One IEEE binary format and the constants every expansion of it uses."""

    name: str
    int_width: int
    mantissa_bits: int
    exponent_bias: int
    log2_e: float
    ln2_hi: float
    """ln(2) rounded so that k * ln2_hi is exact for every exponent k of the format."""
    ln2_lo: float
    """ln(2) - ln2_hi, rounded to the format."""
    exp_lower_clamp: float
    """exp of anything at or below this rounds to +0."""
    exp_upper_clamp: float
    """exp of anything at or above this overflows to +inf."""
    exp_coefficients: tuple[float, ...]
    """q in exp(r) = 1 + r + r^2 q(r), ascending powers of r."""
    tanh_threshold: float
    """Below this |x|, tanh uses its odd polynomial; above, the exp formula."""
    tanh_coefficients: tuple[float, ...]
    """R in tanh(x) = x + x^3 R(x^2), ascending powers of x^2."""
    log_coefficients: tuple[float, ...]
    """Q in log(1+f) = f - f^2/2 + s (f^2/2 + s^2 Q(s^2)), ascending powers of s^2."""
    sqrt_half_bits: int
    """The bit pattern of sqrt(1/2) in this format."""
    min_normal: float


F32_FORMAT = FloatFormat(
    name="f32",
    int_width=32,
    mantissa_bits=23,
    exponent_bias=127,
    log2_e=1.4426950216293335,
    ln2_hi=0.693145751953125,  # 0x3f317200: 15 significant bits
    ln2_lo=1.428606765330187e-06,
    exp_lower_clamp=-104.0,
    exp_upper_clamp=89.0,
    exp_coefficients=(
        0.4999999403953552,
        0.1666652113199234,
        0.04166838899254799,
        0.008368710055947304,
        0.001381461275741458,
    ),
    tanh_threshold=0.625,
    tanh_coefficients=(
        -0.3333328068256378,
        0.13331441581249237,
        -0.05373971536755562,
        0.0206390880048275,
        -0.005704986862838268,
    ),
    log_coefficients=(0.6666677594184875, 0.39977574348449707, 0.29870936274528503),
    sqrt_half_bits=0x3F3504F3,
    min_normal=1.1754943508222875e-38,
)

F64_FORMAT = FloatFormat(
    name="f64",
    int_width=64,
    mantissa_bits=52,
    exponent_bias=1023,
    log2_e=1.4426950408889634,
    ln2_hi=0.6931471803691238,  # 0x3fe62e42fee00000: 32 significant bits
    ln2_lo=1.9082149292705877e-10,
    exp_lower_clamp=-746.0,
    exp_upper_clamp=710.0,
    exp_coefficients=(
        0.5000000000000011,
        0.16666666666666413,
        0.041666666666530267,
        0.008333333333494333,
        0.0013888888943597712,
        0.00019841269506779702,
        2.4801493136177504e-05,
        2.755758626635183e-06,
        2.7630233921259343e-07,
        2.500007231554546e-08,
    ),
    tanh_threshold=0.625,
    tanh_coefficients=(
        -0.33333333333332854,
        0.13333333333262087,
        -0.05396825393126611,
        0.021869487576066174,
        -0.008863221002328657,
        0.003591989171781748,
        -0.0014549588690754025,
        0.0005863165149853904,
        -0.00022856416596931457,
        7.714432091246672e-05,
        -1.6072549567327662e-05,
    ),
    log_coefficients=(
        0.6666666666666734,
        0.3999999999941637,
        0.2857142874201607,
        0.22222198610748947,
        0.18183562406129727,
        0.15314098824548486,
        0.14795475161957664,
    ),
    sqrt_half_bits=0x3FE6A09E667F3BCD,
    min_normal=2.2250738585072014e-308,
)

FLOAT_FORMATS: dict[str, FloatFormat] = {"f32": F32_FORMAT, "f64": F64_FORMAT}


def float_format_of(float_type: object) -> FloatFormat | None:
    if isinstance(float_type, Float32Type):
        return F32_FORMAT
    if isinstance(float_type, Float64Type):
        return F64_FORMAT
    return None


@dataclass
class ArithEmitter:
    """
    Builds scalar `arith` ops of one float format before the rewriter's insertion point.

    Constants are emitted once per expansion (and `cse` merges them across expansions).
    """

    rewriter: PatternRewriter
    float_type: AnyFloat
    fmt: FloatFormat
    fastmath: arith.FastMathFlagsAttr
    _constants: dict[tuple[str, str], SSAValue] = field(default_factory=dict)

    @property
    def int_type(self) -> IntegerType:
        return IntegerType(self.fmt.int_width)

    def _emit(self, op: Operation) -> SSAValue:
        self.rewriter.insert(op)
        return op.results[0]

    def _binary(
        self, kind: type[arith.FloatingPointLikeBinaryOperation], lhs: SSAValue, rhs: SSAValue
    ) -> SSAValue:
        # The op its constructor builds (same operands, result type and fastmath property),
        # made directly: the constructor's argument processing was a third of the pass.
        properties = {"fastmath": self.fastmath}
        return self._emit(
            kind.create(operands=[lhs, rhs], result_types=[lhs.type], properties=properties)
        )

    def const(self, value: float) -> SSAValue:
        key = ("f", repr(value))  # repr: keeps -0.0 apart from 0.0 and finds NaN again
        if key not in self._constants:
            attr = FloatAttr(value, self.float_type)
            self._constants[key] = self._emit(
                arith.ConstantOp.create(properties={"value": attr}, result_types=[attr.type])
            )
        return self._constants[key]

    def int_const(self, value: int) -> SSAValue:
        key = ("i", repr(value))
        if key not in self._constants:
            self._constants[key] = self._emit(arith.ConstantOp(IntegerAttr(value, self.int_type)))
        return self._constants[key]

    def add(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._binary(arith.AddfOp, lhs, rhs)

    def sub(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._binary(arith.SubfOp, lhs, rhs)

    def mul(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._binary(arith.MulfOp, lhs, rhs)

    def div(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.DivfOp(lhs, rhs, self.fastmath))

    def neg(self, value: SSAValue) -> SSAValue:
        return self._emit(arith.NegfOp(value, self.fastmath))

    def cmp(self, predicate: str, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.CmpfOp(lhs, rhs, predicate))

    def select(self, condition: SSAValue, if_true: SSAValue, if_false: SSAValue) -> SSAValue:
        assert condition.type == i1
        return self._emit(arith.SelectOp(condition, if_true, if_false))

    def horner(self, t: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """sum(c_i t^i) for ascending coefficients, as (..(c_n t + c_n-1) t ..) + c_0."""
        acc = self.const(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            acc = self.add(self.mul(acc, t), self.const(coefficient))
        return acc

    def to_int(self, value: SSAValue) -> SSAValue:
        return self._emit(arith.FPToSIOp(value, self.int_type))

    def to_float(self, value: SSAValue) -> SSAValue:
        return self._emit(arith.SIToFPOp(value, self.float_type))

    def bits_of(self, value: SSAValue) -> SSAValue:
        return self._emit(arith.BitcastOp(value, self.int_type))

    def float_of_bits(self, value: SSAValue) -> SSAValue:
        return self._emit(arith.BitcastOp(value, self.float_type))

    def addi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.AddiOp(lhs, rhs))

    def subi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.SubiOp(lhs, rhs))

    def andi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.AndIOp(lhs, rhs))

    def ori(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.OrIOp(lhs, rhs))

    def xori(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.XOrIOp(lhs, rhs))

    def shli(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.ShLIOp(lhs, rhs))

    def shrsi(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self._emit(arith.ShRSIOp(lhs, rhs))


def emit_power_of_two(emitter: ArithEmitter, exponent: SSAValue) -> SSAValue:
    """2^exponent for an integer exponent inside the normal range, from its bits."""
    fmt = emitter.fmt
    biased = emitter.addi(exponent, emitter.int_const(fmt.exponent_bias))
    return emitter.float_of_bits(emitter.shli(biased, emitter.int_const(fmt.mantissa_bits)))


def reassociation_barrier(
    emitter: ArithEmitter, value: SSAValue, is_nan: SSAValue, x: SSAValue
) -> SSAValue:
    """
    `value`, passed through `select(isnan(x), x, value)`.

    Where x is NaN the expansion's result is x anyway, so this changes nothing, but LLVM's
    reassociation does not look through a select: under whole-kernel `reassoc, nsz` it can
    no longer merge k*ln2_hi and k*ln2_lo into one product with a rounded ln2 (measured in
    Numba, f32: exp 4.5 -> 1.2 ulp, log 1.9 -> 1.15 ulp). It costs one blend per element.
    """
    return emitter.select(is_nan, x, value)


def emit_exp(emitter: ArithEmitter, x: SSAValue) -> SSAValue:
    """exp(x): clamp, Cody-Waite reduction, polynomial, 2^k as two bit-built factors."""
    fmt, e = emitter.fmt, emitter
    is_nan = e.cmp("uno", x, x)
    # `ult` is also true for NaN: the integer path below never sees NaN.
    lower = e.const(fmt.exp_lower_clamp)
    clamped = e.select(e.cmp("ult", x, lower), lower, x)
    upper = e.const(fmt.exp_upper_clamp)
    clamped = e.select(e.cmp("ogt", clamped, upper), upper, clamped)

    half = e.select(e.cmp("olt", clamped, e.const(0.0)), e.const(-0.5), e.const(0.5))
    k = e.to_int(e.add(e.mul(clamped, e.const(fmt.log2_e)), half))
    k_float = e.to_float(k)
    r = e.sub(clamped, e.mul(k_float, e.const(fmt.ln2_hi)))
    r = e.sub(reassociation_barrier(e, r, is_nan, x), e.mul(k_float, e.const(fmt.ln2_lo)))
    # 1 + (r + r^2 q(r)): adding the 1 last keeps the rounding of the small part small
    # (0.80 ulp in isolation against 1.0 for Horner through the 1 + r terms).
    exp_r = e.add(e.const(1.0), e.add(r, e.mul(e.mul(r, r), e.horner(r, fmt.exp_coefficients))))

    k_low = e.shrsi(k, e.int_const(1))
    k_high = e.subi(k, k_low)
    scaled = e.mul(e.mul(exp_r, emit_power_of_two(e, k_low)), emit_power_of_two(e, k_high))
    return e.select(is_nan, x, scaled)


def emit_tanh(emitter: ArithEmitter, x: SSAValue) -> SSAValue:
    """tanh(x): odd polynomial below the threshold, 1 - 2/(exp(2|x|)+1) above it."""
    fmt, e = emitter.fmt, emitter
    # |x| and the sign bit through the bits: exact for -0 and NaN, no compare needed.
    bits = e.bits_of(x)
    magnitude_bits = e.andi(bits, e.int_const((1 << (fmt.int_width - 1)) - 1))
    sign_bit = e.xori(bits, magnitude_bits)
    magnitude = e.float_of_bits(magnitude_bits)

    square = e.mul(magnitude, magnitude)
    poly = e.mul(square, e.horner(square, fmt.tanh_coefficients))
    small = e.add(e.mul(magnitude, poly), magnitude)

    exp_2a = emit_exp(e, e.add(magnitude, magnitude))
    one = e.const(1.0)
    large = e.sub(one, e.div(e.const(2.0), e.add(exp_2a, one)))

    is_small = e.cmp("olt", magnitude, e.const(fmt.tanh_threshold))
    result = e.select(is_small, small, large)
    return e.float_of_bits(e.ori(e.bits_of(result), sign_bit))


def emit_log(emitter: ArithEmitter, x: SSAValue) -> SSAValue:
    """log(x): exponent and mantissa from the bits, atanh-series polynomial, specials."""
    fmt, e = emitter.fmt, emitter
    is_nan = e.cmp("uno", x, x)
    subnormal_shift = fmt.mantissa_bits + 2
    is_subnormal = e.cmp("olt", x, e.const(fmt.min_normal))
    normal = e.select(is_subnormal, e.mul(x, e.const(float(2**subnormal_shift))), x)
    exponent_fix = e.select(is_subnormal, e.int_const(-subnormal_shift), e.int_const(0))

    one_bits = fmt.exponent_bias << fmt.mantissa_bits
    bits = e.addi(e.bits_of(normal), e.int_const(one_bits - fmt.sqrt_half_bits))
    k = e.subi(e.shrsi(bits, e.int_const(fmt.mantissa_bits)), e.int_const(fmt.exponent_bias))
    k_float = e.to_float(e.addi(k, exponent_fix))
    mantissa_mask = e.int_const((1 << fmt.mantissa_bits) - 1)
    m = e.float_of_bits(e.addi(e.andi(bits, mantissa_mask), e.int_const(fmt.sqrt_half_bits)))

    f = e.sub(m, e.const(1.0))
    s = e.div(f, e.add(e.const(2.0), f))
    z = e.mul(s, s)
    r = e.mul(z, e.horner(z, fmt.log_coefficients))
    half_f_squared = e.mul(e.mul(e.const(0.5), f), f)
    # musl's order: the small terms first, f, then the large k * ln2_hi.
    small_terms = e.add(e.mul(s, e.add(half_f_squared, r)), e.mul(k_float, e.const(fmt.ln2_lo)))
    log_1pf = e.add(e.sub(small_terms, half_f_squared), f)
    log_1pf = reassociation_barrier(e, log_1pf, is_nan, x)
    result = e.add(log_1pf, e.mul(k_float, e.const(fmt.ln2_hi)))

    inf = e.const(float("inf"))
    result = e.select(e.cmp("oeq", x, e.const(0.0)), e.const(float("-inf")), result)
    result = e.select(e.cmp("olt", x, e.const(0.0)), e.const(float("nan")), result)
    result = e.select(e.cmp("oeq", x, inf), inf, result)
    return e.select(is_nan, x, result)


ERF_F32_CUTOVER = 0.927734375
"""Below this |x|, f32 erf uses its odd polynomial; above, 1 - exp(polynomial)."""
ERF_F32_SMALL = (
    1.28379166e-1,
    -3.76125336e-1,
    1.12819925e-1,
    -2.67681349e-2,
    4.99119423e-3,
    -5.96761703e-4,
)
"""P in erf(x) = x + x P(x^2) for |x| below the cut-over, ascending powers of x^2."""
ERF_F32_LARGE = (
    -1.28717512e-1,
    -6.34846687e-1,
    -1.06777877e-1,
    2.42546219e-2,
    -3.88396438e-3,
    3.83197126e-4,
    -1.72853470e-5,
)
"""Q in erf(a) = 1 - exp(a Q(a) - a) above the cut-over, ascending powers of a = |x|
(with the small polynomial: Norbert Juffa's minimax erff, ~1 ulp)."""
ERF_F32_SATURATION = 4.0
"""erf of anything at or above this rounds to 1 in f32: |x| is clamped there."""


def emit_erf(emitter: ArithEmitter, x: SSAValue) -> SSAValue:
    """erf(x), f32: odd polynomial below the cut-over, 1 - exp(polynomial) above it."""
    e = emitter
    bits = e.bits_of(x)
    magnitude_bits = e.andi(bits, e.int_const((1 << 31) - 1))
    sign_bit = e.xori(bits, magnitude_bits)
    magnitude = e.float_of_bits(magnitude_bits)

    small = e.add(e.mul(e.horner(e.mul(x, x), ERF_F32_SMALL), x), x)

    saturation = e.const(ERF_F32_SATURATION)
    a = e.select(e.cmp("ogt", magnitude, saturation), saturation, magnitude)
    exponent = e.sub(e.mul(e.horner(a, ERF_F32_LARGE), a), a)
    large = e.sub(e.const(1.0), emit_exp(e, exponent))
    large = e.float_of_bits(e.ori(e.bits_of(large), sign_bit))

    result = e.select(e.cmp("ogt", magnitude, e.const(ERF_F32_CUTOVER)), large, small)
    return e.select(e.cmp("uno", x, x), x, result)


BlockConstants = dict[tuple[Block, Attribute], dict[tuple[str, str], SSAValue]]
"""The constants expansions made so far in each block, by float type: reused by the
expansions after them in the block (ops are expanded in program order, so a constant made
for an earlier op comes before a later one). Canonicalize and CSE would merge them anyway;
made once, they are not made, hoisted and erased again (a 1,000-op program made 2,880)."""


def make_emitter(
    op: math.ExpOp | math.TanhOp | math.LogOp | math.ErfOp,
    rewriter: PatternRewriter,
    dtypes: frozenset[str],
    constants: BlockConstants | None = None,
) -> ArithEmitter | None:
    """An emitter for `op`'s scalar float type, or None when the pass leaves it alone."""
    float_type = op.operand.type
    fmt = float_format_of(float_type)
    if fmt is None or fmt.name not in dtypes:
        return None
    if isinstance(op, math.ErfOp) and fmt is not F32_FORMAT:
        return None  # f64 erf keeps libm's (no f64 expansion yet)
    assert isinstance(float_type, Float32Type | Float64Type)
    contract = FastMathFlag.ALLOW_CONTRACT
    fastmath = arith.FastMathFlagsAttr([contract] if contract in op.fastmath.data else "none")
    emitter = ArithEmitter(rewriter, float_type, fmt, fastmath)
    block = op.parent_block()
    if constants is not None and block is not None:
        emitter._constants = constants.setdefault((block, float_type), {})
    return emitter


@dataclass(frozen=True)
class ExpansionGate:
    """Which ops are worth expanding (module docstring: where it pays)."""

    min_iterations: int = 1 << 10
    min_inner_trip: int = 16

    def pays(self, op: Operation) -> bool:
        trips = enclosing_trips(op)
        return (trips.total is None or trips.total >= self.min_iterations) and (
            trips.innermost is None or trips.innermost >= self.min_inner_trip
        )


@dataclass
class ExpandExpPattern(RewritePattern):
    dtypes: frozenset[str]
    constants: BlockConstants = field(default_factory=BlockConstants)
    gate: ExpansionGate = ExpansionGate(0, 0)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.ExpOp, rewriter: PatternRewriter) -> None:
        if not self.gate.pays(op):
            return
        if (emitter := make_emitter(op, rewriter, self.dtypes, self.constants)) is not None:
            rewriter.replace(op, (), (emit_exp(emitter, op.operand),))


@dataclass
class ExpandTanhPattern(RewritePattern):
    dtypes: frozenset[str]
    constants: BlockConstants = field(default_factory=BlockConstants)
    gate: ExpansionGate = ExpansionGate(0, 0)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.TanhOp, rewriter: PatternRewriter) -> None:
        if not self.gate.pays(op):
            return
        if (emitter := make_emitter(op, rewriter, self.dtypes, self.constants)) is not None:
            rewriter.replace(op, (), (emit_tanh(emitter, op.operand),))


@dataclass
class ExpandLogPattern(RewritePattern):
    dtypes: frozenset[str]
    constants: BlockConstants = field(default_factory=BlockConstants)
    gate: ExpansionGate = ExpansionGate(0, 0)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.LogOp, rewriter: PatternRewriter) -> None:
        if not self.gate.pays(op):
            return
        if (emitter := make_emitter(op, rewriter, self.dtypes, self.constants)) is not None:
            rewriter.replace(op, (), (emit_log(emitter, op.operand),))


@dataclass
class ExpandErfPattern(RewritePattern):
    dtypes: frozenset[str]
    constants: BlockConstants = field(default_factory=BlockConstants)
    gate: ExpansionGate = ExpansionGate(0, 0)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.ErfOp, rewriter: PatternRewriter) -> None:
        if not self.gate.pays(op):
            return
        if (emitter := make_emitter(op, rewriter, self.dtypes, self.constants)) is not None:
            rewriter.replace(op, (), (emit_erf(emitter, op.operand),))


ExpansionPattern = ExpandExpPattern | ExpandTanhPattern | ExpandLogPattern | ExpandErfPattern
EXPANSION_PATTERNS: dict[str, type[ExpansionPattern]] = {
    "exp": ExpandExpPattern,
    "tanh": ExpandTanhPattern,
    "log": ExpandLogPattern,
    "erf": ExpandErfPattern,
}


@dataclass(frozen=True)
class TessExpandMathPass(ModulePass):
    """Expand scalar math.exp/tanh/log/erf into vectorisable arith (module docstring)."""

    name = "tess-expand-math"

    functions: tuple[str, ...] = ("exp", "tanh", "erf")
    """Which math ops to expand: any of exp, tanh, log, erf (erf: f32 only)."""

    dtypes: tuple[str, ...] = ("f32", "f64")
    """Which float types to expand: any of f32, f64."""

    min_iterations: int = ExpansionGate.min_iterations
    """Expand an op only if it runs at least this often per call (its loops' trip counts)."""

    min_inner_trip: int = ExpansionGate.min_inner_trip
    """Expand an op only if its innermost loop runs at least this often (vectorises)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        unknown_functions = sorted(set(self.functions) - EXPANSION_PATTERNS.keys())
        if unknown_functions:
            raise PassFailedException(
                f"tess-expand-math: unknown function(s) {', '.join(unknown_functions)}; "
                f"expected some of {', '.join(EXPANSION_PATTERNS)}"
            )
        unknown_dtypes = sorted(set(self.dtypes) - FLOAT_FORMATS.keys())
        if unknown_dtypes:
            raise PassFailedException(
                f"tess-expand-math: unknown dtype(s) {', '.join(unknown_dtypes)}; "
                f"expected some of {', '.join(FLOAT_FORMATS)}"
            )
        dtypes = frozenset(self.dtypes)
        constants = BlockConstants()  # shared: an exp and a tanh in one block share them
        gate = ExpansionGate(self.min_iterations, self.min_inner_trip)
        patterns = [
            EXPANSION_PATTERNS[name](dtypes, constants, gate)
            for name in dict.fromkeys(self.functions)
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns), apply_recursively=False
        ).rewrite_module(op)
