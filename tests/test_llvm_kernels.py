"""Kernels called by name written as LLVM IR (`tessc.lowering.codegen.to_llvm`, compiled by
`tessc.runtime.llvm_kernels`): each op form against NumPy on a kernel of its own, called
through ctypes; a whole train step against the same step with Numba's kernels and against
the reference interpreter; the fallback to Numba; the disk cache and its checksums."""

from __future__ import annotations

import ctypes
import itertools
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from numba.types import void, voidptr
from xdsl.dialects import func

from tessc.lowering.codegen.to_llvm import kernel_ir, kernel_source
from tessc.reference import parse_module
from tessc.runtime import llvm_kernels
from tessc.runtime.llvm_kernels import LlvmKernel, compile_llvm_kernels

FASTMATH = ("arcp", "contract", "nsz", "reassoc")
_names = itertools.count()


def compiled_kernel(text: str, path: Path | None = None) -> LlvmKernel:
    """The kernel `@k` of loop IR `text` as an LLVM kernel of a module of its own, compiled
    (its machine code cached beside `path`)."""
    fn = next(op for op in parse_module(text).ops if isinstance(op, func.FuncOp))
    ir = kernel_ir(fn, "k", FASTMATH)
    module = types.ModuleType(f"tessc_test_llvm_{next(_names)}")
    arity = len(fn.function_type.inputs.data)
    module.k = LlvmKernel(module.__name__, "k", void(*[voidptr] * arity), ir.support, ir.definition)
    compile_llvm_kernels(module, path=path)
    return module.k


def call(kernel: LlvmKernel, *arrays: np.ndarray) -> None:
    """`kernel` on `arrays`, through ctypes."""
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arrays))(kernel.address)
    function(*[a.ctypes.data for a in arrays])


def run_kernel(text: str, *arrays: np.ndarray) -> None:
    call(compiled_kernel(text), *arrays)


FLOATS = """
func.func @k(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %s: memref<4xf32>, %pos: memref<4x8xi1>)
    attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.000000e+00 : f32
  %half = arith.constant 5.000000e-01 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    %sum = scf.for %j = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<4x8xf32>
      %up = arith.cmpf ogt, %v, %zero : f32
      memref.store %up, %pos[%i, %j] : memref<4x8xi1>
      %r = scf.if %up -> (f32) {
        %e = math.exp %v : f32
        %l = math.log1p %e : f32
        scf.yield %l : f32
      } else {
        %t = math.tanh %v : f32
        %m = arith.maximumf %t, %half : f32
        %n = arith.negf %m : f32
        scf.yield %n : f32
      }
      memref.store %r, %y[%i, %j] : memref<4x8xf32>
      %next = arith.addf %acc, %v : f32
      scf.yield %next : f32
    }
    memref.store %sum, %s[%i] : memref<4xf32>
  }
  func.return
}
"""


def test_loops_branches_math_and_bools_match_numpy() -> None:
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    y, s, pos = np.zeros_like(x), np.zeros(4, np.float32), np.zeros((4, 8), np.bool_)
    run_kernel(FLOATS, x, y, s, pos)
    expected = np.where(x > 0, np.log1p(np.exp(x)), -np.maximum(np.tanh(x), 0.5))
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(pos, x > 0)


INTEGERS = """
func.func @k(%a: memref<12xi32>, %b: memref<12xi32>, %out: memref<5x12xi32>)
    attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c12 = arith.constant 12 : index
  "scf.parallel"(%c0, %c12, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%k: index):
    %x = memref.load %a[%k] : memref<12xi32>
    %y = memref.load %b[%k] : memref<12xi32>
    %q = arith.divsi %x, %y : i32
    %f = arith.floordivsi %x, %y : i32
    %c = arith.ceildivsi %x, %y : i32
    %r = arith.remsi %x, %y : i32
    %m = arith.maxsi %x, %y : i32
    %r0 = arith.constant 0 : index
    %r1 = arith.constant 1 : index
    %r2 = arith.constant 2 : index
    %r3 = arith.constant 3 : index
    %r4 = arith.constant 4 : index
    memref.store %q, %out[%r0, %k] : memref<5x12xi32>
    memref.store %f, %out[%r1, %k] : memref<5x12xi32>
    memref.store %c, %out[%r2, %k] : memref<5x12xi32>
    memref.store %r, %out[%r3, %k] : memref<5x12xi32>
    memref.store %m, %out[%r4, %k] : memref<5x12xi32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
"""


