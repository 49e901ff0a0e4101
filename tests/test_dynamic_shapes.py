"""Automatic dynamic shapes (issue 26 §2): after one size changes between calls, `jit`
compiles a generic program (`?` batch dim) once, and every later size runs it with no
Numba compile; the first sizes keep their static programs; `dynamic=True/False`; what a
`?` cannot carry falls back to a static compile per size."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from numba.core import event

import tessc as ts
from tessc.runtime.llvm_kernels import LLVM_COMPILE_EVENT

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
from mlp_step import loss_fn, numpy_train_step  # noqa: E402  (bench/: the benchmarks' step)


class CompileCounter(event.Listener):
    """Every function Numba compiles (`numba:compile` events), as `tessc.timing` sees them."""

    def __init__(self) -> None:
        self.count = 0

    def on_start(self, ev: event.Event) -> None:
        self.count += 1

    def on_end(self, ev: event.Event) -> None:
        pass


def numba_compiles(fn, *args) -> int:
    counter = CompileCounter()
    with event.install_listener("numba:compile", counter):
        fn(*args)
    return counter.count


def train_step(params, x, y):
    loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
    return {k: params[k] - 0.1 * grads[k] for k in params}, loss


@pytest.fixture
def mlp():
    rng = np.random.default_rng(0)
    params = {
        "w1": (rng.standard_normal((16, 24)) * 0.3).astype(np.float32),
        "b1": (rng.standard_normal(24) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((24, 10)) * 0.3).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }
    x = rng.standard_normal((64, 16)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    return params, x, y


def check(result, params, x, y) -> None:
    updated, loss = result
    expected, expected_loss = numpy_train_step(params, x, y, 0.1)
    for k in expected:
        np.testing.assert_allclose(updated[k], expected[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)


def test_later_batch_sizes_compile_nothing(mlp) -> None:
    params, x, y = mlp
    step = ts.jit(train_step)
    check(step(params, x[:32], y[:32]), params, x[:32], y[:32])
    assert step.compile_count == 1 and step.generic is None
    # The second size: one more compile, the generic program (`?` batch dim).
    check(step(params, x[:17], y[:17]), params, x[:17], y[:17])
    assert step.compile_count == 2 and step.generic is not None
    assert "tensor<?x16xf32>" in str(step._traces[step.generic].module)
    for n in (5, 40, 1, 64, 17, 3):
        assert numba_compiles(step, params, x[:n], y[:n]) == 0, n
        check(step(params, x[:n], y[:n]), params, x[:n], y[:n])
    assert step.compile_count == 2 and step.dynamic_refused is None


def test_alternating_sizes_take_their_own_plans(mlp) -> None:
    """A generic program keeps a call plan per N (exact shapes): sizes that alternate
    (a training batch, an evaluation batch) each run through theirs, and right."""
    params, x, y = mlp
    step = ts.jit(train_step, dynamic=True)
    for n in (8, 9, 8, 9, 16, 8, 63, 9):
        check(step(params, x[:n], y[:n]), params, x[:n], y[:n])
        check(step(params, x[:n], y[:n]), params, x[:n], y[:n])
    assert step._fast is not None and step._fast.generic is not None
    assert set(step._fast.generic.plans) == {8, 9, 16, 63}
    assert step.compile_count == 1


def test_the_first_size_keeps_its_static_program(mlp) -> None:
    params, x, y = mlp
    step = ts.jit(train_step)
    step(params, x[:32], y[:32])
    static = step._compiled[next(iter(step._compiled))]
    step(params, x[:17], y[:17])
    step(params, x[:32], y[:32])
    assert step._fast is not None and step._fast.compiled is static
    step(params, x[:9], y[:9])
    assert step._fast.compiled is not static
    assert step.compile_count == 2


def test_dynamic_true_and_false(mlp) -> None:
    params, x, y = mlp
    eager = ts.jit(train_step, dynamic=True)
    check(eager(params, x[:8], y[:8]), params, x[:8], y[:8])
    assert eager.generic is not None and eager.compile_count == 1
    assert numba_compiles(eager, params, x[:13], y[:13]) == 0
    never = ts.jit(train_step, dynamic=False)
    for n in (8, 13):
        check(never(params, x[:n], y[:n]), params, x[:n], y[:n])
    assert never.generic is None and never.compile_count == 2


def test_mismatched_batches_are_not_the_generic_program(mlp) -> None:
    params, x, y = mlp
    step = ts.jit(train_step, dynamic=True)
    step(params, x[:8], y[:8])
    with pytest.raises(Exception, match="broadcast|shape"):
        step(params, x[:8], y[:9])


def test_arithmetic_on_the_batch_size_compiles_per_size() -> None:
    # `x.shape[0] * 2` is arithmetic on the dynamic size: no generic program.
    @ts.jit
    def scaled(x):
        return x.sum() / (x.shape[0] * 2)

    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    for n in (6, 4, 3):
        np.testing.assert_allclose(scaled(x[:n]), x[:n].sum() / (n * 2), rtol=1e-6)
    assert scaled.generic is None and scaled.dynamic_refused is not None
    assert scaled.compile_count == 3


def test_a_size_used_as_a_python_number_compiles_per_size() -> None:
    # `int(...)` reads the size as a number: the two checking traces differ.
    @ts.jit
    def tiled(x):
        return x * float(int(x.shape[0]))

    x = np.ones((6, 2), np.float32)
    for n in (6, 4, 3):
        np.testing.assert_allclose(tiled(x[:n]), x[:n] * n)
    assert scaled_refused(tiled)


def scaled_refused(fn) -> bool:
    return fn.generic is None and fn.dynamic_refused is not None


def test_batch_mean_reads_the_size_at_run_time() -> None:
    @ts.jit
    def centered(x):
        return x - x.sum(dim=0) / x.shape[0]

    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 3)).astype(np.float32)
    for n in (20, 7, 11, 2):
        np.testing.assert_allclose(centered(x[:n]), x[:n] - x[:n].mean(0), rtol=1e-5, atol=1e-6)
    assert centered.generic is not None and centered.compile_count == 2


def test_an_output_of_the_dynamic_size(mlp) -> None:
    params, x, _ = mlp

    @ts.jit
    def logits(params, x):
        h = (x @ params["w1"] + params["b1"]).relu()
        return h @ params["w2"] + params["b2"]

    def expected(n):
        h = np.maximum(x[:n] @ params["w1"] + params["b1"], 0)
        return h @ params["w2"] + params["b2"]

    for n in (16, 9, 30, 4):
        np.testing.assert_allclose(logits(params, x[:n]), expected(n), rtol=1e-5, atol=1e-6)
    assert logits.generic is not None and logits.compile_count == 2


def test_packed_products_over_a_dynamic_batch() -> None:
    """The digits-sized step (64-128-10): `tess-pack-matmul` tiles x @ w1 over `?` rows
    and x.T @ dh over a `?` depth (full tiles, the edge tile by N, remainder extents),
    `tess-pack-narrow` takes h.T @ dz over `?`, and the buffers of N live in one region;
    every batch size, whole tiles or not, matches NumPy."""
    from tessc.compiler import lower

    rng = np.random.default_rng(3)
    params = {
        "w1": (rng.standard_normal((64, 128)) * 0.2).astype(np.float32),
        "b1": (rng.standard_normal(128) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((128, 10)) * 0.1).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }
    x = rng.standard_normal((300, 64)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 300)]
    step = ts.jit(train_step, dynamic=True)
    for n in (32, 1, 7, 8, 9, 63, 64, 65, 129, 300):
        updated, loss = step(params, x[:n], y[:n])
        expected, expected_loss = numpy_train_step(params, x[:n], y[:n], 0.1)
        for k in expected:
            np.testing.assert_allclose(updated[k], expected[k], rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(loss, expected_loss, rtol=2e-4)
    assert step.compile_count == 1 and step.generic is not None
    source = lower(step._traces[step.generic].module, "numba")
    # Both products packed: the micro-kernel defined and called (in LLVM kernels).
    assert source.count('@"tessc.mma.') >= 4
    assert "%depth_blocks." in source and "%row_blocks." in source  # counted from N
    assert source.count("np.empty(") == 1  # the region of N's buffers
    assert "prange(" not in source  # a `?` loop counts as a small batch: serial


class CompiledKinds(event.Listener):
    """What Numba compiles (or loads) at the top level: kernels called by name, and other
    functions (not the library functions Numba compiles inside them)."""

    def __init__(self) -> None:
        self.external = self.other = self.depth = 0

    def on_start(self, ev: event.Event) -> None:
        from tessc.runtime.external import ExternalKernel

        if self.depth == 0 and isinstance(ev.data["dispatcher"], ExternalKernel):
            self.external += 1
        elif self.depth == 0:
            self.other += 1
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        self.depth -= 1


class LlvmCompiles(event.Listener):
    """Modules of LLVM kernels compiled (or loaded): a program's kernels, all at once."""

    def __init__(self) -> None:
        self.modules = 0

    def on_start(self, ev: event.Event) -> None:
        self.modules += 1

    def on_end(self, ev: event.Event) -> None:
        pass


