"""
exp/tanh/log over 2^24 float32 in Numba: libm calls vs the tess-expand-math expansions.

Every "expanded" kernel is generated from the pass's output, not written by hand: a
scalar `func.func` applying `math.<fn>` is expanded by `TessExpandMathPass`, and its arith
ops are translated one to one into statements inside a `prange` loop (`scalar_kernel_source`
below: typed constants, `np.int32(v).view(np.float32)` for `arith.bitcast`). When
`tessc.lowering.codegen.to_numba.emit_numba` can translate the expanded loop IR (it needs
`arith.bitcast`), its kernel is timed too.

For reference: a copy kernel (the memory-bandwidth limit: 64 MiB read + 64 MiB written),
the fused `relu(x*w+b)*sigmoid(x) - 0.5x` (W1 of README.md), and each kernel's max error in
ulps over the same 2^24 inputs as compiled, for three fast-math flag sets (LLVM may
contract to FMAs and, with `reassoc`, reorder the expansions: the error column shows it).

Run: /work/venv/bin/python bench/bench_exp.py [--n-log2 24] [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import SSAValue
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.loops.expand_math import TessExpandMathPass

FASTMATH_VARIANTS: dict[str, set[str] | bool] = {
    "none": False,
    "safe": {"arcp", "contract", "nsz"},
    # to_numba's DEFAULT_FASTMATH. Without the pass's reassociation barrier, reassoc + nsz
    # folds Cody-Waite's two steps into one (exp 4.5 ulp); with it, ~1.2 ulp.
    "codegen-default": {"arcp", "contract", "nsz", "reassoc"},
}

DTYPES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "i1": "bool_"}
BINARY = {
    "arith.addf": "+",
    "arith.subf": "-",
    "arith.mulf": "*",
    "arith.divf": "/",
    "arith.addi": "+",
    "arith.subi": "-",
    "arith.andi": "&",
    "arith.ori": "|",
    "arith.xori": "^",
    "arith.shli": "<<",
    "arith.shrsi": ">>",
}
CMPF = {
    "olt": "{0} < {1}",
    "ogt": "{0} > {1}",
    "oeq": "{0} == {1}",
    "ult": "not ({0} >= {1})",
    "uno": "({0} != {0} or {1} != {1})",
}


# -- kernels generated from the pass's output ---------------------------------------------


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


def expanded_scalar_function(name: str, dtype: str) -> func.FuncOp:
    text = f"""
    func.func @f(%x: {dtype}) -> {dtype} {{
      %y = math.{name} %x : {dtype}
      func.return %y : {dtype}
    }}
    """
    module = Parser(make_context(), text).parse_module()
    TessExpandMathPass(functions=(name,), min_iterations=0, min_inner_trip=0).apply(
        make_context(), module
    )
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def scalar_kernel_source(function: func.FuncOp, kernel_name: str) -> str:
    """A prange kernel `kernel_name(x, out)` running `function`'s arith ops per element."""
    names: dict[SSAValue, str] = {function.body.block.args[0]: "v"}
    lines = [f"def {kernel_name}(x, out):", "    for i in prange(x.shape[0]):", "        v = x[i]"]

    def dtype_of(value: SSAValue) -> str:
        return DTYPES[str(value.type)]

    for index, op in enumerate(function.body.block.ops):
        operands = [names[operand] for operand in op.operands]
        if isinstance(op, func.ReturnOp):
            lines.append(f"        out[i] = {operands[0]}")
            break
        result = op.results[0]
        if isinstance(op, arith.ConstantOp):
            assert isinstance(op.value, FloatAttr | IntegerAttr)
            value = op.value.value.data
            literal = repr(float(value)) if isinstance(op.value, FloatAttr) else str(value)
            if literal in ("inf", "-inf", "nan"):
                literal = f"np.{literal}" if literal[0] != "-" else "-np.inf"
            names[result] = f"np.{dtype_of(result)}({literal})"
            continue
        if op.name in BINARY:
            text = f"{operands[0]} {BINARY[op.name]} {operands[1]}"
        elif isinstance(op, arith.NegfOp):
            text = f"-{operands[0]}"
        elif isinstance(op, arith.CmpfOp):
            predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            text = CMPF[predicate].format(*operands)
        elif isinstance(op, arith.SelectOp):
            text = f"{operands[1]} if {operands[0]} else {operands[2]}"
        elif isinstance(op, arith.FPToSIOp | arith.SIToFPOp):
            text = f"np.{dtype_of(result)}({operands[0]})"
        elif isinstance(op, arith.BitcastOp):
            source = dtype_of(op.operands[0])
            text = f"np.{source}({operands[0]}).view(np.{dtype_of(result)})"
        else:
            raise NotImplementedError(op.name)
        names[result] = f"t{index}"
        lines.append(f"        t{index} = {text}")
    return "\n".join(lines) + "\n"