def test_integer_division_rounds_as_arith_says_and_gives_0_for_a_zero_divisor() -> None:
    a = np.array([7, -7, 7, -7, 0, 5, -5, 9, -9, 3, 8, -8], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, 0, 4, 4, -3, 8, 3], np.int32)
    out = np.full((5, 12), 99, np.int32)
    run_kernel(INTEGERS, a, b, out)
    safe = np.where(b == 0, 1, b)
    truncated = np.trunc(a / safe).astype(np.int32)
    floored = np.floor_divide(a, safe)
    ceiled = -np.floor_divide(-a, safe)
    quotients = np.stack([truncated, floored, ceiled, a - truncated * safe])
    expected = np.vstack([np.where(b == 0, 0, quotients), np.maximum(a, b)[None]])
    np.testing.assert_array_equal(out, expected)


VIEWS = """
func.func @k(%x: memref<4x8xf32>, %ws: memref<64xi8>, %out: memref<2x3xf32>, %flat: memref<32xf32>)
    attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %sub = memref.subview %x[1, 2] [2, 3] [1, 2]
      : memref<4x8xf32> to memref<2x3xf32, strided<[8, 2], offset: 10>>
  %window = memref.view %ws[%c16][] : memref<64xi8> to memref<2x3xf32>
  %line = memref.collapse_shape %x [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %grid = memref.expand_shape %flat [[0, 1]] output_shape [4, 8]
      : memref<32xf32> into memref<4x8xf32>
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %v = memref.load %sub[%i, %j] : memref<2x3xf32, strided<[8, 2], offset: 10>>
      memref.store %v, %window[%i, %j] : memref<2x3xf32>
      %w = memref.load %window[%i, %j] : memref<2x3xf32>
      memref.store %w, %out[%i, %j] : memref<2x3xf32>
    }
  }
  scf.for %k = %c0 to %c32 step %c1 {
    %v = memref.load %line[%k] : memref<32xf32>
    %r = arith.divui %k, %c8 : index
    %col = arith.remui %k, %c8 : index
    memref.store %v, %grid[%r, %col] : memref<4x8xf32>
  }
  func.return
}
"""


def test_subviews_views_and_reshapes_address_what_numpy_slices() -> None:
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    workspace = np.zeros(64, np.int8)
    out, flat = np.zeros((2, 3), np.float32), np.zeros(32, np.float32)
    run_kernel(VIEWS, x, workspace, out, flat)
    np.testing.assert_array_equal(out, x[1:3, 2:8:2])
    np.testing.assert_array_equal(workspace[16:40].view(np.float32).reshape(2, 3), x[1:3, 2:8:2])
    np.testing.assert_array_equal(flat, x.ravel())


MMA = """
func.func @k(%a: memref<8xf32>, %b: memref<64xf32>, %acc: memref<3x2x16xf32>, %add: memref<i1>)
    attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %accumulate = memref.load %add[] : memref<i1>
  micro.mma %a[%c0], %b[%c0], %c4, %acc[%c1, %c0, %c0], %accumulate
      {rows = 2 : i64, cols = 16 : i64, lanes = 8 : i64}
      : memref<8xf32>, memref<64xf32>, memref<3x2x16xf32>
  func.return
}
"""


@pytest.mark.parametrize("accumulate", [False, True])
def test_micro_mma_multiplies_packed_panels_into_its_tile(accumulate: bool) -> None:
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((2, 4)).astype(np.float32)  # rows x k
    rhs = rng.standard_normal((4, 16)).astype(np.float32)  # k x cols
    acc = rng.standard_normal((3, 2, 16)).astype(np.float32)
    before = acc.copy()
    run_kernel(MMA, lhs.T.copy().ravel(), rhs.ravel(), acc, np.array(accumulate))
    expected = before.copy()
    expected[1] = lhs @ rhs + (before[1] if accumulate else 0)
    np.testing.assert_allclose(acc, expected, rtol=1e-5, atol=1e-5)


