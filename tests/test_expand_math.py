"""
tess-expand-math: the arith expansions of math.exp/tanh/log/erf, measured in ulps.

The expanded IR is executed by a small NumPy evaluator (`evaluate_block`): each op is
applied elementwise to arrays of samples in the op's own type (float32 ops round to
float32, bitcast is `.view`, fptosi is `astype`), so one pass over the ops evaluates
~3e5 inputs at once. The evaluator is a second reading of the IR's semantics: it checks
that no `fptosi` ever sees NaN or an out-of-range value (poison in LLVM).

References: numpy's exp/tanh/log in x87 long double (64-bit mantissa) for both types;
for erf (f32 only), Python's double `math.erf`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from tessc.compiler import compile_module, numba_source
from tessc.context import make_context
from tessc.lowering.linalg.to_linalg import TessToLinalgPass
from tessc.lowering.loops.expand_math import F32_FORMAT, F64_FORMAT, TessExpandMathPass
from tessc.reference import interpret, parse_module

from helpers import assert_results_match, random_inputs

NUMPY_TYPES: dict[str, type[np.generic]] = {
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "i64": np.int64,
    "i1": np.bool_,
}

FLOAT_BINARY_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
}
INT_BINARY_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.andi": np.bitwise_and,
    "arith.ori": np.bitwise_or,
    "arith.xori": np.bitwise_xor,
    "arith.shli": np.left_shift,
    "arith.shrsi": np.right_shift,  # arithmetic on signed numpy ints
}


def numpy_type(value: SSAValue) -> type[np.generic]:
    return NUMPY_TYPES[str(value.type)]


def compare_floats(predicate: str, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    ordered = ~(np.isnan(lhs) | np.isnan(rhs))
    if predicate in ("ord", "uno"):
        return ordered if predicate == "ord" else ~ordered
    base = {
        "eq": np.equal,
        "gt": np.greater,
        "ge": np.greater_equal,
        "lt": np.less,
        "le": np.less_equal,
        "ne": np.not_equal,
    }[predicate[1:]](lhs, rhs)
    return (base & ordered) if predicate[0] == "o" else (base | ~ordered)


def evaluate_block(block: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a block of scalar arith ops on arrays of samples; the terminator's operands."""
    values: dict[SSAValue, np.ndarray] = dict(zip(block.args, args, strict=True))
    for op in block.ops:
        operands = [values[operand] for operand in op.operands]
        if isinstance(op, func.ReturnOp | YieldOp):
            return operands
        result = op.results[0]
        out_type = numpy_type(result)
        with np.errstate(all="ignore"):
            if isinstance(op, arith.ConstantOp):
                assert isinstance(op.value, FloatAttr | IntegerAttr)
                value = np.array(op.value.value.data, dtype=out_type)
            elif op.name in FLOAT_BINARY_OPS or op.name in INT_BINARY_OPS:
                table = FLOAT_BINARY_OPS if op.name in FLOAT_BINARY_OPS else INT_BINARY_OPS
                lhs, rhs = operands
                assert lhs.dtype == rhs.dtype == out_type, op
                value = table[op.name](lhs, rhs)
            elif isinstance(op, arith.NegfOp):
                value = np.negative(operands[0])
            elif isinstance(op, arith.CmpfOp):
                predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
                value = compare_floats(predicate, *operands)
            elif isinstance(op, arith.SelectOp):
                value = np.where(*operands)
            elif isinstance(op, arith.FPToSIOp):
                limit = np.iinfo(out_type)
                source = operands[0]
                assert np.all(np.isfinite(source)), "fptosi of NaN/inf is poison"
                assert np.all((source > limit.min) & (source < limit.max)), "fptosi overflow"
                value = source.astype(out_type)
            elif isinstance(op, arith.SIToFPOp):
                value = operands[0].astype(out_type)
            elif isinstance(op, arith.BitcastOp):
                value = np.ascontiguousarray(operands[0]).view(out_type)
            else:
                raise NotImplementedError(f"evaluator: {op.name}")
        assert value.dtype == out_type, (op.name, value.dtype, out_type)
        values[result] = value
    raise AssertionError("block without terminator")


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