def compile_source(source: str, name: str, fastmath: set[str] | bool) -> Callable[..., None]:
    namespace: dict[str, object] = {"np": np, "prange": prange}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return njit(parallel=True, fastmath=fastmath, error_model="numpy")(namespace[name])


def emit_numba_kernel(name: str, n: int, fastmath: set[str] | bool) -> Callable[..., None]:
    """The kernel as the real pipeline would emit it: loop IR -> expand -> emit_numba."""
    from tessc.lowering.codegen.to_numba import emit_numba
    from tessc.runtime.cache import load_source

    text = f"""
    func.func private @kernel(%x: memref<{n}xf32>, %out: memref<{n}xf32>) attributes {{tess.kernel}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = arith.constant {n} : index
      "scf.parallel"(%c0, %n, %c1) <{{operandSegmentSizes = array<i32: 1, 1, 1, 0>}}> ({{
      ^bb0(%i: index):
        %v = memref.load %x[%i] : memref<{n}xf32>
        %e = math.{name} %v : f32
        memref.store %e, %out[%i] : memref<{n}xf32>
        scf.reduce
      }}) : (index, index, index) -> ()
      func.return
    }}
    """  # noqa: E501
    module: ModuleOp = Parser(make_context(), text).parse_module()
    TessExpandMathPass(functions=(name,), min_iterations=0, min_inner_trip=0).apply(
        make_context(), module
    )
    flags = sorted(fastmath) if isinstance(fastmath, set) else []
    source = emit_numba(module, fastmath=flags)
    # Loaded as the runtime loads a compiled module: from a file, so `cache=True` has a locator.
    return load_source(source).kernel  # type: ignore[no-any-return]


# -- reference kernels --------------------------------------------------------------------


def libm_kernels(fastmath: set[str] | bool) -> dict[str, Callable[..., None]]:
    def copy(x: np.ndarray, out: np.ndarray) -> None:
        for i in prange(x.shape[0]):
            out[i] = x[i]

    def exp(x: np.ndarray, out: np.ndarray) -> None:
        for i in prange(x.shape[0]):
            out[i] = np.exp(x[i])

    def tanh(x: np.ndarray, out: np.ndarray) -> None:
        for i in prange(x.shape[0]):
            out[i] = np.tanh(x[i])

    def log(x: np.ndarray, out: np.ndarray) -> None:
        for i in prange(x.shape[0]):
            out[i] = np.log(x[i])

    def fused(x: np.ndarray, out: np.ndarray) -> None:
        w, b, half = np.float32(0.75), np.float32(0.25), np.float32(0.5)
        for i in prange(x.shape[0]):
            v = x[i]
            relu = max(v * w + b, np.float32(0.0))
            out[i] = relu * (np.float32(1.0) / (np.float32(1.0) + np.exp(-v))) - half * v

    jit = njit(parallel=True, fastmath=fastmath, error_model="numpy")
    return {name: jit(f) for name, f in [("copy", copy), ("exp", exp), ("tanh", tanh),
                                          ("log", log), ("fused", fused)]}  # fmt: skip


def fused_expanded_source(function: func.FuncOp) -> str:
    """The fused kernel W1 (README.md) with the expanded exp inlined for exp(-v)."""
    exp_source = scalar_kernel_source(function, "fused_expanded").splitlines()
    body = exp_source[3:-1]  # between `v = x[i]` and `out[i] = ...`
    result = exp_source[-1].split("=", 1)[1].strip()
    return (
        "\n".join(
            [
                "def fused_expanded(x, out):",
                "    w, b, half = np.float32(0.75), np.float32(0.25), np.float32(0.5)",
                "    for i in prange(x.shape[0]):",
                "        xv = x[i]",
                "        v = -xv",
                *body,
                "        relu = max(xv * w + b, np.float32(0.0))",
                f"        out[i] = relu * (np.float32(1.0) / (np.float32(1.0) + {result}))"
                " - half * xv",
            ]
        )
        + "\n"
    )


