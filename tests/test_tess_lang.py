"""The `.tess` language: same IR as the builder and the tracer, errors with locations."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from xdsl.parser import Parser

import tessc as ts
from tessc.compiler import compile_module
from tessc.context import make_context
from tessc.dialects.builder import build_function, build_module
from tessc.dialects.builder_types import tensor_type
from tessc.frontend.tess_lang import TessSourceError, parse_tess
from tessc.reference import interpret

EXAMPLES = Path(__file__).parent.parent / "examples"
RNG = np.random.default_rng(7)

MLP_TESS = """\
def mlp(x: f32[32, 64], w1: f32[64, 128], b1: f32[128], w2: f32[128, 10]) -> f32[32]:
    h = relu(x @ w1 + b1)
    return sum(h @ w2, dim=1)
"""

MLP_IR = """\
builtin.module {
  func.func @mlp(%x: tensor<32x64xf32>, %w1: tensor<64x128xf32>, %b1: tensor<128xf32>, \
%w2: tensor<128x10xf32>) -> tensor<32xf32> {
    %0 = tess.matmul %x, %w1 : tensor<32x64xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
    %1 = tess.add %0, %b1 : tensor<32x128xf32>, tensor<128xf32> -> tensor<32x128xf32>
    %2 = tess.relu %1 : tensor<32x128xf32>
    %3 = tess.matmul %2, %w2 : tensor<32x128xf32>, tensor<128x10xf32> -> tensor<32x10xf32>
    %4 = tess.sum %3 dims = [1] : tensor<32x10xf32> -> tensor<32xf32>
    func.return %4 : tensor<32xf32>
  }
}"""


def mlp(x, w1, b1, w2):
    h = (x @ w1 + b1).relu()
    return (h @ w2).sum(dim=1)


def mlp_inputs():
    shapes = [(32, 64), (64, 128), (128,), (128, 10)]
    return [RNG.standard_normal(s).astype(np.float32) for s in shapes]


def mlp_by_builder():
    types = [tensor_type(s) for s in [(32, 64), (64, 128), (128,), (128, 10)]]

    def body(b, x, w1, b1, w2):
        h = b.relu(b.add(b.matmul(x, w1), b1))
        return b.sum(b.matmul(h, w2), dims=1)

    return build_module(build_function("mlp", types, body, ["x", "w1", "b1", "w2"]))


def test_mlp_has_identical_ir_from_every_frontend():
    from_tess = str(parse_tess(MLP_TESS, "mlp.tess"))
    from_tracer = ts.trace(mlp, *mlp_inputs()).ir()
    from_builder = str(mlp_by_builder())
    from_text = str(Parser(make_context(), MLP_IR).parse_module())
    assert from_tess == MLP_IR
    assert from_tracer == from_tess
    assert from_builder == from_tess
    assert from_text == from_tess


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_mlp_has_identical_results_from_every_frontend(target):
    inputs = mlp_inputs()
    modules = [
        parse_tess(MLP_TESS, "mlp.tess"),
        ts.trace(mlp, *inputs).module,
        mlp_by_builder(),
        Parser(make_context(), MLP_IR).parse_module(),
    ]
    results = [compile_module(module, "mlp", target)(*inputs)[0] for module in modules]
    expected = (np.maximum(inputs[0] @ inputs[1] + inputs[2], 0) @ inputs[3]).sum(1)
    np.testing.assert_allclose(results[0], expected, rtol=1e-4, atol=1e-3)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    jitted = ts.jit(mlp, target=target)(*inputs)
    np.testing.assert_array_equal(jitted, results[0])


# ---------------------------------------------------------------------------------------
# every operator and built-in lowers as the tracer lowers its Python spelling
# ---------------------------------------------------------------------------------------

SIGNATURE = "x: f32[2, 3], y: f32[3], z: f32[3, 4]"
EQUIVALENT = {
    "x + y": lambda x, y, z: x + y,
    "x - 1": lambda x, y, z: x - 1,
    "1 - x": lambda x, y, z: 1 - x,
    "2 * x * 3": lambda x, y, z: 2 * x * 3,
    "x / y": lambda x, y, z: x / y,
    "x ** 2": lambda x, y, z: x**2,
    "-x ** 2": lambda x, y, z: -(x**2),
    "x * (1 / 4)": lambda x, y, z: x * (1 / 4),
    "-x": lambda x, y, z: -x,
    "x < y": lambda x, y, z: x < y,
    "x > 0.5": lambda x, y, z: x > 0.5,
    "x <= y": lambda x, y, z: x <= y,
    "x >= y": lambda x, y, z: x >= y,
    "x == y": lambda x, y, z: x == y,
    "x != y": lambda x, y, z: x != y,
    "x @ z": lambda x, y, z: x @ z,
    "x @ z + 1 < 2": lambda x, y, z: x @ z + 1 < 2,
    "exp(x)": lambda x, y, z: ts.exp(x),
    "x.exp()": lambda x, y, z: x.exp(),
    "log(x)": lambda x, y, z: x.log(),
    "relu(x)": lambda x, y, z: x.relu(),
    "sigmoid(x)": lambda x, y, z: ts.sigmoid(x),
    "tanh(x)": lambda x, y, z: x.tanh(),
    "sqrt(x)": lambda x, y, z: x.sqrt(),
    "abs(x)": lambda x, y, z: abs(x),
    "neg(x)": lambda x, y, z: x.neg(),
    "reciprocal(x)": lambda x, y, z: x.reciprocal(),
    "maximum(x, y)": lambda x, y, z: ts.maximum(x, y),
    "minimum(x, 0)": lambda x, y, z: x.minimum(0),
    "maximum(0, x)": lambda x, y, z: ts.maximum(0, x),
    "pow(x, y)": lambda x, y, z: x.pow(y),
    "matmul(x, z)": lambda x, y, z: x.matmul(z),
    "where(x > 0, x, y)": lambda x, y, z: ts.where(x > 0, x, y),
    "sum(x)": lambda x, y, z: x.sum(),
    "sum(x, dim=1)": lambda x, y, z: x.sum(dim=1),
    "x.sum(dim=(0, 1), keepdim=True)": lambda x, y, z: x.sum(dim=(0, 1), keepdim=True),
    "mean(x, 0)": lambda x, y, z: x.mean(0),
    "max(x, dim=-1)": lambda x, y, z: x.amax(dim=-1),
    "min(x)": lambda x, y, z: x.min(),
    "reshape(x, [3, 2])": lambda x, y, z: x.reshape(3, 2),
    "x.view(6)": lambda x, y, z: x.view(6),
    "x.reshape(-1, 2)": lambda x, y, z: x.reshape((-1, 2)),
    "permute(x, [1, 0])": lambda x, y, z: x.permute(1, 0),
    "x.T": lambda x, y, z: x.T,
    "y.T": lambda x, y, z: y.T,
    "transpose(z)": lambda x, y, z: ts.transpose(z),
    "broadcast_to(y, [4, 3])": lambda x, y, z: y.broadcast_to(4, 3),
    "unsqueeze(y, 0)": lambda x, y, z: y.unsqueeze(0),
    "zeros([2, 3]) + x": lambda x, y, z: ts.zeros((2, 3)) + x,
    "full([3], 2.5) * y": lambda x, y, z: ts.full((3,), 2.5) * y,
    "ones([2, 1], f32) - x": lambda x, y, z: ts.ones((2, 1), "f32") - x,
    "x * 2, y.exp()": lambda x, y, z: (x * 2, y.exp()),
}


@pytest.mark.parametrize("expression", sorted(EQUIVALENT))
def test_tess_and_tracer_give_identical_ir(expression):
    source = f"def f({SIGNATURE}):\n    return {expression}\n"
    fn = EQUIVALENT[expression]
    fn.__name__ = "f"
    arrays = [np.ones(s, np.float32) for s in [(2, 3), (3,), (3, 4)]]
    assert str(parse_tess(source, "f.tess")) == ts.trace(fn, *arrays).ir()


def test_assignments_inlined_calls_and_several_results_match_the_tracer():
    source = """\
