"""
`CudaExecutable`: a compiled tessc program for the CUDA target, callable on NumPy arrays and
on device arrays.

A module that `tessc.lowering.codegen.to_cuda` generated says `TESSC_TARGET = "cuda"` and carries
the same `TESSC_SIGNATURES` as a CPU module (format: `tessc.runtime.signatures`). Its host
functions are plain Python on device arrays: they take the inputs, one device array per
output, the device workspace (when `"workspace_bytes"` is set) and last `buffers`, a dict
in which the host keeps its intermediate device buffers. So:

- intermediates live on the device and are allocated once per program (per
  `CudaExecutable` and thread: the workspace arena and the `buffers` dict), not per call;
- inputs: a NumPy array (or anything `np.asarray` takes) is copied to the device; a Numba
  device array is used as it is; any other object with `__cuda_array_interface__` (CuPy,
  PyTorch CUDA tensors) is wrapped by `cuda.as_cuda_array`, without a copy;
- outputs: when every argument the caller passed was a host array, the outputs are copied
  back and returned as NumPy arrays; when any was a device array, they are returned as
  device arrays, with no host round trip. Host<->device copies happen only there, at the
  program's boundary;
- `"output_aliases"` (a donated input): output j is computed in input k's device array,
  which is returned. A donated device array is updated in place; one that shares memory
  with another input is copied first, so donation never changes a result;
- `"arenas"` (`tess-fuse-horizontal`): the caller's arrays are packed into device arenas
  (on the host first when they are host arrays: one upload per arena) and the outputs are
  views of the output arenas. The views of a donated arena are remembered: when the next
  call gets exactly those objects back (`params = step(params, grads)`), the arena is
  passed as it is, updated in place, and the same view objects are returned.

`resident(arrays)` uploads arrays once (a jitted function's captured constants) and returns
them wrapped as `Resident`: passed on every call, they are neither copied again nor count
as the caller's device arrays when choosing where outputs go.

The runtime never reads IR, and it imports `numba.cuda` only here, so the CPU target works
without the `cuda` extra. Under Numba's CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`) device
arrays are the simulator's; `cuda.as_cuda_array` does not exist there.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessc.runtime.abi import KERNEL_BITS_DTYPES
from tessc.runtime.cache import CompileStats, numba_compile_stats
from tessc.runtime.executor import as_bits
from tessc.runtime.signatures import ArenaSlot, ArraySpec, format_shape, read_signature


def _cuda() -> Any:
    from numba import cuda

    return cuda


def require_cuda() -> None:
    """Raise a clear error unless Numba's CUDA target can run here: numba-cuda installed,
    and a GPU present or the simulator on (`NUMBA_ENABLE_CUDASIM=1`)."""
    try:
        cuda = _cuda()
    except ImportError:
        raise ImportError(
            "the cuda target needs Numba's CUDA target: pip install -e '.[cuda]' (numba-cuda)"
        ) from None
    from numba import config

    if not getattr(config, "ENABLE_CUDASIM", 0) and not cuda.is_available():
        raise RuntimeError(
            "the cuda target found no CUDA GPU (numba.cuda.is_available() is False); "
            "NUMBA_ENABLE_CUDASIM=1, set before Numba is imported, runs it in Numba's "
            "CUDA simulator (slowly)"
        )


def is_device_array(value: object) -> bool:
    """Whether `value` is an array on a CUDA device: a Numba device array (the simulator's
    too) or an object exporting `__cuda_array_interface__` (PyTorch's and JAX's classes
    define it for every array: their DLPack device, or the interface itself, tells a CPU
    one apart)."""
    kind = type(value)
    if getattr(kind, "__cuda_ndarray__", False):
        return True
    if not hasattr(kind, "__cuda_array_interface__"):
        return False
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is not None:
        try:
            return int(dlpack_device()[0]) not in (1, 3)  # kDLCPU, kDLCUDAHost
        except Exception:  # noqa: BLE001 - an exporter's own error: ask the interface
            pass
    try:
        return value.__cuda_array_interface__ is not None  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - e.g. "only defined for GPU buffers"
        return False


def _c_contiguous(array: np.ndarray) -> np.ndarray:
    """`array` in row-major layout, rank kept (`np.ascontiguousarray` makes 0-d arrays 1-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


def _device_span(array: Any) -> tuple[int, int]:
    """The device address range [start, end) of a contiguous device array."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is None:  # the simulator's arrays wrap NumPy arrays
        interface = array.__array_interface__
    start = int(interface["data"][0])
    return start, start + int(array.nbytes)


def _overlap(a: Any, b: Any) -> bool:
    (a0, a1), (b0, b1) = _device_span(a), _device_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a device array of `dtype` is held in: a 16-bit float as its bits (Numba's
    CUDA target has neither bfloat16 nor float16 arrays to pass to a kernel)."""
    return np.dtype(np.uint16) if dtype.name in KERNEL_BITS_DTYPES else dtype


class Resident:
    """A device array uploaded once, passed on every call (a captured constant)."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array


class CudaExecutable:
    """The host function `entry` of a loaded CUDA module, called on host or device arrays.

    `CudaExecutable(module, "f")(x, w)` returns `f`'s outputs as a tuple: NumPy arrays for
    NumPy inputs, device arrays when any input is a device array.
    """

    def __init__(self, module: types.ModuleType, entry: str):
        signature = read_signature(module, entry)
        signature.check_static_outputs()
        self.module = module
        self.entry = entry
        self.function = getattr(module, signature.function)
        self.host_inputs = signature.inputs
        self.host_outputs = signature.outputs
        self.inputs, self.outputs = signature.caller_inputs, signature.caller_outputs
        self.input_slots: tuple[ArenaSlot, ...] = signature.arena_inputs
        self.output_slots: tuple[ArenaSlot, ...] = signature.arena_outputs
        self.workspace_bytes = signature.workspace_bytes
        self.output_aliases = signature.output_aliases
        self._per_thread = threading.local()
        # The caller's inputs packed into each input arena, by arena (host input index).
        self._members = signature.arena_members()
        # For each output slot, the caller input at the same place of its donated arena.
        self._sources = [signature.input_in_place(slot) for slot in self.output_slots]
        # Donated arena -> (the views of it the last call returned, the arena).
        self._device_views: dict[int, tuple[tuple[Any, ...], Any]] = {}

    # -- program state ------------------------------------------------------------------

    def _state(self) -> tuple[dict[str, Any], Any]:
        """This thread's `buffers` dict and device workspace, made on first use."""
        state = self._per_thread.__dict__
        if "buffers" not in state:
            state["buffers"] = {}
            size = self.workspace_bytes
            state["workspace"] = (
                _cuda().device_array(size, dtype=np.uint8) if size is not None else None
            )
        return state["buffers"], state["workspace"]

    def resident(self, arrays: Sequence[np.ndarray]) -> tuple[Resident, ...]:
        """`arrays` uploaded once, to pass on every call without a copy."""
        cuda = _cuda()
        return tuple(Resident(cuda.to_device(_c_contiguous(np.asarray(a)))) for a in arrays)

    # -- inputs -------------------------------------------------------------------------

    def _check(self, spec: ArraySpec, where: str, shape: tuple[int, ...], dtype: Any) -> None:
        device_bits = spec.dtype.name in KERNEL_BITS_DTYPES and np.dtype(dtype) == np.uint16
        if np.dtype(dtype) != spec.dtype and not device_bits:
            raise ValueError(
                f"{where} has dtype {np.dtype(dtype).name}, expected {spec.dtype.name}"
            )
        if len(shape) != len(spec.shape) or any(
            want is not None and want != got for want, got in zip(spec.shape, shape, strict=True)
        ):
            raise ValueError(
                f"{where} has shape {format_shape(shape)}, expected {spec.shape_text()}"
            )

    def to_device(self, spec: ArraySpec, where: str, arg: object) -> tuple[Any, bool]:
        """(the device array for `arg`, whether the caller passed a device array)."""
        if isinstance(arg, Resident):
            return arg.array, False
        cuda = _cuda()
        if is_device_array(arg):
            array = (
                arg if getattr(type(arg), "__cuda_ndarray__", False) else cuda.as_cuda_array(arg)
            )
            self._check(spec, where, tuple(array.shape), array.dtype)
            if not array.is_c_contiguous():
                raise ValueError(f"{where} is a non-contiguous device array")
            return array, True
        host = np.asarray(arg)
        self._check(spec, where, host.shape, host.dtype)
        return cuda.to_device(as_bits(_c_contiguous(host))), False

    def _where(self, k: int) -> str:
        return f"'{self.entry}' input {k} ('{self.inputs[k].name}')"

    def _pack(self, args: Sequence[object]) -> tuple[list[Any], bool, set[int]]:
        """Host inputs (device arrays), whether the caller passed device arrays, and the
        arenas passed without a copy (the caller gave back the views of one that an
        earlier call returned)."""
        cuda = _cuda()
        device = False
        zero_copy: set[int] = set()
        host: list[Any] = [None] * len(self.host_inputs)
        for k, slot in enumerate(self.input_slots):
            if slot.offset is None:
                host[slot.host], on_device = self.to_device(slot.spec, self._where(k), args[k])
                device |= on_device
        for h, ks in self._members.items():
            spec = self.host_inputs[h]
            size = spec.shape[0] or 0
            cached = self._device_views.get(h)
            if cached is not None and all(args[k] is v for k, v in zip(ks, cached[0], strict=True)):
                host[h], device = cached[1], True
                zero_copy.add(h)
                continue
            if not any(is_device_array(args[k]) for k in ks):
                packed = np.empty(size, dtype=spec.dtype)
                for k in ks:
                    slot, array = self.input_slots[k], np.asarray(args[k])
                    self._check(slot.spec, self._where(k), array.shape, array.dtype)
                    packed[slot.offset : slot.offset + slot.size] = array.reshape(-1)
                host[h] = cuda.to_device(as_bits(packed))
                continue
            arena = cuda.device_array(size, dtype=storage_dtype(spec.dtype))
            for k in ks:
                slot = self.input_slots[k]
                array, on_device = self.to_device(slot.spec, self._where(k), args[k])
                device |= on_device
                arena[slot.offset : slot.offset + slot.size].copy_to_device(
                    array.reshape(slot.size)
                )
            host[h] = arena
        return host, device, zero_copy

    # -- the call -----------------------------------------------------------------------

    def __call__(self, *args: object) -> tuple[Any, ...]:
        if len(args) != len(self.inputs):
            raise ValueError(f"'{self.entry}' takes {len(self.inputs)} inputs, got {len(args)}")
        cuda = _cuda()
        zero_copy: set[int] = set()
        if self.input_slots:
            inputs, device, zero_copy = self._pack(args)
        else:
            inputs, device = [], False
            for k, (spec, arg) in enumerate(zip(self.inputs, args, strict=True)):
                array, on_device = self.to_device(spec, self._where(k), arg)
                inputs.append(array)
                device |= on_device
        outputs: list[Any] = []
        for spec, alias in zip(self.host_outputs, self.output_aliases, strict=True):
            if alias is None:
                outputs.append(cuda.device_array(spec.shape, dtype=storage_dtype(spec.dtype)))
                continue
            array = inputs[alias]
            if any(_overlap(array, other) for j, other in enumerate(inputs) if j != alias):
                copy = cuda.device_array(spec.shape, dtype=storage_dtype(spec.dtype))
                copy.copy_to_device(array)
                inputs[alias] = array = copy
                zero_copy.discard(alias)
            outputs.append(array)
        buffers, workspace = self._state()
        extra = [workspace] if self.workspace_bytes is not None else []
        self.function(*inputs, *outputs, *extra, buffers)
        if self.output_slots:
            results = self._unpack(outputs, inputs, device, zero_copy)
        else:
            results = outputs
        if device:  # a 16-bit float output stays its bits (`storage_dtype`) on the device
            return tuple(results)
        return tuple(
            r.copy_to_host().view(spec.dtype) for r, spec in zip(results, self.outputs, strict=True)
        )

    def _unpack(
        self, outputs: list[Any], inputs: list[Any], device: bool, zero_copy: set[int]
    ) -> list[Any]:
        """The caller's outputs: views of the output arenas. Where an output arena is a
        donated input arena, its views are remembered: given back on the next call (a
        training loop's `params = step(params, ...)`), they pass that arena without a copy
        and come back as the same objects, updated in place."""
        results: list[Any] = []
        fresh: dict[int, dict[int, Any]] = {}
        for slot, k in zip(self.output_slots, self._sources, strict=True):
            arena = outputs[slot.host]
            if slot.offset is None:
                results.append(arena)
                continue
            alias = self.output_aliases[slot.host]
            if k is not None and alias in zero_copy:
                results.append(self._device_views[alias][0][self._members[alias].index(k)])
                continue
            view = arena[slot.offset : slot.offset + slot.size].reshape(slot.spec.shape)
            if k is not None and device:
                fresh.setdefault(alias, {})[k] = view  # type: ignore[arg-type]
            results.append(view)
        for h, views in fresh.items():
            if sorted(views) == self._members[h]:
                self._device_views[h] = (tuple(views[k] for k in self._members[h]), inputs[h])
        return results

    def compile_stats(self) -> CompileStats:
        """Numba compilations and disk-cache hits of the module so far (in this process)."""
        return numba_compile_stats(self.module)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return f"<CudaExecutable {self.entry}({ins}) -> ({outs})>"


__all__ = ["CudaExecutable", "Resident", "is_device_array", "require_cuda"]
