"""The CUDA emitter and runtime on hand-written gpu-level IR, in Numba's CUDA simulator:
tests/filecheck/codegen/to-cuda.mlir (elementwise grid-stride kernel; shared-memory tree
reduction with barriers and an atomic add) run against NumPy; device arrays in and out,
buffers allocated once per program, donation in place, constants uploaded once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.codegen.to_cuda import emit_cuda
from tessc.runtime import executable, load_source
from tessc.runtime.cuda import CudaExecutable, Resident, is_device_array

TO_CUDA = Path(__file__).parent.parent / "filecheck" / "codegen" / "to-cuda.mlir"

DONATED = (Path(__file__).parent / "inputs" / "donated.mlir").read_text()


def compiled(text: str, entry: str) -> CudaExecutable:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    program = executable(load_source(emit_cuda(module)), entry)
    assert isinstance(program, CudaExecutable)
    return program


@pytest.fixture(scope="module")
def to_cuda_text() -> str:
    return TO_CUDA.read_text()


def test_elementwise_host_arrays_in_host_arrays_out(to_cuda_text: str) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (2, 33)).astype(np.float32)
    (out,) = compiled(to_cuda_text, "scale")(x, y)
    assert type(out) is np.ndarray and out.dtype == np.float32
    np.testing.assert_allclose(out, np.exp(x * y), rtol=1e-6)


def test_elementwise_device_arrays_in_device_arrays_out(to_cuda_text: str) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, (2, 33)).astype(np.float32)
    (out,) = compiled(to_cuda_text, "scale")(cuda.to_device(x), y)
    assert is_device_array(out)
    np.testing.assert_allclose(out.copy_to_host(), np.exp(x * y), rtol=1e-6)


def test_shared_memory_reduction_with_atomics(to_cuda_text: str) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-1, 1, (2, 5, 33)).astype(np.float32)
    program = compiled(to_cuda_text, "dot")
    for _ in range(2):  # the second call reuses the intermediate (atomics accumulate in it)
        (out,) = program(x, y)
        assert out.shape == ()
        np.testing.assert_allclose(out, (x.astype(np.float64) * y).sum(), rtol=1e-5)


def test_intermediates_are_allocated_once_per_program(
    to_cuda_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = compiled(to_cuda_text, "dot")
    x = np.ones((5, 33), np.float32)
    program(x, x)
    allocations: list[tuple] = []
    device_array = cuda.device_array

    def counting(shape, *args, **kwargs):
        allocations.append(shape)
        return device_array(shape, *args, **kwargs)

    monkeypatch.setattr(cuda, "device_array", counting)
    for _ in range(3):
        (out,) = program(x, x)
        assert out == 165.0
    # The intermediate is the program's; the output comes from its pool, and the caller
    # keeps only its host copy, so each call reuses the first call's.
    assert allocations == []


def test_donated_device_array_is_updated_in_place() -> None:
    program = compiled(DONATED, "step")
    rng = np.random.default_rng(3)
    w, g = rng.standard_normal((2, 37))
    w_device = cuda.to_device(w)
    (out,) = program(w_device, cuda.to_device(g))
    assert out is w_device
    np.testing.assert_allclose(w_device.copy_to_host(), w - 0.5 * g)
    (host_out,) = program(w, g)  # host arrays: a NumPy result, the caller's w untouched
    assert type(host_out) is np.ndarray
    np.testing.assert_allclose(host_out, w - 0.5 * g)


def test_donated_array_passed_twice_is_copied_first() -> None:
    program = compiled(DONATED, "step")
    w = np.arange(37.0)
    w_device = cuda.to_device(w)
    (out,) = program(w_device, w_device)
    assert out is not w_device
    np.testing.assert_allclose(out.copy_to_host(), w - 0.5 * w)
    np.testing.assert_allclose(w_device.copy_to_host(), w)


def test_resident_constants_are_uploaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    program = compiled(DONATED, "step")
    (g,) = program.resident([np.full(37, 2.0)])
    assert isinstance(g, Resident)
    uploads: list[int] = []
    array_type = type(g.array)
    copy_to_device = array_type.copy_to_device
    monkeypatch.setattr(
        array_type,
        "copy_to_device",
        lambda self, a, *r, **k: uploads.append(1) or copy_to_device(self, a, *r, **k),
    )
    (out,) = program(np.zeros(37), g)
    assert type(out) is np.ndarray  # a resident constant is not the caller's device array
    np.testing.assert_allclose(out, -1.0)
    assert len(uploads) == 1  # w only (into a pooled device array)


class ForeignArray:
    """A stand-in for a CuPy/PyTorch array: only `__cuda_array_interface__`."""

    def __init__(self, array: np.ndarray):
        self.array = array

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.array.shape, "typestr": self.array.dtype.str, "version": 3}


def test_cuda_array_interface_objects_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    # The simulator has no `cuda.as_cuda_array`: the test provides one that records its use.
    wrapped: list[ForeignArray] = []

    def as_cuda_array(obj: ForeignArray):
        wrapped.append(obj)
        return cuda.to_device(obj.array)

    monkeypatch.setattr(cuda, "as_cuda_array", as_cuda_array, raising=False)
    program = compiled(DONATED, "step")
    w, g = np.ones(37), np.full(37, 4.0)
    (out,) = program(ForeignArray(w), g)
    assert len(wrapped) == 1 and is_device_array(out)
    np.testing.assert_allclose(out.copy_to_host(), -1.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.ones(36), np.ones(37)), r"input 0 \('w'\) has shape \(36\), expected \(37\)"),
        ((np.ones(37), np.ones(37, np.float32)), r"input 1 \('g'\) has dtype float32"),
        ((np.ones(37),), "takes 2 inputs, got 1"),
    ],
)
def test_bad_inputs_are_named(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compiled(DONATED, "step")(*args)


def test_bitcast_runs_in_the_simulator() -> None:
    program = compiled((Path(__file__).parent / "inputs" / "bitcast.mlir").read_text(), "pow2")
    exponents = np.arange(-3, 5, dtype=np.int32)
    (out,) = program(exponents)
    np.testing.assert_array_equal(out, np.exp2(exponents.astype(np.float32)))
