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
  outputs, uploads and packed arenas come from the program's `DevicePool`
  (`tessc.runtime.cuda_memory`), each reused once the caller no longer holds it;
- inputs: a NumPy array (or anything `np.asarray` takes) is copied to the device; a Numba
  device array is used as it is; any other object with `__cuda_array_interface__` (CuPy,
  PyTorch CUDA tensors) is wrapped by `cuda.as_cuda_array`, without a copy; a strided
  device array is copied once, into a contiguous pooled one;
- outputs: when every argument the caller passed was a host array, the outputs are copied
  back and returned as NumPy arrays; when any was a device array, they are returned as
  device arrays, with no host round trip. Host<->device copies happen only there, at the
  program's boundary;
- `"output_aliases"` (a donated input): output j is computed in input k's device array,
  which is returned. A donated device array is updated in place; one that shares memory
  with another input is copied first, so donation never changes a result;
- `"arenas"` (`tess-fuse-horizontal`): the caller's arrays are packed into device arenas
  (on the host first when they are host arrays: one upload per arena) and the outputs are
  views of the output arenas. The views of every output arena are remembered (weakly):
  when a later call gets exactly those objects back as an input arena's members
  (`params = step(params, grads)`), that arena is passed as it is, not repacked; a
  donated one is updated in place and the same view objects are returned;
- `"member_tables"` (`codegen.cuda_members`): a tabled arena whose members include device
  arrays is not packed: one int64 table of their device addresses is uploaded and the
  host's member form called, which reads each where it lies; packed as above when a
  member overlaps a donated arena (the call writes it).

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
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessc.runtime.abi import KERNEL_BITS_DTYPES
from tessc.runtime.cache import CompileStats, numba_compile_stats
from tessc.runtime.cuda_memory import DevicePool
from tessc.runtime.executor import as_bits
from tessc.runtime.numba_cuda_compat import (
    linear_singly_assigned_variables,
    restore_numpy_row_stack,
    wake_simulator_on_barriers,
)
from tessc.runtime.signatures import ArenaSlot, ArraySpec, format_shape, read_signature


def _cuda() -> Any:
    restore_numpy_row_stack()
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        wake_simulator_on_barriers()
    else:
        linear_singly_assigned_variables()
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


def kernel_view(array: Any) -> Any:
    """A device array as a kernel takes it: a 16-bit float array as its bits (a view)."""
    return array.view(np.uint16) if array.dtype.name in KERNEL_BITS_DTYPES else array


