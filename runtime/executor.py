"""
`Executable`: a compiled tessc program, callable on NumPy arrays.

A module made by `tessc.runtime.cache.load_source` carries `TESSC_SIGNATURES`, the shapes
and dtypes of each host function's inputs and outputs (written by codegen, so the runtime
never reads IR). The host function takes its inputs followed by one preallocated buffer per
output (destination-passing style) and returns nothing; `Executable` checks the inputs
against the signature, makes them C-contiguous (the compiled code assumes row-major
layout, and one memory layout means one Numba specialisation), allocates fresh outputs,
calls the host, and returns the outputs as a tuple.

Two optional signature entries come from `tess-memory-plan`:

- `"workspace_bytes": N`: the host takes one more, last argument, a byte arena holding all
  its intermediates. It is allocated once per `Executable` and thread (64-byte aligned)
  and reused by every call, so a call allocates nothing but its outputs.
- `"output_aliases": [k or None, ...]`: output j is computed in place in input k's array
  (a donated input, e.g. a parameter an optimizer step overwrites), which is then
  returned as that output. When input k's array is read-only or shares memory with
  another input, it is copied first, so donation never changes a result.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tessc.runtime.cache import CompileStats, numba_compile_stats


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one argument; `None` in a shape is a dynamic dimension."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    def shape_text(self) -> str:
        return _format_shape(self.shape)

    def describe(self) -> str:
        return f"{self.shape_text()} {self.dtype.name}"


def _format_shape(shape: Sequence[int | None]) -> str:
    """`(3,4)` — the notation of tessc's shape diagnostics; `?` for a dynamic dim."""
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def _specs(entry: dict, kind: str) -> tuple[ArraySpec, ...]:
    """The `ArraySpec`s of `entry[kind]` (`kind` is "inputs" or "outputs")."""
    singular = kind[:-1]
    specs = entry[kind]
    names = entry.get(f"{singular}_names") or [f"{singular}{k}" for k in range(len(specs))]
    return tuple(
        ArraySpec(name, tuple(None if d is None or d < 0 else d for d in shape), np.dtype(dtype))
        for name, (shape, dtype) in zip(names, specs, strict=True)
    )


class Executable:
    """The host function `entry` of a loaded module, called on NumPy arrays.

    `Executable(module, "f")(x, w)` returns `f`'s outputs as a tuple of new arrays.
    """

    def __init__(self, module: types.ModuleType, entry: str):
        signatures = getattr(module, "TESSC_SIGNATURES", None)
        if not isinstance(signatures, dict):
            raise ValueError(f"module {module.__name__} has no TESSC_SIGNATURES")
        if entry not in signatures:
            known = ", ".join(sorted(signatures)) or "none"
            raise ValueError(f"no entry function '{entry}' (the module defines: {known})")
        signature = signatures[entry]
        self.module = module
        self.entry = entry
        self.inputs = _specs(signature, "inputs")
        self.outputs = _specs(signature, "outputs")
        if any(None in spec.shape for spec in self.outputs):
            raise ValueError(f"'{entry}' has outputs of dynamic shape, which cannot be allocated")
        self.function = getattr(module, signature.get("function", entry))
        self.workspace_bytes = int(signature.get("workspace_bytes", 0))
        aliases = signature.get("output_aliases") or [None] * len(self.outputs)
        self.output_aliases: tuple[int | None, ...] = tuple(aliases)
        self._per_thread = threading.local()

    def check_inputs(self, args: Sequence[object]) -> list[np.ndarray]:
        """`args` as C-contiguous arrays; ValueError naming the first mismatch."""
        if len(args) != len(self.inputs):
            raise ValueError(f"'{self.entry}' takes {len(self.inputs)} inputs, got {len(args)}")
        arrays: list[np.ndarray] = []
        for k, (arg, spec) in enumerate(zip(args, self.inputs, strict=True)):
            array = np.asarray(arg)
            where = f"'{self.entry}' input {k} ('{spec.name}')"
            if array.dtype != spec.dtype:
                raise ValueError(
                    f"{where} has dtype {array.dtype.name}, expected {spec.dtype.name}"
                )
            matches = len(array.shape) == len(spec.shape) and all(
                want is None or want == got
                for want, got in zip(spec.shape, array.shape, strict=False)
            )
            if not matches:
                raise ValueError(
                    f"{where} has shape {_format_shape(array.shape)}, expected {spec.shape_text()}"
                )
            if not array.flags.c_contiguous:
                array = array.copy(order="C")
            arrays.append(array)
        return arrays

    def workspace(self) -> np.ndarray:
        """This thread's arena of `workspace_bytes` bytes, allocated on first use."""
        arena = getattr(self._per_thread, "workspace", None)
        if arena is None:
            raw = np.empty(self.workspace_bytes + 64, dtype=np.uint8)
            start = -raw.ctypes.data % 64
            arena = raw[start : start + self.workspace_bytes]
            self._per_thread.workspace = arena
        return arena

    def donated(self, inputs: list[np.ndarray], index: int) -> np.ndarray:
        """Input `index`'s array, to be overwritten as an output (a copy if it must not)."""
        array = inputs[index]
        others = (a for k, a in enumerate(inputs) if k != index)
        if not array.flags.writeable or any(np.shares_memory(array, a) for a in others):
            array = array.copy()
            inputs[index] = array
        return array

    def __call__(self, *args: object) -> tuple[np.ndarray, ...]:
        inputs = self.check_inputs(args)
        outputs = [
            np.empty(spec.shape, dtype=spec.dtype) if alias is None else self.donated(inputs, alias)
            for spec, alias in zip(self.outputs, self.output_aliases, strict=True)
        ]
        if self.workspace_bytes:
            self.function(*inputs, *outputs, self.workspace())
        else:
            self.function(*inputs, *outputs)
        return tuple(outputs)

    def compile_stats(self) -> CompileStats:
        """Numba compilations and disk-cache hits of the module so far (in this process)."""
        return numba_compile_stats(self.module)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return f"<Executable {self.entry}({ins}) -> ({outs})>"


__all__ = ["ArraySpec", "Executable"]