def test_a_kernel_with_a_type_without_an_llvm_form_stays_numbas() -> None:
    text = """
    func.func @k(%x: memref<2xf32>) attributes {tess.kernel} {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<2xf32>
      %h = arith.truncf %v : f32 to f16
      %w = arith.extf %h : f16 to f32
      memref.store %w, %x[%c0] : memref<2xf32>
      func.return
    }
    """
    fn = next(op for op in parse_module(text).ops if isinstance(op, func.FuncOp))
    assert kernel_source(fn, "k", "void(voidptr)", FASTMATH) is None


def test_machine_code_is_cached_beside_the_module_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "tessc_module.py"
    before = llvm_kernels.STATS.compiled, llvm_kernels.STATS.loaded
    compiled_kernel(FLOATS, path)
    (cached,) = tmp_path.glob("tessc_module.llvm-*.o")
    compiled_kernel(FLOATS, path)
    assert (llvm_kernels.STATS.compiled, llvm_kernels.STATS.loaded) == (
        before[0] + 1,
        before[1] + 1,
    )
    data = bytearray(cached.read_bytes())
    data[-20] ^= 0xFF  # a flipped bit in the machine code: compiled again, rewritten
    cached.write_bytes(bytes(data))
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    y, s, pos = np.zeros_like(x), np.zeros(4, np.float32), np.zeros((4, 8), np.bool_)
    kernel = compiled_kernel(FLOATS, path)
    assert llvm_kernels.STATS.compiled == before[0] + 2
    call(kernel, x, y, s, pos)
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-5)
    assert cached.read_bytes() != bytes(data)


def test_mlp_step_with_llvm_kernels_matches_numbas_and_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    try:
        from mlp_step import init_params, loss_fn
    finally:
        sys.path.pop(0)
    import tessc as ts

    rng = np.random.default_rng(3)
    params = init_params(32)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]

    def step(p: dict, x: np.ndarray, y: np.ndarray) -> tuple:
        loss, g = ts.value_and_grad(loss_fn)(p, x, y)
        return {k: p[k] - 0.1 * g[k] for k in p}, loss

    results = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("TESSC_LLVM_KERNELS", setting)
        jitted = ts.jit(step)
        source = jitted.ir(params, x, y, stage="numba")
        assert ("llvm_kernel(__name__" in source) == (setting == "1")
        results[setting] = jitted(params, x, y)
    reference = ts.jit(step, target="reference")(params, x, y)
    for got in (results["1"], reference):
        leaves = zip(
            ts.tree_util.tree_leaves(got), ts.tree_util.tree_leaves(results["0"]), strict=True
        )
        for a, b in leaves:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_ir_llvm_rejects_is_an_internal_error_with_the_module_saved() -> None:
    kernel = LlvmKernel(
        "tessc_test_llvm_bad", "k", void(voidptr), (), "define void @k(ptr %x) #0 {\nentry:\n}"
    )
    module = types.ModuleType("tessc_test_llvm_bad")
    module.k = kernel
    with pytest.raises(llvm_kernels.LlvmKernelError, match="bug in tessc") as caught:
        compile_llvm_kernels(module)
    reproducer = Path(str(caught.value).split("saved in ")[1].split(". ")[0])
    assert "define void @k" in reproducer.read_text()
    reproducer.unlink()


