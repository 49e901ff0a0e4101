"""Codegen (`tessc.lowering.codegen.to_numba.emit_numba`) on hand-written loop-level IR."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.codegen.numba_ops import _CMPF, EXPRESSIONS, UnsupportedOpError
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.runtime import Executable, load_source


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def parallel(ivs: list[str], uppers: list[str], body: str) -> str:
    """A generic-format `scf.parallel` from 0 to `uppers` step 1 (it has no custom syntax);
    the function must define `%c0` and `%c1`."""
    n = len(ivs)
    operands = ", ".join(["%c0"] * n + uppers + ["%c1"] * n)
    args = ", ".join(f"{iv}: index" for iv in ivs)
    types = ", ".join(["index"] * 3 * n)
    return (
        f'"scf.parallel"({operands}) <{{operandSegmentSizes = array<i32: {n}, {n}, {n}, 0>}}> '
        f"({{\n^bb0({args}):\n{body}\nscf.reduce\n}}) : ({types}) -> ()"
    )


def kernel(name: str, args: str, body: str) -> str:
    return (
        f"func.func private @{name}({args}) attributes {{tess.kernel}} {{\n"
        "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
        f"{body}\nfunc.return\n}}"
    )


# `out = relu(x + b) * 0.5` and `s = sum(out, dim 1)` over 64x128 f32, through two kernels.
BIAS_RELU_SUM = f"""
func.func @f(%x: memref<64x128xf32>, %b: memref<128xf32>, %out: memref<64x128xf32>,
             %s: memref<64xf32>) attributes {{tess.num_outputs = 2 : i64}} {{
  %t = memref.alloc() : memref<64x128xf32>
  func.call @f_kernel_0(%x, %b, %t)
    : (memref<64x128xf32>, memref<128xf32>, memref<64x128xf32>) -> ()
  func.call @f_kernel_1(%t, %s) : (memref<64x128xf32>, memref<64xf32>) -> ()
  "memref.copy"(%t, %out) : (memref<64x128xf32>, memref<64x128xf32>) -> ()
  memref.dealloc %t : memref<64x128xf32>
  func.return
}}
{
    kernel(
        "f_kernel_0",
        "%arg0: memref<64x128xf32>, %arg1: memref<128xf32>, %arg2: memref<64x128xf32>",
        '''
%c64 = arith.constant 64 : index
%c128 = arith.constant 128 : index
%zero = arith.constant 0.000000e+00 : f32
%half = arith.constant 5.000000e-01 : f32
'''
        + parallel(
            ["%i", "%j"],
            ["%c64", "%c128"],
            '''
%a = memref.load %arg0[%i, %j] : memref<64x128xf32>
%bj = memref.load %arg1[%j] : memref<128xf32>
%0 = arith.addf %a, %bj : f32
%1 = arith.maximumf %0, %zero : f32
%2 = arith.mulf %1, %half : f32
memref.store %2, %arg2[%i, %j] : memref<64x128xf32>''',
        ),
    )
}
{
    kernel(
        "f_kernel_1",
        "%arg0: memref<64x128xf32>, %arg1: memref<64xf32>",
        '''
%c64 = arith.constant 64 : index
%c128 = arith.constant 128 : index
%zero = arith.constant 0.000000e+00 : f32
'''
        + parallel(
            ["%i"],
            ["%c64"],
            '''
%acc = scf.for %k = %c0 to %c128 step %c1 iter_args(%sum = %zero) -> (f32) {
  %v = memref.load %arg0[%i, %k] : memref<64x128xf32>
  %n = arith.addf %sum, %v : f32
  scf.yield %n : f32
}
memref.store %acc, %arg1[%i] : memref<64xf32>''',
        ),
    )
}
"""


def bias_relu_sum_reference(x: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = np.maximum(x + b, np.float32(0)) * np.float32(0.5)
    return out, out.sum(axis=1)


def test_kernels_become_prange_nests_and_the_host_is_compiled() -> None:
    source = emit_numba(parse(BIAS_RELU_SUM), parallel_threshold=0)
    assert "from numba import njit, prange" in source
    # Kernels are compiled with (and cached inside) their host only: see test_runtime.py.
    assert source.count('@njit(parallel=True, fastmath=FASTMATH, error_model="numpy")') == 2
    assert source.count("cache=True") == 1
    kernel_0 = source[source.index("def f_kernel_0") :]
    assert "    for i in prange(64):\n        for j in range(128):\n" in kernel_0
    # f32 constants stay f32; the ops are one statement each with readable names.
    assert "fmaximum(add0, np.float32(0.0))" in kernel_0
    assert "mul0 = max0 * np.float32(0.5)" in kernel_0
    host = source[source.index("def f(") : source.index("def f_kernel_0")]
    assert (
        '@njit(cache=True, fastmath=FASTMATH, error_model="numpy")\ndef f(x, b, out, s):' in source
    )
    assert "t = np.empty((64, 128), dtype=np.float32)" in host
    assert "f_kernel_0(x, b, t)" in host and "f_kernel_1(t, s)" in host
    assert "prange" not in host


def test_loop_carried_values_are_assigned_around_the_loop() -> None:
    source = emit_numba(parse(BIAS_RELU_SUM), parallel_threshold=0)
    kernel_1 = source[source.index("def f_kernel_1") :]
    expected = (
        "    for i in prange(64):\n"
        "        sum_0 = np.float32(0.0)\n"
        "        for k in range(128):\n"
        "            v = arg0[i, k]\n"
        "            n = sum_0 + v\n"
        "            sum_0 = n\n"
        "        arg1[i] = sum_0\n"
    )
    assert expected in kernel_1  # `sum` is a builtin: renamed


def test_signatures_literal() -> None:
    source = emit_numba(parse(BIAS_RELU_SUM))
    tree = ast.parse(source)
    (literal,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "TESSC_SIGNATURES"  # type: ignore[attr-defined]
    ]
    assert ast.literal_eval(literal) == {
        "f": {
            "function": "f",
            "inputs": [((64, 128), "float32"), ((128,), "float32")],
            "input_names": ["x", "b"],
            "outputs": [((64, 128), "float32"), ((64,), "float32")],
            "output_names": ["out", "s"],
        }
    }


def test_output_is_deterministic() -> None:
    first = emit_numba(parse(BIAS_RELU_SUM))
    assert emit_numba(parse(BIAS_RELU_SUM)) == first
    compile(first, "<generated>", "exec")


def test_small_kernels_run_serially_inlined_into_the_host() -> None:
    source = emit_numba(parse(BIAS_RELU_SUM))  # 64*128 iterations: below the threshold
    assert "prange" not in source and "parallel=True" not in source
    assert "from numba import njit\n" in source
    assert "    for i in range(64):\n        for j in range(128):\n" in source
    assert "def f_kernel_0(" not in source and "    # f_kernel_0\n" in source
    separate = emit_numba(parse(BIAS_RELU_SUM), inline_serial_kernels=False)
    assert '@njit(fastmath=FASTMATH, error_model="numpy")\ndef f_kernel_0(' in separate


def test_a_sole_parallel_kernel_is_emitted_into_its_host() -> None:
    # One kernel call in the host: the host is that parallel function, cached itself.
    text = (
        "func.func @h(%a: memref<100x3xf32>, %o: memref<100x3xf32>) "
        "attributes {tess.num_outputs = 1 : i64} {\n"
        "func.call @copy(%a, %o) : (memref<100x3xf32>, memref<100x3xf32>) -> ()\n"
        "func.return\n}\n"
    )
    ivs = ["%i", "%j"]
    module = parse(text + single_kernel((100, 3), copy_body(ivs, (100, 3)), ivs))
    source = emit_numba(module, parallel_threshold=0, threaded_kernels=False)
    assert source.count("@njit(") == 1 and "def copy(" not in source
    assert '@njit(parallel=True, cache=True, fastmath=FASTMATH, error_model="numpy")\ndef h(' in (
        source
    )
    assert "    # copy\n    for i in prange(100):\n" in source
    a = np.arange(300, dtype=np.float32).reshape(100, 3)
    (out,) = Executable(load_source(source), "h")(a)
    np.testing.assert_array_equal(out, a)
    # Two kernel calls: both stay functions (a host never holds two parfors).
    source = emit_numba(parse(BIAS_RELU_SUM), parallel_threshold=0)
    assert "def f_kernel_0(" in source and "def f_kernel_1(" in source


COPY_HOST = (
    "func.func @h(%a: memref<100x3xf32>, %o: memref<100x3xf32>) "
    "attributes {tess.num_outputs = 1 : i64} {\n"
    "func.call @copy(%a, %o) : (memref<100x3xf32>, memref<100x3xf32>) -> ()\n"
    "func.return\n}\n"
)


@pytest.mark.parametrize(
    ("shape", "loop", "index"),
    [
        # An index that only indexes counts unsigned (no wraparound check to keep).
        (
            (100, 3),
            "    for i in range(np.uint64(lo), np.uint64(hi)):\n        for j in range(3):\n",
            "",
        ),
        ((2, 3, 100), "    for flat0 in range(lo, hi):\n", "        i = flat0 // 3\n"),
    ],
)
def test_parallel_kernels_of_a_python_host_are_threaded(
    shape: tuple[int, ...], loop: str, index: str
) -> None:
    ivs = ["%i", "%j", "%k"][: len(shape)]
    dims = "x".join(map(str, shape))
    host = COPY_HOST.replace("100x3", dims)
    source = emit_numba(
        parse(host + single_kernel(shape, copy_body(ivs, shape), ivs)), parallel_threshold=0
    )
    # No parfor: the kernel runs a share of the parallel loop; the host, in Python,
    # launches one share per thread.
    assert "prange" not in source and "parallel=True" not in source
    assert '@njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")\n' in source
    assert "def copy(lo, hi, a, o):\n" + loop + index in source
    extent = shape[0] if len(shape) == 2 else shape[0] * shape[1]
    assert f"def h(a, o):\n    parallel_for(copy, {extent}, a, o)\n" in source
    assert "from tessc.runtime.threads import parallel_for" in source
    a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    (out,) = Executable(load_source(source), "h")(a)
    np.testing.assert_array_equal(out, a)


def test_a_host_keeps_parfors_unless_all_its_kernels_can_be_threaded() -> None:
    # @one's loop has unit dims only (no parallel loop left to share): both stay parfors.
    ivs = ["%i", "%j"]
    small = single_kernel((1, 1), copy_body(ivs, (1, 1)), ivs).replace("@copy", "@one")
    host = (
        "func.func @h(%a: memref<100x3xf32>, %b: memref<1x1xf32>, %o: memref<100x3xf32>,"
        " %p: memref<1x1xf32>) attributes {tess.num_outputs = 2 : i64} {\n"
        "func.call @copy(%a, %o) : (memref<100x3xf32>, memref<100x3xf32>) -> ()\n"
        "func.call @one(%b, %p) : (memref<1x1xf32>, memref<1x1xf32>) -> ()\n"
        "func.return\n}\n"
    )
    big = single_kernel((100, 3), copy_body(ivs, (100, 3)), ivs)
    source = emit_numba(parse(host + big + small), parallel_threshold=0)
    assert "parallel_for" not in source and "(lo, hi" not in source
    assert "for i in prange(100):" in source
    a = np.arange(300, dtype=np.float32).reshape(100, 3)
    b = np.ones((1, 1), dtype=np.float32)
    out, p = Executable(load_source(source), "h")(a, b)
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(p, b)


def test_copies_are_loop_nests() -> None:
    source = emit_numba(parse(BIAS_RELU_SUM))
    assert "    for c0 in range(64):\n        for c1 in range(128):\n" in source
    assert "            out[c0, c1] = t[c0, c1]\n" in source


@pytest.mark.parametrize(("threshold", "inline"), [(0, True), (1 << 30, True), (1 << 30, False)])
def test_generated_module_runs(threshold: int, inline: bool) -> None:
    source = emit_numba(
        parse(BIAS_RELU_SUM), parallel_threshold=threshold, inline_serial_kernels=inline
    )
    program = Executable(load_source(source), "f")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    out, s = program(x, b)
    expected_out, expected_s = bias_relu_sum_reference(x, b)
    np.testing.assert_allclose(out, expected_out, rtol=1e-6)
    np.testing.assert_allclose(s, expected_s, rtol=1e-5, atol=1e-5)
    assert out.dtype == s.dtype == np.float32


# ---------------------------------------------------------------------------------------
# loop shapes
# ---------------------------------------------------------------------------------------


def single_kernel(shape: tuple[int, ...], body: str, ivs: list[str]) -> str:
    dims = "x".join(str(d) for d in shape)
    uppers = "\n".join(f"%u{k} = arith.constant {d} : index" for k, d in enumerate(shape))
    return kernel(
        "copy",
        f"%a: memref<{dims}xf32>, %o: memref<{dims}xf32>",
        uppers + "\n" + parallel(ivs, [f"%u{k}" for k in range(len(shape))], body),
    )


def copy_body(ivs: list[str], shape: tuple[int, ...]) -> str:
    dims = "x".join(str(d) for d in shape)
    index = ", ".join(ivs)
    return (
        f"%v = memref.load %a[{index}] : memref<{dims}xf32>\n"
        f"memref.store %v, %o[{index}] : memref<{dims}xf32>"
    )


def test_short_leading_dims_collapse_into_one_prange() -> None:
    ivs = ["%i", "%j", "%k"]
    source = emit_numba(
        parse(single_kernel((2, 3, 100), copy_body(ivs, (2, 3, 100)), ivs)), parallel_threshold=0
    )
    expected = (
        "    for flat0 in prange(6):\n"
        "        i = flat0 // 3\n"
        "        j = flat0 % 3\n"
        "        for k in range(100):\n"
        "            v = a[i, j, k]\n"
    )
    assert expected in source


def test_unit_dims_are_no_loops() -> None:
    ivs = ["%i", "%j"]
    source = emit_numba(
        parse(single_kernel((1, 100), copy_body(ivs, (1, 100)), ivs)), parallel_threshold=0
    )
    assert "    for j in prange(100):\n        v = a[0, j]\n        o[0, j] = v\n" in source


def test_long_leading_dim_is_the_prange() -> None:
    ivs = ["%i", "%j"]
    source = emit_numba(
        parse(single_kernel((100, 3), copy_body(ivs, (100, 3)), ivs)), parallel_threshold=0
    )
    assert "    for i in prange(100):\n        for j in range(3):\n" in source


def test_zero_d_memrefs_in_parallel_kernels_use_one_element_views() -> None:
    text = kernel(
        "k",
        "%s: memref<f32>, %a: memref<100xf32>, %o: memref<100xf32>",
        "%n = arith.constant 100 : index\n"
        + parallel(
            ["%i"],
            ["%n"],
            "%v = memref.load %a[%i] : memref<100xf32>\n%w = memref.load %s[] : memref<f32>\n"
            "%r = arith.mulf %v, %w : f32\nmemref.store %r, %o[%i] : memref<100xf32>",
        ),
    )
    host = (
        "func.func @h(%s: memref<f32>, %a: memref<100xf32>, %o: memref<100xf32>) "
        "attributes {tess.num_outputs = 1 : i64} {\n"
        "func.call @k(%s, %a, %o) : (memref<f32>, memref<100xf32>, memref<100xf32>) -> ()\n"
        "func.return\n}\n"
    )
    source = emit_numba(parse(host + text), parallel_threshold=0)
    assert "    s_1d = s.reshape((1,))\n" in source and "w = s_1d[0]" in source
    program = Executable(load_source(source), "h")
    a = np.arange(100, dtype=np.float32)
    (out,) = program(np.array(3.0, dtype=np.float32), a)
    np.testing.assert_array_equal(out, a * 3)


# ---------------------------------------------------------------------------------------
# constants, names, precision
# ---------------------------------------------------------------------------------------


def constant_kernel(typ: str, values: list[str]) -> str:
    lines = [f"%k{n} = arith.constant {v} : {typ}" for n, v in enumerate(values)]
    stores = [f"memref.store %k{n}, %o[%c{n}] : memref<8x{typ}>" for n in range(len(values))]
    consts = [f"%c{n} = arith.constant {n} : index" for n in range(2, len(values))]
    return (
        f"func.func private @k(%o: memref<8x{typ}>) attributes {{tess.kernel}} {{\n"
        "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
        + "\n".join(consts + lines + stores)
        + "\nfunc.return\n}"
    )


def test_float_constants_keep_their_type() -> None:
    values = ["0.1", "-2.5", "0x7F800000", "0xFF800000", "0x7FC00000"]
    source = emit_numba(parse(constant_kernel("f32", values)))
    for text in (
        "np.float32(0.1",
        "np.float32(-2.5)",
        "np.float32(np.inf)",
        "np.float32(-np.inf)",
        "np.float32(np.nan)",
    ):
        assert text in source
    values64 = ["0.1", "-2.5", "0x7FF0000000000000", "0xFFF0000000000000"]
    source = emit_numba(parse(constant_kernel("f64", values64)))
    assert "o[0] = 0.1\n" in source and "o[1] = (-2.5)\n" in source
    assert "o[2] = np.inf\n" in source and "o[3] = (-np.inf)\n" in source


def test_f32_arithmetic_stays_f32() -> None:
    # (x + 1e-8) - x is 0 in f32 arithmetic and 1e-8 in f64: a bare Python float constant
    # would promote the kernel to f64. No fast-math, so LLVM may not fold it to 1e-8.
    text = kernel(
        "k",
        "%a: memref<4xf32>, %o: memref<4xf32>",
        "%n = arith.constant 4 : index\n%eps = arith.constant 1.000000e-08 : f32\n"
        + parallel(
            ["%i"],
            ["%n"],
            "%v = memref.load %a[%i] : memref<4xf32>\n%s = arith.addf %v, %eps : f32\n"
            "%d = arith.subf %s, %v : f32\nmemref.store %d, %o[%i] : memref<4xf32>",
        ),
    )
    host = (
        "func.func @h(%a: memref<4xf32>, %o: memref<4xf32>) "
        "attributes {tess.num_outputs = 1 : i64} {\n"
        "func.call @k(%a, %o) : (memref<4xf32>, memref<4xf32>) -> ()\nfunc.return\n}\n"
    )
    source = emit_numba(parse(host + text), fastmath=())
    assert "FASTMATH = False" in source
    (out,) = Executable(load_source(source), "h")(np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(out, np.zeros(4, dtype=np.float32))


def test_names_avoid_keywords_builtins_and_globals() -> None:
    text = kernel(
        "lambda",
        "%np: memref<4xf32>, %range: memref<4xf32>",
        "%n = arith.constant 4 : index\n"
        + parallel(
            ["%for"],
            ["%n"],
            "%print = memref.load %np[%for] : memref<4xf32>\n"
            "%f_kernel = arith.negf %print : f32\n"
            "memref.store %f_kernel, %range[%for] : memref<4xf32>",
        ),
    )
    source = emit_numba(parse(text))
    assert "def lambda_(np_0, range_0):" in source
    assert "    for for_0 in range(4):\n        print_0 = np_0[for_0]\n" in source
    assert "f_kernel = -print_0" in source


@pytest.mark.parametrize(
    "op_text",
    [
        '%r = "test.op"() : () -> f32',
        "%r = tess.fill 1.000000e+00 : tensor<2xf32>",
        "%r = math.ctpop %c1 : index",
    ],
)
def test_unsupported_ops_raise_naming_the_op(op_text: str) -> None:
    ctx = make_context(allow_unregistered=True)
    text = kernel("k", "", op_text)
    module = Parser(ctx, text).parse_module()
    with pytest.raises(UnsupportedOpError) as error:
        emit_numba(module)
    op_name = op_text.split("=", 1)[1].split()[0].split('"')[-2 if '"' in op_text else 0]
    assert error.value.op_name == op_name
    assert f"'{op_name}'" in str(error.value)


def test_module_level_ops_other_than_func_are_rejected() -> None:
    module = parse(
        '"memref.global"() <{sym_name = "g", type = memref<2xf32>, initial_value, '
        'sym_visibility = "private"}> : () -> ()'
    )
    with pytest.raises(UnsupportedOpError, match="memref.global"):
        emit_numba(module)


# ---------------------------------------------------------------------------------------
# expression templates: the semantics of arith's integer and comparison ops in Python
# ---------------------------------------------------------------------------------------


def evaluate(template: str, *operands: object) -> object:
    names = [f"v{k}" for k in range(len(operands))]
    return eval(template.format(*names), {"np": np}, dict(zip(names, operands, strict=True)))


@pytest.mark.parametrize("a", [-7, -6, -1, 0, 1, 6, 7])
@pytest.mark.parametrize("b", [-3, -2, 1, 2, 3])
def test_signed_division_truncates_toward_zero(a: int, b: int) -> None:
    quotient = math.trunc(a / b)
    assert evaluate(EXPRESSIONS["arith.divsi"], a, b) == quotient
    assert evaluate(EXPRESSIONS["arith.remsi"], a, b) == a - b * quotient
    assert evaluate(EXPRESSIONS["arith.floordivsi"], a, b) == math.floor(a / b)
    assert evaluate(EXPRESSIONS["arith.ceildivsi"], a, b) == math.ceil(a / b)


@pytest.mark.parametrize("a", [1.0, 2.0, math.nan])
@pytest.mark.parametrize("b", [1.0, 2.0, math.nan])
def test_float_comparisons_follow_ordered_and_unordered_semantics(a: float, b: float) -> None:
    unordered = math.isnan(a) or math.isnan(b)
    truth = {
        "eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
        "ne": not unordered and a != b,
    }  # fmt: skip
    for name, ordered_value in truth.items():
        predicate = "one" if name == "ne" else f"o{name}"
        assert evaluate(_CMPF[predicate], a, b) == ordered_value, predicate
        assert evaluate(_CMPF[f"u{name}"], a, b) == (unordered or ordered_value), f"u{name}"
    assert evaluate(_CMPF["ord"], a, b) == (not unordered)
    assert evaluate(_CMPF["uno"], a, b) == unordered


# ---------------------------------------------------------------------------------------
# integers and bits (what tess-expand-math emits), arena views (what tess-memory-plan emits)
# ---------------------------------------------------------------------------------------

INTEGER_KERNEL = """
func.func @h(%k: memref<4xi32>, %o: memref<4xf32>, %w: memref<4xi32>)
    attributes {tess.num_outputs = 2 : i64} {
  func.call @bits(%k, %o, %w) : (memref<4xi32>, memref<4xf32>, memref<4xi32>) -> ()
  func.return
}
func.func private @bits(%k: memref<4xi32>, %o: memref<4xf32>, %w: memref<4xi32>)
    attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %bias = arith.constant 127 : i32
  %c23 = arith.constant 23 : i32
  %max = arith.constant 2147483647 : i32
  %c28 = arith.constant 28 : i32
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %k[%i] : memref<4xi32>
    %e = arith.addi %v, %bias : i32
    %s = arith.shli %e, %c23 : i32
    %pow2 = arith.bitcast %s : i32 to f32
    memref.store %pow2, %o[%i] : memref<4xf32>
    %wrapped = arith.addi %v, %max : i32
    %logical = arith.shrui %wrapped, %c28 : i32
    memref.store %logical, %w[%i] : memref<4xi32>
  }
  func.return
}
"""


def test_bitcasts_and_narrow_integers_wrap_like_arith() -> None:
    source = emit_numba(parse(INTEGER_KERNEL))
    assert "from numba.extending import intrinsic" in source
    assert "pow2 = bitcast(np.int32(s), np.float32)" in source
    assert "e = np.int32(v + 127)" in source
    (o, w) = Executable(load_source(source), "h")(np.array([0, 3, -2, 10], dtype=np.int32))
    np.testing.assert_array_equal(o, np.array([1.0, 8.0, 0.25, 1024.0], dtype=np.float32))
    # v + INT32_MAX wraps for v > 0; shrui shifts in zeros: the top 4 bits as unsigned.
    wrapped = (np.array([0, 3, -2, 10], dtype=np.int64) + 2147483647).astype(np.int32)
    np.testing.assert_array_equal(w, (wrapped.view(np.uint32) >> 28).astype(np.int32))


ARENA_HOST = """
func.func @h(%a: memref<2x3xf32> {tess.donated},
             %out: memref<2x3xf32> {tess.aliases_input = 0 : i64},
             %ws: memref<128xi8> {tess.workspace})
    attributes {tess.num_outputs = 1 : i64, tess.workspace_bytes = 128 : i64} {
  %c64 = arith.constant 64 : index
  %t = memref.view %ws[%c64][] : memref<128xi8> to memref<2x3xf32>
  func.call @double(%a, %t) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
  func.call @double(%t, %out) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
  func.return
}
func.func private @double(%x: memref<2x3xf32>, %y: memref<2x3xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %v = memref.load %x[%i, %j] : memref<2x3xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %y[%i, %j] : memref<2x3xf32>
    }
  }
  func.return
}
"""


def test_arena_views_workspace_and_output_aliases() -> None:
    source = emit_numba(parse(ARENA_HOST))
    assert "def h(a, out, ws):" in source
    assert "t = ws[64:88].view(np.float32).reshape((2, 3))" in source
    assert '"workspace_bytes": 128,' in source and '"output_aliases": [0],' in source
    program = Executable(load_source(source), "h")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = a * 4
    (result,) = program(a)
    np.testing.assert_array_equal(result, expected)
    assert result is a  # donated: computed in the input's array
    assert program.workspace().nbytes == 128 and program.workspace().ctypes.data % 64 == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_max_and_min_keep_arith_semantics(dtype: type[np.floating]) -> None:
    """`arith.maximumf`/`minimumf` run as `llvm.maximum`/`minimum` (`fmaximum`): NaN if
    either operand is NaN, elementwise and in a row max (a reduction LLVM vectorises), as
    NumPy's maximum/minimum and the reference interpreter give them."""
    import tessc as ts

    nan, inf = np.nan, np.inf
    x = np.array([[1.0, nan, -inf, 3.0] * 8, [2.0, 5.0, -1.0, 0.5] * 8], dtype)
    y = np.array([[nan, 2.0, -3.0, inf] * 8, [1.0, -2.0, 7.0, 0.25] * 8], dtype)

    def f(x, y):
        return ts.maximum(x, y), ts.minimum(x, y), ts.max(x, axis=1), ts.min(x, axis=1)

    step = ts.jit(f)
    assert "fmaximum(" in step.ir(x, y, stage="numba")
    got = step(x, y)
    want = (np.maximum(x, y), np.minimum(x, y), x.max(axis=1), x.min(axis=1))
    reference = ts.jit(f, target="reference")(x, y)
    for g, w, r in zip(got, want, reference, strict=True):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(r, w)


def test_arguments_named_like_the_modules_globals_do_not_shadow_them() -> None:
    """A threaded host calls `parallel_for`, external kernels take `void`/`voidptr`, member
    forms `carray`/`member_pointer`: arguments of those names are renamed, not bound over
    them (a `parallel_for` argument made the host call the array)."""
    import tessc as ts

    def f(parallel_for, carray, voidptr, external, void, intp, member_pointer):  # noqa: ANN001, ANN202
        return (parallel_for * carray + voidptr).relu() * external - void + intp * member_pointer

    args = [np.random.default_rng(i).standard_normal(1 << 19).astype(np.float32) for i in range(7)]
    a, b, c, d, e, g, h = args
    np.testing.assert_allclose(
        ts.jit(f)(*args), np.maximum(a * b + c, 0) * d - e + g * h, rtol=1e-5, atol=1e-5
    )