def test_the_generic_program_calls_its_kernels_by_name(mlp) -> None:
    """The second size's compile is the generic program's kernels, each a C callable of
    its own taking N as an integer (compiled concurrently), and one small host: not one
    Numba function holding every kernel (~6 s of CPU cold for the MLP step)."""
    from tessc.compiler import lower

    params, x, y = mlp

    def half_step(params, x, y):  # a program no other test loads into this process
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        return {k: params[k] - 0.05 * grads[k] for k in params}, loss

    step = ts.jit(half_step)
    step(params, x[:32], y[:32])
    kinds = CompiledKinds()
    llvm = LlvmCompiles()
    with (
        event.install_listener("numba:compile", kinds),
        event.install_listener(LLVM_COMPILE_EVENT, llvm),
    ):
        updated, loss = step(params, x[:17], y[:17])
    expected, expected_loss = numpy_train_step(params, x[:17], y[:17], 0.05)
    for k in expected:
        np.testing.assert_allclose(updated[k], expected[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    assert step.generic is not None
    # The host: compiled, or loaded from a warm cache (no event); its kernels, written as
    # LLVM IR, fire one event either way.
    assert kinds.other <= 1 and kinds.external == 0 and llvm.modules == 1, vars(kinds)
    source = lower(step._traces[step.generic].module, "numba")
    assert "intp" in source and "i64 %x.n0" in source  # sizes after the pointers


DYNAMIC_SMALL = """
func.func @f(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?xf32>) {
  %0 = tess.add %x, %b : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
  %1 = tess.relu %0 : tensor<?x8xf32>
  %2 = tess.exp %1 : tensor<?x8xf32>
  %3 = tess.sum %2 dims = [1] : tensor<?x8xf32> -> tensor<?xf32>
  func.return %1, %3 : tensor<?x8xf32>, tensor<?xf32>
}
"""


@pytest.mark.parametrize("llvm_kernels", [True, False], ids=["llvm", "numba"])
def test_kernels_called_by_name_over_a_dynamic_dim(
    tmp_path, monkeypatch: pytest.MonkeyPatch, llvm_kernels: bool
) -> None:
    """Every kernel of a `?`-batch program called by name (thresholds at 0), its buffers
    allocated by the host (sizes read from arrays), against NumPy at N = 0, 1, 5, 16, 33;
    written as LLVM IR, and as Numba's."""
    from tessc.lowering.codegen import numba_external
    from tessc.lowering.codegen.to_numba import emit_numba
    from tessc.pipelines import run_passes
    from tessc.reference import parse_module
    from tessc.runtime.cache import load_source
    from tessc.runtime.executor import Executable

    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 0)
    module = parse_module(DYNAMIC_SMALL)
    run_passes(
        module,
        "tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse",
    )
    source = emit_numba(module, llvm_kernels=llvm_kernels)
    kernels = source.count("llvm_kernel(__name__" if llvm_kernels else "@external(")
    assert kernels >= 4 and source.count(", intp") >= kernels, source
    program = Executable(load_source(source, tmp_path), "f")
    rng = np.random.default_rng(5)
    b = rng.standard_normal(8).astype(np.float32)
    for n in (0, 1, 5, 16, 33):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        relu, sums = program(x, b)
        want = np.maximum(x + b, 0)
        np.testing.assert_allclose(relu, want, rtol=1e-6)
        np.testing.assert_allclose(sums, np.exp(want).sum(1), rtol=1e-5)
        assert relu.shape == (n, 8) and sums.shape == (n,)