def test_member_forms_of_llvm_kernels_keep_the_numba_helpers_they_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every serial kernel called by name (thresholds at their lowest): AMSGrad's update is
    an LLVM kernel, and its member form, Numba's, still finds its `fmaximum` helper (it
    took the kernel's list of helpers, which an LLVM kernel no longer contributes)."""
    import tessc as ts
    from tessc.lowering.codegen import numba_external

    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 0)
    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_KERNELS", 1)
    monkeypatch.setenv("TESSC_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(4)
    params = {f"w{k}": rng.standard_normal((3, 5)).astype(np.float32) for k in range(3)}
    grads = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in params.items()}
    reference = ts.optim.Adam(lr=0.01, amsgrad=True, weight_decay=0.05)
    step = ts.jit(lambda p, g, s: reference.step(p, g, s), target="reference")
    want, _ = step(params, grads, reference.init(params))
    optimizer = ts.optim.Adam(lr=0.01, amsgrad=True, weight_decay=0.05)
    got, _ = optimizer.step(dict(params), grads, optimizer.init(params))
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("tile", [(8, 32, 16), (4, 16, 8)], ids=["8x32", "4x16"])
def test_micro_kernel_is_full_width_fmas_without_spills(tile: tuple[int, int, int]) -> None:
    """`micro.mma`'s function, as the runtime optimises it: one vector FMA per accumulator
    in its k loop, on zmm registers for 16 lanes (AVX-512) or ymm for 8, and no stack
    access between the loop's label and its back edge."""
    import re

    import llvmlite.binding as llvm

    from tessc.lowering.codegen.llvm_micro import mma_function

    rows, cols, lanes = tile
    features = llvm.get_host_cpu_features()
    if not features.get("avx512f" if lanes == 16 else "avx2"):
        pytest.skip("no vector registers of that width on this machine")
    name, support = mma_function(rows, cols, lanes, (1, rows, cols), "float")
    machine = llvm_kernels.target_machine()
    # Not internal here: nothing calls it, and LLVM would drop it.
    text = "\n\n".join(support).replace("define internal", "define")
    lines = machine.emit_assembly(llvm_kernels.optimized(text, machine)).splitlines()
    register = "zmm" if lanes == 16 else "ymm"
    fmas = [n for n, line in enumerate(lines) if re.search(rf"vfmadd\w+ps\s.*%{register}", line)]
    assert len(fmas) == rows * cols // lanes, "\n".join(lines)
    start = max(n for n in range(fmas[0]) if re.match(r"^\.?L\w+:", lines[n]))
    label = lines[start].split(":")[0]
    end = next(n for n in range(fmas[-1], len(lines)) if re.search(rf"\sj\w+\s+{label}$", lines[n]))
    assert not any("(%rsp)" in line for line in lines[start : end + 1]), "\n".join(lines)


NARROW = """
func.func @k(%a: memref<4xi8>, %b: memref<4xi8>, %f: memref<4xf32>, %small: memref<3x4xi8>,
    %bits: memref<2x4xi32>, %back: memref<4xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c23 = arith.constant 23 : i32
  %c3 = arith.constant 3 : i8
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xi8>
    %y = memref.load %b[%i] : memref<4xi8>
    %s = arith.addi %x, %y : i8
    %m = arith.muli %x, %y : i8
    %r = arith.shrsi %x, %c3 : i8
    memref.store %s, %small[%c0, %i] : memref<3x4xi8>
    memref.store %m, %small[%c1, %i] : memref<3x4xi8>
    memref.store %r, %small[%c2, %i] : memref<3x4xi8>
    %v = memref.load %f[%i] : memref<4xf32>
    %w = arith.bitcast %v : f32 to i32
    %e = arith.shrui %w, %c23 : i32
    memref.store %w, %bits[%c0, %i] : memref<2x4xi32>
    memref.store %e, %bits[%c1, %i] : memref<2x4xi32>
    %u = arith.bitcast %w : i32 to f32
    memref.store %u, %back[%i] : memref<4xf32>
  }
  func.return
}
"""


def test_narrow_integers_wrap_and_bitcasts_keep_the_bits() -> None:
    a = np.array([100, -128, 127, -7], np.int8)
    b = np.array([100, -1, 1, 9], np.int8)
    f = np.array([1.0, -2.5, np.inf, 3e-39], np.float32)  # the last one subnormal
    small, bits, back = (
        np.zeros((3, 4), np.int8),
        np.zeros((2, 4), np.int32),
        np.zeros(4, np.float32),
    )
    run_kernel(NARROW, a, b, f, small, bits, back)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(small, [a + b, a * b, a >> 3])
    np.testing.assert_array_equal(bits, [f.view(np.int32), f.view(np.uint32) >> 23])
    np.testing.assert_array_equal(back.view(np.int32), f.view(np.int32))