UNGATED = {"min_iterations": 0, "min_inner_trip": 0}
"""The size gate off: the cases are scalar functions and generic bodies, outside loops
(the gate is FileCheck'd in tests/filecheck/loops/tess-expand-math.mlir)."""


def expand(text: str, **options: tuple[str, ...]) -> ModuleOp:
    module = parse(text)
    TessExpandMathPass(**options, **UNGATED).apply(make_context(), module)
    module.verify()
    return module


def expanded_function(name: str, dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    """A NumPy callable running the expansion of `math.<name>` on `dtype` samples."""
    module = expand(
        f"""
        func.func @f(%x: {dtype}) -> {dtype} {{
          %y = math.{name} %x : {dtype}
          func.return %y : {dtype}
        }}
        """,
        functions=("exp", "tanh", "log", "erf"),
    )
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    names = {op.name for op in function.walk()}
    assert not any(op_name.startswith("math.") for op_name in names), names
    block = function.body.block

    def run(x: np.ndarray) -> np.ndarray:
        (result,) = evaluate_block(block, [np.ascontiguousarray(x, dtype=NUMPY_TYPES[dtype])])
        return np.broadcast_to(result, x.shape)

    return run


# -- error measurement -------------------------------------------------------------------


def ulp_errors(got: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|got - reference| in ulps of got's type at the reference (long double reference)."""
    info = np.finfo(got.dtype)
    _, exponent = np.frexp(np.abs(reference))
    ulp_exponent = np.maximum(exponent - info.nmant - 1, info.minexp - info.nmant)
    ulp = np.ldexp(np.longdouble(1), ulp_exponent)
    return np.abs(got.astype(np.longdouble) - reference) / ulp


def check_against_reference(
    got: np.ndarray, x: np.ndarray, reference_function: Callable[[np.ndarray], np.ndarray]
) -> float:
    """Assert NaN/inf/zero agreement with the correctly rounded reference; max ulp error."""
    with np.errstate(all="ignore"):
        reference = reference_function(x.astype(np.longdouble))
        rounded = reference.astype(got.dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(rounded), err_msg=f"NaN at {x}")
    infinite = np.isinf(rounded)
    np.testing.assert_array_equal(got[infinite], rounded[infinite])
    finite = ~infinite & ~np.isnan(rounded)
    assert np.all(np.isfinite(got[finite])), x[finite][~np.isfinite(got[finite])]
    # A result that rounds to 0 must be 0 or the smallest subnormal (<= 1 ulp).
    errors = ulp_errors(got[finite], reference[finite])
    worst = int(np.argmax(errors))
    print(f"max {errors[worst]:.3f} ulp at x={x[finite][worst]!r}")
    return float(errors[worst])


def log_uniform(rng: np.random.Generator, low: float, high: float, n: int) -> np.ndarray:
    """n magnitudes log-uniform in [low, high] with random signs."""
    magnitudes = np.exp(rng.uniform(np.log(low), np.log(high), n))
    return magnitudes * rng.choice([-1.0, 1.0], n)


def samples(
    dtype: type[np.floating], low: float, high: float, tiny: float, extra: Sequence[float]
) -> np.ndarray:
    """Uniform and log-uniform samples over [low, high], edge cases and IEEE specials."""
    rng = np.random.default_rng(20240611)
    info = np.finfo(dtype)
    parts = [
        rng.uniform(low, high, 100_000),
        log_uniform(rng, tiny, max(-low, high), 100_000),
        rng.uniform(-1.0, 1.0, 50_000),
        np.array([*extra, 0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max]),
        np.array([info.smallest_subnormal, -info.smallest_subnormal, info.tiny, -info.tiny]),
    ]
    x = np.concatenate(parts).astype(dtype)
    # The neighbours of every sample: catches errors that depend on the last bits.
    with np.errstate(over="ignore"):
        up, down = np.nextafter(x, dtype(np.inf)), np.nextafter(x, dtype(-np.inf))
    return np.concatenate([x, up, down])


def exp_samples(dtype: type[np.floating]) -> np.ndarray:
    fmt = F32_FORMAT if dtype == np.float32 else F64_FORMAT
    info = np.finfo(dtype)
    # Where k = round(x / ln2) changes (r = +-ln2/2), and the overflow/underflow edges.
    k = np.arange(-1100, 1100)
    k_edges = (k + 0.5) * np.log(2.0)
    edges = [
        np.log(info.max),
        np.log(info.tiny),
        np.log(info.smallest_subnormal),
        np.log(float(info.smallest_subnormal)) - np.log(2.0),
    ]
    low, high = fmt.exp_lower_clamp, fmt.exp_upper_clamp
    extra = [*k_edges[(k_edges > low) & (k_edges < high)], *edges, low, high, 1.0, -1.0]
    return samples(dtype, low, high, float(info.smallest_subnormal), extra)


# Measured maxima of the expansions (see the module docstring of expand_math); the
# bounds leave a little room for the random samples.
MAX_ULP = {
    ("exp", "f32"): 1.0,
    ("exp", "f64"): 1.0,
    ("tanh", "f32"): 1.5,
    ("tanh", "f64"): 1.5,
    ("log", "f32"): 1.0,
    ("log", "f64"): 1.0,
    ("erf", "f32"): 1.5,
    ("sigmoid", "f32"): 2.5,  # numpy float32 1/(1+np.exp(-x)) itself: 2.84
}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_exp_error_in_ulps(dtype: str) -> None:
    numpy_dtype = NUMPY_TYPES[dtype]
    x = exp_samples(numpy_dtype)
    got = expanded_function("exp", dtype)(x)
    assert check_against_reference(got, x, np.exp) <= MAX_ULP["exp", dtype]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_tanh_error_in_ulps(dtype: str) -> None:
    numpy_dtype = NUMPY_TYPES[dtype]
    info = np.finfo(numpy_dtype)
    threshold = (F32_FORMAT if dtype == "f32" else F64_FORMAT).tanh_threshold
    edges = np.linspace(threshold * 0.99, threshold * 1.01, 2001)
    extra = [*edges, *-edges, 9.0, 19.0, 20.0, 44.5, 400.0, 1e-4, -1e-4]
    x = samples(numpy_dtype, -25.0, 25.0, float(info.smallest_subnormal), extra)
    got = expanded_function("tanh", dtype)(x)
    assert check_against_reference(got, x, np.tanh) <= MAX_ULP["tanh", dtype]
    # Odd symmetry and signed zeros, exactly.
    finite = np.isfinite(x)
    np.testing.assert_array_equal(expanded_function("tanh", dtype)(-x[finite]), -got[finite])
    zeros = got[x == 0]
    np.testing.assert_array_equal(np.signbit(zeros), np.signbit(x[x == 0]))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_log_error_in_ulps(dtype: str) -> None:
    numpy_dtype = NUMPY_TYPES[dtype]
    info = np.finfo(numpy_dtype)
    rng = np.random.default_rng(7)
    near_one = 1.0 + rng.uniform(-0.3, 0.5, 50_000)
    cutover = np.sqrt(0.5) * np.array([1.0, 2.0, 4.0, 0.5, 2.0**-130, 2.0**100])
    extra = [*near_one, *cutover, 1.0, 2.0, 0.5, np.e]
    x = samples(numpy_dtype, 0.0, float(info.max), float(info.smallest_subnormal), extra)
    got = expanded_function("log", dtype)(x)
    assert check_against_reference(got, x, np.log) <= MAX_ULP["log", dtype]


def test_erf_error_in_ulps() -> None:
    edges = np.linspace(0.92, 0.935, 2001)  # around the cut-over between the two forms
    extra = [*edges, *-edges, 3.9, 4.0, 4.1, 10.0, 1e-4, -1e-4]
    x = samples(np.float32, -6.0, 6.0, float(np.finfo(np.float32).smallest_subnormal), extra)
    got = expanded_function("erf", "f32")(x)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    assert (
        check_against_reference(got, x, lambda v: erf(v.astype(np.float64)))
        <= MAX_ULP["erf", "f32"]
    )
    finite = np.isfinite(x)
    np.testing.assert_array_equal(expanded_function("erf", "f32")(-x[finite]), -got[finite])


def test_f64_erf_is_left_to_libm() -> None:
    module = expand(
        """
        func.func @f(%x: f32, %y: f64) -> (f32, f64) {
          %a = math.erf %x : f32
          %b = math.erf %y : f64
          func.return %a, %b : f32, f64
        }
        """
    )
    assert math_ops(module) == ["math.erf:f64"]


SPECIAL_VALUES = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (np.inf, np.inf), (-np.inf, 0.0), (np.nan, np.nan)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (np.inf, 1.0), (-np.inf, -1.0), (np.nan, np.nan)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (np.inf, 1.0), (-np.inf, -1.0), (np.nan, np.nan)],
    "log": [
        (1.0, 0.0),
        (0.0, -np.inf),
        (-0.0, -np.inf),
        (-1.0, np.nan),
        (np.inf, np.inf),
        (-np.inf, np.nan),
        (np.nan, np.nan),
    ],
}