def caller_view(array: Any, dtype: np.dtype) -> Any:
    """A device array of `storage_dtype(dtype)` as the caller's `dtype` (a view), so that
    an output passed back to a program has the dtype its signature was traced with."""
    return array.view(dtype) if array.dtype != dtype else array


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
        # Output arena -> (weak references to the views of it the last call returned, each
        # with its offset in the arena; a weak reference to the arena).
        self._returned: dict[int, tuple[tuple[tuple[weakref.ref[Any], int], ...], Any]] = {}
        # The host's form reading these arenas' members where they lie, through tables of
        # device addresses (`"member_tables"`, `codegen.cuda_members`).
        self.member_function: Any = None
        self._tabled: tuple[int, ...] = ()
        if signature.member_tables is not None:
            name, self._tabled = signature.member_tables
            self.member_function = getattr(module, name)
        self.packing_copies = 0
        """Device arenas packed by copy so far (a counter for tests)."""

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

    @property
    def pool(self) -> DevicePool:
        """This thread's pool of output, upload and arena device arrays
        (`tessc.runtime.cuda_memory`): allocated on the first calls, reused after."""
        state = self._per_thread.__dict__
        if "pool" not in state:
            state["pool"] = DevicePool()
        return state["pool"]

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
            # A strided view: one device copy.
            return self.pool.contiguous(kernel_view(array)), True
        host = np.asarray(arg)
        self._check(spec, where, host.shape, host.dtype)
        return self.pool.upload(as_bits(_c_contiguous(host))), False

    def _where(self, k: int) -> str:
        return f"'{self.entry}' input {k} ('{self.inputs[k].name}')"

    def _pack(
        self, args: Sequence[object], tables: list[Any] | None = None
    ) -> tuple[list[Any], bool, set[int]]:
        """Host inputs (device arrays), whether the caller passed device arrays, and the
        arenas passed without a copy (the caller gave back the views of one that an
        earlier call returned). `tables`, when given and the host has a member form,
        receives the device arrays its tables point into when that form is to be called:
        the tabled arenas of device arrays are then their tables (`_member_table`)."""
        device = False
        zero_copy: set[int] = set()
        host: list[Any] = [None] * len(self.host_inputs)
        deferred: list[int] = []
        for k, slot in enumerate(self.input_slots):
            if slot.offset is None:
                host[slot.host], on_device = self.to_device(slot.spec, self._where(k), args[k])
                device |= on_device
        for h, ks in self._members.items():
            spec = self.host_inputs[h]
            size = spec.shape[0] or 0
            returned = self._returned_arena(args, ks)
            if returned is not None and tuple(returned.shape) == (size,):
                host[h], device = returned, True
                zero_copy.add(h)
                continue
            if tables is not None and h in self._tabled and self.member_function is not None:
                if any(is_device_array(args[k]) for k in ks):
                    deferred.append(h)  # after the arenas the call writes
                    continue
            if not any(is_device_array(args[k]) for k in ks):
                packed = np.empty(size, dtype=spec.dtype)
                for k in ks:
                    slot, array = self.input_slots[k], np.asarray(args[k])
                    self._check(slot.spec, self._where(k), array.shape, array.dtype)
                    packed[slot.offset : slot.offset + slot.size] = array.reshape(-1)
                host[h] = self.pool.upload(as_bits(packed))
                continue
            host[h], on_device = self._device_arena(h, args)
            device |= on_device
        if deferred:
            assert tables is not None
            written = [host[a] for a in {a for a in self.output_aliases if a is not None}]
            found = [self._member_table(h, args, written) for h in deferred]
            if all(table is not None for table in found):
                for h, (table, arrays) in zip(deferred, found, strict=True):  # type: ignore[misc]
                    host[h] = table
                    tables += arrays
                for h in set(self._tabled) - set(deferred):  # one arena already: its base
                    count = len(self._members[h])
                    base = _device_span(host[h])[0]
                    host[h] = self.pool.upload(np.full(count, base, np.int64))
                device = True
            else:  # a member overlaps an array the call writes: packed, read as it was
                for h in deferred:
                    host[h], on_device = self._device_arena(h, args)
                    device |= on_device
        return host, device, zero_copy

    def _device_arena(self, h: int, args: Sequence[object]) -> tuple[Any, bool]:
        """Host input `h`'s members copied into a pooled device arena, and whether any of
        them was a device array."""
        spec = self.host_inputs[h]
        arena = self.pool.take((spec.shape[0] or 0,), storage_dtype(spec.dtype))
        device = False
        self.packing_copies += 1
        for k in self._members[h]:
            slot = self.input_slots[k]
            array, on_device = self.to_device(slot.spec, self._where(k), args[k])
            device |= on_device
            if slot.size:  # (the simulator refuses to copy an empty array: strides (0,))
                arena[slot.offset : slot.offset + slot.size].copy_to_device(
                    array.reshape(slot.size)
                )
        return arena, device

    def _member_table(
        self, h: int, args: Sequence[object], written: Sequence[Any]
    ) -> tuple[Any, list[Any]] | None:
        """Host input `h`'s member table on the device (entry m: member m's device address
        less its byte offset in the arena) and the device arrays it points into; None if a
        member overlaps an array in `written` (a donated arena the call updates)."""
        itemsize = storage_dtype(self.host_inputs[h].dtype).itemsize
        table = np.empty(len(self._members[h]), np.int64)
        arrays: list[Any] = []
        for m, k in enumerate(self._members[h]):
            slot = self.input_slots[k]
            array, _ = self.to_device(slot.spec, self._where(k), args[k])
            if slot.size and any(_overlap(array, other) for other in written if other is not None):
                return None
            arrays.append(array)
            table[m] = _device_span(array)[0] - slot.offset * itemsize
        return self.pool.upload(table), arrays

    def _returned_arena(self, args: Sequence[object], ks: Sequence[int]) -> Any:
        """The output arena of an earlier call whose views, as it returned them, the caller
        passes as `args[ks]`, each at its slot's offset: passed as it is, no repacking."""
        for views, arena_ref in self._returned.values():
            offsets = {id(view): offset for ref, offset in views if (view := ref()) is not None}
            if len(offsets) == len(ks) and all(
                offsets.get(id(args[k]), -1) == self.input_slots[k].offset for k in ks
            ):
                return arena_ref()
        return None

    # -- the call -----------------------------------------------------------------------

    def __call__(self, *args: object) -> tuple[Any, ...]:
        if len(args) != len(self.inputs):
            raise ValueError(f"'{self.entry}' takes {len(self.inputs)} inputs, got {len(args)}")
        zero_copy: set[int] = set()
        tables: list[Any] = []  # the arrays the member form's tables point into
        if self.input_slots:
            inputs, device, zero_copy = self._pack(args, tables)
        else:
            inputs, device = [], False
            for k, (spec, arg) in enumerate(zip(self.inputs, args, strict=True)):
                array, on_device = self.to_device(spec, self._where(k), arg)
                inputs.append(array)
                device |= on_device
        outputs: list[Any] = []
        for spec, alias in zip(self.host_outputs, self.output_aliases, strict=True):
            if alias is None:
                outputs.append(self.pool.take(spec.shape, storage_dtype(spec.dtype)))
                continue
            array = inputs[alias]
            if any(_overlap(array, other) for j, other in enumerate(inputs) if j != alias):
                copy = self.pool.take(spec.shape, storage_dtype(spec.dtype))
                copy.copy_to_device(array)
                inputs[alias] = array = copy
                zero_copy.discard(alias)
            outputs.append(array)
        buffers, workspace = self._state()
        extra = [workspace] if self.workspace_bytes is not None else []
        function = self.member_function if tables else self.function
        function(*inputs, *outputs, *extra, buffers)
        if self.output_slots:
            results = self._unpack(args, outputs, device, zero_copy)
        else:
            results = [
                caller_view(r, spec.dtype) for r, spec in zip(outputs, self.outputs, strict=True)
            ]
        if device:  # a 16-bit float output: its bits (`storage_dtype`) viewed as the dtype
            return tuple(results)
        return tuple(r.copy_to_host() for r in results)

    def _unpack(
        self, args: Sequence[object], outputs: list[Any], device: bool, zero_copy: set[int]
    ) -> list[Any]:
        """The caller's outputs: views of the output arenas. The views of each output arena
        are remembered (weakly): given back on a later call (a training loop's `params =
        step(params, ...)`), they pass that arena without repacking, and a donated one comes
        back as the same objects, updated in place."""
        results: list[Any] = []
        fresh: dict[int, list[tuple[weakref.ref[Any], int]]] = {}
        for slot, k in zip(self.output_slots, self._sources, strict=True):
            arena = outputs[slot.host]
            if slot.offset is None:
                results.append(caller_view(arena, slot.spec.dtype))
                continue
            alias = self.output_aliases[slot.host]
            if k is not None and alias in zero_copy:
                results.append(args[k])  # the caller's view of the donated arena
                continue
            view = arena[slot.offset : slot.offset + slot.size].reshape(slot.spec.shape)
            view = caller_view(view, slot.spec.dtype)
            if device:
                fresh.setdefault(slot.host, []).append((weakref.ref(view), slot.offset))
            results.append(view)
        for h, views in fresh.items():
            self._returned[h] = (tuple(views), weakref.ref(outputs[h]))
        return results

    def compile_stats(self) -> CompileStats:
        """Numba compilations and disk-cache hits of the module so far (in this process)."""
        return numba_compile_stats(self.module)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return f"<CudaExecutable {self.entry}({ins}) -> ({outs})>"


__all__ = ["CudaExecutable", "Resident", "is_device_array", "require_cuda"]