# helpers are inlined where they are called, as Python calls are when traced
def layer(h: f32[4, 3], w: f32[3, 3]) -> f32[4, 3]:
    return relu(h @ w)

def f(x: f32[4, 3], w: f32[3, 3]) -> (f32[4, 3], f32[]):
    a = layer(x, w)
    b, c = a * 2, layer(a, w=w)
    return b - c, mean(c)
"""

    def layer(h, w):
        return (h @ w).relu()

    def f(x, w):
        a = layer(x, w)
        b, c = a * 2, layer(a, w=w)
        return b - c, c.mean()

    module = parse_tess(source, "f.tess")
    x, w = np.ones((4, 3), np.float32), np.ones((3, 3), np.float32)
    tess_f = str(module).split("func.func @f")[1]
    traced_f = ts.trace(f, x, w).ir().split("func.func @f")[1]
    assert tess_f == traced_f


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_f64_programs(dtype):
    source = f"def f(x: {dtype}[3], s: {dtype}) -> {dtype}[3]:\n    return x * s + 1\n"
    module = parse_tess(source, "f.tess")
    np_dtype = np.float32 if dtype == "f32" else np.float64
    x, s = np.arange(3, dtype=np_dtype), np.array(2, np_dtype)
    (result,) = interpret(module, "f", [x, s])
    assert result.dtype == np_dtype
    np.testing.assert_array_equal(result, x * 2 + 1)


def test_examples_parse_and_run():
    mlp_module = parse_tess((EXAMPLES / "mlp.tess").read_text(), "mlp.tess")
    assert str(mlp_module) == MLP_IR
    module = parse_tess((EXAMPLES / "classifier.tess").read_text(), "classifier.tess")
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, 16)]
    shapes = [(64, 32), (32,), (32, 10), (10,)]
    params = [RNG.standard_normal(s).astype(np.float32) * 0.1 for s in shapes]
    (loss,) = interpret(module, "loss", [x, labels, *params])
    w1, b1, w2, b2 = params
    z = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    log_softmax = z - z.max(1, keepdims=True)
    log_softmax -= np.log(np.exp(log_softmax).sum(1, keepdims=True))
    np.testing.assert_allclose(loss, -(log_softmax * labels).sum(1).mean(), rtol=1e-5)


def test_comments_blank_lines_and_line_continuations():
    source = (
        "# leading comment\n\n"
        "def f(x: f32[2],   # the input\n"
        "      y: f32[2]):\n"
        "\n"
        "    # inside\n"
        "    z = x + \\\n"
        "        y\n"
        "    return (z *\n"
        "            2)\n"
        "# trailing comment"
    )
    assert "tess.mul" in str(parse_tess(source, "f.tess"))


def test_an_empty_file_is_an_empty_module():
    assert list(parse_tess("# nothing here\n", "empty.tess").ops) == []


# ---------------------------------------------------------------------------------------
# errors: file:line:col, what was expected, the shapes
# ---------------------------------------------------------------------------------------


def error(source: str) -> str:
    with pytest.raises(TessSourceError) as info:
        parse_tess(source, "bad.tess")
    return str(info.value)


HEADER = "def f(x: f32[3, 4, 1], y: f32[3, 5], v: f32[3]) -> f32[3]:\n"

SYNTAX_ERRORS = {
    "missing operand": (
        HEADER + "    return x +\n",
        "bad.tess:2:15: error: unexpected end of line; expected one of "
        "'(', '+', '-', '[', a name, a number",
    ),
    "unclosed bracket": (
        HEADER + "    return sum(v\n",
        "bad.tess:2:15: error: '(' was never closed",
    ),
    "unexpected token": (
        "def f(x: f32[3] -> f32[3]:\n    return x\n",
        "bad.tess:1:17: error: unexpected '->'; expected one of ')', ','",
    ),
    "bad character": (
        HEADER + "    return v $ 2\n",
        "bad.tess:2:14: error: unexpected '$'; expected one of '!=', '(', '*'",
    ),
    "unexpected indentation": (
        HEADER + "    a = v\n        return a\n",
        "bad.tess:3:9: error: unexpected indentation",
    ),
    "inconsistent dedent": (
        HEADER + "        a = v\n    return a\n",
        "bad.tess:3:5: error: unindent to column 5 does not match any outer indentation level",
    ),
    "missing colon": (
        "def f(x: f32[3]) -> f32[3]\n    return x\n",
        "bad.tess:1:27: error: unexpected end of line; expected ':'",
    ),
    "missing body": (
        "def f(x: f32[3]) -> f32[3]:\n",
        "bad.tess:2:1: error: unexpected end of file; expected an indented block",
    ),
    "statement outside a def": (
        "x = 1\n",
        "bad.tess:1:1: error: unexpected 'x'; expected one of 'def', a new line",
    ),
}


@pytest.mark.parametrize("case", sorted(SYNTAX_ERRORS))
def test_syntax_errors(case):
    source, expected = SYNTAX_ERRORS[case]
    assert error(source).startswith(expected)


SEMANTIC_ERRORS = {
    "broadcast": (
        HEADER + "    h = relu(x)\n    return x + y\n",
        "bad.tess:3:12: error: cannot broadcast (3,4,1) with (3,5) in `x + y`",
    ),
    "nested broadcast": (
        HEADER + "    return sum(exp(v) * y, dim=0)\n",
        "bad.tess:2:16: error: cannot broadcast (3) with (3,5) in `exp(v) * y`",
    ),
    "matmul": (
        HEADER + "    return y @ v\n",
        "bad.tess:2:12: error: matmul contraction mismatch: (3,5) and (3) (5 != 3) in `y @ v`",
    ),
    "declared result": (
        HEADER + "    return y\n",
        "bad.tess:2:5: error: `f` returns f32[3, 5] but is declared to return f32[3]",
    ),
    "unknown dtype": (
        "def f(x: f16[3]):\n    return x\n",
        "bad.tess:1:10: error: unknown dtype `f16`; expected f32, f64, i32, i64 or bool",
    ),
    "bad dimension": (
        "def f(x: f32[2.5]):\n    return x\n",
        "bad.tess:1:14: error: a dimension must be a non-negative integer, got 2.5",
    ),
    "undefined name": (
        HEADER + "    return v + w\n",
        "bad.tess:2:16: error: undefined name `w`",
    ),
    "unknown function": (
        HEADER + "    return softplus(v)\n",
        "bad.tess:2:12: error: unknown function `softplus`",
    ),
    "unknown attribute": (
        HEADER + "    return v.size\n",
        "bad.tess:2:14: error: unknown attribute `size`",
    ),
    "bad keyword": (
        HEADER + "    return sum(v, dims=0)\n",
        "bad.tess:2:12: error: `sum`: got an unexpected keyword argument 'dims'",
    ),
    "bad dim": (
        HEADER + "    return v.sum(dim=1)\n",
        "bad.tess:2:12: error: dim 1 is out of range for a tensor of rank 1 in `v.sum(dim=1)`",
    ),
    "number where a tensor is needed": (
        HEADER + "    return exp(2)\n",
        "bad.tess:2:12: error: expected a tensor, got a number in `exp(2)`",
    ),
    "returning a number": (
        HEADER + "    return 1 + 2\n",
        "bad.tess:2:12: error: a function returns tensors, not a number",
    ),
    "missing return": (
        HEADER + "    a = v\n",
        "bad.tess:1:5: error: `f` has no `return` statement",
    ),
    "code after return": (
        HEADER + "    return v\n    a = v\n",
        "bad.tess:3:5: error: unreachable code after `return`",
    ),
    "unpacking": (
        HEADER + "    a, b = v\n    return a\n",
        "bad.tess:2:5: error: cannot unpack 1 value(s) into 2 names",
    ),
    "duplicate function": (
        HEADER + "    return v\n" + HEADER + "    return v\n",
        "bad.tess:3:5: error: function `f` is defined twice",
    ),
    "duplicate parameter": (
        "def f(x: f32[3], x: f32[3]):\n    return x\n",
        "bad.tess:1:18: error: parameter `x` is declared twice",
    ),
    "call argument type": (
        HEADER + "    return g(y)\ndef g(a: f32[3]):\n    return a\n",
        "bad.tess:2:12: error: argument `a` of `g` must be f32[3], got f32[3, 5]",
    ),
    "recursion": (
        HEADER + "    return f(x, y, v)\n",
        "bad.tess:2:12: error: `f` calls itself (recursion cannot be traced)",
    ),
}


@pytest.mark.parametrize("case", sorted(SEMANTIC_ERRORS))
def test_semantic_errors(case):
    source, expected = SEMANTIC_ERRORS[case]
    assert error(source) == expected


def test_errors_carry_their_location():
    with pytest.raises(TessSourceError) as info:
        parse_tess(HEADER + "    return x + y\n", "model.tess")
    assert (info.value.filename, info.value.line, info.value.column) == ("model.tess", 2, 12)
    assert info.value.message == "cannot broadcast (3,4,1) with (3,5) in `x + y`"


# ---------------------------------------------------------------------------------------
# tessc-opt reads .tess files
# ---------------------------------------------------------------------------------------


def tessc_opt(*args: str) -> tuple[int, str, str]:
    from tessc.cli.opt import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def test_tessc_opt_reads_tess_files(tmp_path):
    path = tmp_path / "mlp.tess"
    path.write_text(MLP_TESS)
    status, out, _ = tessc_opt(str(path))
    assert status == 0 and out.strip() == MLP_IR
    status, out, _ = tessc_opt(str(path), "-p", "tess-to-linalg")
    assert status == 0 and "linalg.generic" in out and " = tess." not in out


def test_tessc_opt_reports_tess_errors(tmp_path):
    path = tmp_path / "bad.tess"
    path.write_text(HEADER + "    return x + y\n")
    status, _, err = tessc_opt(str(path))
    assert status == 1
    assert f"{path}:2:12: error: cannot broadcast (3,4,1) with (3,5) in `x + y`" in err