@pytest.mark.parametrize("name", SPECIAL_VALUES)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_special_values(name: str, dtype: str) -> None:
    if name == "erf" and dtype == "f64":
        pytest.skip("f64 erf is not expanded")
    numpy_dtype = NUMPY_TYPES[dtype]
    x, expected = np.array(SPECIAL_VALUES[name], dtype=numpy_dtype).T
    got = expanded_function(name, dtype)(np.ascontiguousarray(x))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# -- structure, options, sigmoid ---------------------------------------------------------

ALL_OPS = """
func.func @f(%x: f32, %y: f64, %v: vector<4xf32>) -> (f32, f64, f32, f64, f32, vector<4xf32>) {
  %a = math.exp %x : f32
  %b = math.exp %y fastmath<fast> : f64
  %c = math.tanh %x : f32
  %d = math.tanh %y : f64
  %e = math.log %x : f32
  %w = math.exp %v : vector<4xf32>
  func.return %a, %b, %c, %d, %e, %w : f32, f64, f32, f64, f32, vector<4xf32>
}
"""


def math_ops(module: ModuleOp) -> list[str]:
    return sorted(
        f"{op.name}:{op.results[0].type}" for op in module.walk() if op.name.startswith("math.")
    )


def test_default_options_expand_exp_and_tanh_of_scalars_only() -> None:
    assert math_ops(expand(ALL_OPS)) == ["math.exp:vector<4xf32>", "math.log:f32"]