# -- measurement --------------------------------------------------------------------------


@dataclass
class Case:
    label: str
    kernel: Callable[..., None]
    x: np.ndarray
    reference: Callable[[np.ndarray], np.ndarray] | None
    best_ms: float = float("inf")


def time_interleaved(cases: list[Case], out: np.ndarray, repeat: int) -> None:
    """Best time of each case, timing them in turn so machine load hits all alike."""
    for case in cases:
        case.kernel(case.x, out)  # compile and fault the pages in
    for _ in range(repeat):
        for case in cases:
            start = time.perf_counter()
            case.kernel(case.x, out)
            case.best_ms = min(case.best_ms, (time.perf_counter() - start) * 1e3)


def max_ulp(got: np.ndarray, x: np.ndarray, reference: Callable[[np.ndarray], np.ndarray]) -> float:
    with np.errstate(all="ignore"):
        exact = reference(x.astype(np.float64))
        finite = np.isfinite(exact.astype(np.float32)) & np.isfinite(got)
        _, exponent = np.frexp(np.abs(exact[finite]))
        ulp = np.ldexp(1.0, np.maximum(exponent - 24, -149))
        return float(np.max(np.abs(got[finite].astype(np.float64) - exact[finite]) / ulp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--n-log2", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(describe_machine())
    n = 1 << args.n_log2
    rng = np.random.default_rng(0)
    inputs = {
        "exp": rng.uniform(-87.0, 88.0, n).astype(np.float32),
        "tanh": rng.uniform(-10.0, 10.0, n).astype(np.float32),
        "log": np.exp(rng.uniform(-80.0, 80.0, n)).astype(np.float32),
        "fused": rng.uniform(-10.0, 10.0, n).astype(np.float32),
    }
    references = {"exp": np.exp, "tanh": np.tanh, "log": np.log}
    out = np.empty(n, dtype=np.float32)
    functions = {name: expanded_scalar_function(name, "f32") for name in references}
    print(f"n = 2^{args.n_log2} float32, threads = {os.environ.get('NUMBA_NUM_THREADS', 'all')}")

    for variant, fastmath in FASTMATH_VARIANTS.items():
        print(f"\nfastmath = {variant} ({fastmath})")
        libm = libm_kernels(fastmath)
        cases = [Case("copy (bandwidth limit)", libm["copy"], inputs["exp"], None)]
        for name, reference in references.items():
            x = inputs[name]
            source = scalar_kernel_source(functions[name], f"{name}_expanded")
            expanded = compile_source(source, f"{name}_expanded", fastmath)
            cases += [
                Case(f"{name} libm", libm[name], x, reference),
                Case(f"{name} expanded (pass output)", expanded, x, reference),
            ]
            try:
                cases.append(
                    Case(
                        f"{name} via emit_numba", emit_numba_kernel(name, n, fastmath), x, reference
                    )
                )
            except Exception as error:  # the codegen may not translate every op yet
                reason = str(error).strip().splitlines()[0]
                print(f"  {name + ' via emit_numba':36s} skipped: {reason}")
        fused_source = fused_expanded_source(functions["exp"])
        fused_expanded = compile_source(fused_source, "fused_expanded", fastmath)
        cases += [
            Case("relu(x*w+b)*sigmoid(x)-0.5x libm", libm["fused"], inputs["fused"], None),
            Case("relu(x*w+b)*sigmoid(x)-0.5x expanded", fused_expanded, inputs["fused"], None),
        ]
        time_interleaved(cases, out, args.repeat)

        copy_ms = cases[0].best_ms
        libm_ms = 0.0
        for case in cases:
            line = f"  {case.label:36s} {case.best_ms:7.2f} ms  {case.best_ms / copy_ms:5.2f}x copy"
            if case.reference is not None:
                case.kernel(case.x, out)
                line += f"   max {max_ulp(out, case.x, case.reference):5.2f} ulp"
            if "libm" in case.label:
                libm_ms = case.best_ms
            else:
                line += f"   {libm_ms / case.best_ms:5.1f}x faster than libm" if libm_ms else ""
            print(line)


if __name__ == "__main__":
    main()