def test_functions_and_dtypes_options() -> None:
    only_exp_f64 = expand(ALL_OPS, functions=("exp",), dtypes=("f64",))
    assert math_ops(only_exp_f64) == [
        "math.exp:f32",
        "math.exp:vector<4xf32>",
        "math.log:f32",
        "math.tanh:f32",
        "math.tanh:f64",
    ]
    everything = expand(ALL_OPS, functions=("exp", "tanh", "log"))
    assert math_ops(everything) == ["math.exp:vector<4xf32>"]


def test_unknown_option_values_are_diagnosed() -> None:
    with pytest.raises(PassFailedException, match="unknown function.*sinh"):
        expand(ALL_OPS, functions=("exp", "sinh"))
    with pytest.raises(PassFailedException, match="unknown dtype.*f16"):
        expand(ALL_OPS, dtypes=("f16",))


def test_only_contract_is_carried_over_from_fastmath() -> None:
    text = str(expand(ALL_OPS))
    assert "fastmath<contract>" in text
    assert "fastmath<fast>" not in text and "reassoc" not in text


def test_expansion_is_branch_free_and_deterministic() -> None:
    module = expand(ALL_OPS, functions=("exp", "tanh", "log"))
    dialects = {op.name.split(".")[0] for op in module.walk()}
    assert dialects == {"builtin", "func", "arith", "math"}  # math: the vector exp only
    assert str(module) == str(expand(ALL_OPS, functions=("exp", "tanh", "log")))


def test_sigmoid_and_tanh_from_tess_to_linalg_use_the_expansion() -> None:
    """tess-to-linalg writes sigmoid as 1/(1+exp(-x)): its math.exp is expanded too."""
    module = parse(
        """
        func.func @act(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
          %s = tess.sigmoid %x : tensor<8xf32>
          %t = tess.tanh %x : tensor<8xf32>
          func.return %s, %t : tensor<8xf32>, tensor<8xf32>
        }
        """
    )
    TessToLinalgPass().apply(make_context(), module)
    assert math_ops(module) == ["math.exp:f32", "math.tanh:f32"]
    TessExpandMathPass(**UNGATED).apply(make_context(), module)
    module.verify()
    assert math_ops(module) == []
    sigmoid, tanh = (op for op in module.walk() if isinstance(op, GenericOp))
    (tanh_of_one,) = evaluate_block(tanh.body.block, [np.float32([1.0])] * 2)
    assert abs(tanh_of_one[0] - np.tanh(1.0)) <= np.spacing(np.float32(1.0))
    # Below -88.7, exp(-x) overflows f32 and the formula itself gives 0 (true: < 2^-126).
    x = np.linspace(-88.0, 120.0, 100_001, dtype=np.float32)
    (got,) = evaluate_block(sigmoid.body.block, [x, np.zeros_like(x)])
    reference = 1 / (1 + np.exp(-x.astype(np.longdouble)))
    assert np.max(ulp_errors(got, reference)) <= MAX_ULP["sigmoid", "f32"]
    (far_left,) = evaluate_block(sigmoid.body.block, [np.float32([-89.0, -1e30, -np.inf])] * 2)
    np.testing.assert_array_equal(far_left, [0.0, 0.0, 0.0])


ACTIVATIONS = """
func.func @f(%x: {t}) -> ({t}, {t}, {t}) {{
  %e = tess.exp %x : {t}
  %s = tess.sigmoid %x : {t}
  %h = tess.tanh %x : {t}
  func.return %e, %s, %h : {t}, {t}, {t}
}}
"""


@pytest.mark.parametrize(
    ("shape", "expanded"),
    [
        ((1024, 10), False),  # an inner loop of 10 (the MLP's softmax): under min-inner-trip
        ((64, 16), True),  # 1,024 runs of an inner loop of 16: both thresholds, inclusive
        ((511,), False),  # under min-iterations
        ((2, 512), True),
    ],
    ids=["1024x10", "64x16", "511", "2x512"],
)
def test_the_size_gate_in_the_cpu_pipeline(shape: tuple[int, ...], expanded: bool) -> None:
    """Both sides of each threshold, compiled by the `cpu` pipeline against the reference:
    libm calls below them, the expansions (no `np.exp`/`np.tanh`) from them."""
    text = ACTIVATIONS.format(t=f"tensor<{'x'.join(map(str, shape))}xf32>")
    module = parse_module(text)
    source = numba_source(module)
    calls = source.count("np.exp(") + source.count("np.tanh(")
    assert (calls == 0) == expanded, source
    args = random_inputs(next(iter(module.ops)), 4, low=-20.0, high=20.0)
    expected = interpret(module, "f", args)
    assert_results_match(compile_module(module, "f")(*args), expected)
