"""
`TESSC_SIGNATURES`: what a generated module tells the runtime about its host functions.

This is the runtime's side of the codegen -> runtime contract. Codegen
(`tessc.lowering.codegen.to_numba`) writes, at the top of every module it generates, a dict of
plain Python literals — ints, strings, tuples, lists, dicts and `None`, nothing else — so
that the runtime can check and call the compiled code without reading IR, and without
importing anything from `tessc.dialects` or `tessc.lowering` (it stands alone). The
runtime reads it through one function, `read_signature`. The format:

    TESSC_SIGNATURES = {
        "<entry>": {                       # the IR name of a host function
            "function": "<python name>",   # its name in the module (default: the entry)
            "inputs": [(shape, dtype), ...],
            "input_names": ["x", ...],     # optional (default: input0, input1, ...)
            "outputs": [(shape, dtype), ...],
            "output_names": ["y", ...],    # optional (default: output0, ...)
            "workspace_bytes": N,          # optional
            "output_aliases": [k or None, ...],  # optional
            "arenas": {                    # optional
                "inputs": [(shape, dtype, host, offset), ...],
                "input_names": ["w", ...],
                "outputs": [(shape, dtype, host, offset), ...],
            },
            "member_tables": ("<python name>", (host, ...)),  # optional
        },
    }

- A shape is a tuple of ints, `None` for a dynamic dimension; a dtype is a NumPy dtype
  name (`"float32"`).
- The host function takes its inputs, then one preallocated buffer per output
  (destination-passing style), and returns nothing (`tess-bufferize`'s
  `tess.num_outputs` splits its arguments).
- `"workspace_bytes"` (from `tess-memory-plan`'s `tess.workspace_bytes`): the host takes
  one more, last argument, a byte arena of that size holding all its intermediates,
  allocated once and reused by every call.
- `"output_aliases"` (from `tess-memory-plan`'s `tess.aliases_input`): output j is
  computed in place in input k's (donated) array, then returned as that output; `None`
  for an output with its own buffer.
- `"arenas"` (from `tess-fuse-horizontal`'s `tess.arena_layout`): the host takes some
  inputs packed into 1-D arenas and returns some outputs packed the same way. It lists the
  caller's own inputs and outputs in their order: each array's shape and dtype, the host
  argument holding it (inputs: index among the host's inputs; outputs: among its outputs)
  and its element offset in that arena, `None` when the argument is the array itself.
  `Executable` keeps the caller's convention (separate arrays in and out).
- `"member_tables"` (with `"arenas"`, from `codegen.numba_members`; on CUDA
  `codegen.cuda_members`, device addresses in a device table): a second form of the
  host, taking the listed input arenas (host input indices, each filled back to back by
  its members) as int64 tables instead: entry m is the data address of the arena's m-th
  member (in offset order) less that member's byte offset, so that the form reads each
  member where it lies. The other arguments are the host's.

A CUDA module (`tessc.lowering.codegen.to_cuda`) carries the same dict and `TESSC_TARGET = "cuda"`;
its hosts are plain Python on device arrays and take one more, last argument: `buffers`,
a dict the runtime keeps per program in which they keep their intermediate device
buffers (`tessc.runtime.cuda`).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes  # noqa: F401 - registers the "bfloat16" dtype name a signature may hold
import numpy as np

from tessc.runtime import abi


def format_shape(shape: Sequence[int | None]) -> str:
    """`(3,4)` — the notation of tessc's shape diagnostics; `?` for a dynamic dim."""
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one argument; `None` in a shape is a dynamic dimension."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    def shape_text(self) -> str:
        return format_shape(self.shape)

    def describe(self) -> str:
        return f"{self.shape_text()} {self.dtype.name}"


@dataclass(frozen=True)
class ArenaSlot:
    """Where one of the caller's arrays lives in the host call: argument `host`, from
    element `offset` (`None`: the argument is the array itself)."""

    spec: ArraySpec
    host: int
    offset: int | None

    @property
    def size(self) -> int:
        size = 1
        for d in self.spec.shape:
            size *= d or 0
        return size


@dataclass(frozen=True)
class HostSignature:
    """One entry of `TESSC_SIGNATURES`, typed (see the module docstring)."""

    entry: str
    function: str
    inputs: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    workspace_bytes: int | None
    """None: the host takes no workspace (0: it takes an empty one, a zero-size plan)."""
    output_aliases: tuple[int | None, ...]
    arena_inputs: tuple[ArenaSlot, ...]
    """Empty unless the host takes arenas (`"arenas"`)."""
    arena_outputs: tuple[ArenaSlot, ...]
    member_tables: tuple[str, tuple[int, ...]] | None = None
    """The host's form reading the listed input arenas through tables (`"member_tables"`)."""

    # The caller's view, which `Executable` and `CudaExecutable` both keep.

    @property
    def caller_inputs(self) -> tuple[ArraySpec, ...]:
        """The arrays the caller passes: the arena members' when the host takes arenas."""
        if self.arena_inputs or self.arena_outputs:
            return tuple(slot.spec for slot in self.arena_inputs)
        return self.inputs

    @property
    def caller_outputs(self) -> tuple[ArraySpec, ...]:
        """The arrays the caller gets back: the arena members' when the host returns arenas."""
        if self.arena_inputs or self.arena_outputs:
            return tuple(slot.spec for slot in self.arena_outputs)
        return self.outputs

    def arena_members(self) -> dict[int, list[int]]:
        """Host input -> the caller inputs packed into that arena, in order."""
        members: dict[int, list[int]] = {}
        for k, slot in enumerate(self.arena_inputs):
            if slot.offset is not None:
                members.setdefault(slot.host, []).append(k)
        return members

    def input_in_place(self, output: ArenaSlot) -> int | None:
        """The caller input that caller output `output` is when the host computes it in
        place: its arena is that input's donated arena, at the same offset and shape."""
        alias = self.output_aliases[output.host]
        if output.offset is None or alias is None:
            return None
        for k, slot in enumerate(self.arena_inputs):
            if (slot.host, slot.offset, slot.spec.shape) == (
                alias,
                output.offset,
                output.spec.shape,
            ):
                return k
        return None

    def check_static_outputs(self) -> None:
        """ValueError if an output has a dynamic dimension and no input has one: the
        runtime allocates outputs, a dynamic dim as the inputs' (one size per program, a
        generic program's N, which `jit` checks)."""
        if any(None in spec.shape for spec in self.outputs) and not any(
            None in spec.shape for spec in self.inputs
        ):
            raise ValueError(
                f"'{self.entry}' has outputs of dynamic shape, which cannot be allocated"
            )


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _names(entry: dict, kind: str, count: int) -> list[str]:
    singular = kind[:-1]
    key = {abi.INPUTS: abi.INPUT_NAMES, abi.OUTPUTS: abi.OUTPUT_NAMES}[kind]
    return entry.get(key) or [f"{singular}{k}" for k in range(count)]


def _specs(entry: dict, kind: str) -> tuple[ArraySpec, ...]:
    specs = entry[kind]
    return tuple(
        ArraySpec(name, tuple(shape), np.dtype(dtype))
        for name, (shape, dtype) in zip(_names(entry, kind, len(specs)), specs, strict=True)
    )


def _slots(entry: dict, kind: str) -> tuple[ArenaSlot, ...]:
    slots = entry[kind]
    return tuple(
        ArenaSlot(ArraySpec(name, tuple(shape), np.dtype(dtype)), host, offset)
        for name, (shape, dtype, host, offset) in zip(
            _names(entry, kind, len(slots)), slots, strict=True
        )
    )


def read_signature(module: types.ModuleType, entry: str) -> HostSignature:
    """The signature of host function `entry` in the generated `module`; ValueError when
    the module has no `TESSC_SIGNATURES` or no such entry."""
    signatures = getattr(module, abi.SIGNATURES, None)
    if not isinstance(signatures, dict):
        raise ValueError(f"module {module.__name__} has no {abi.SIGNATURES}")
    if entry not in signatures:
        known = ", ".join(sorted(signatures)) or "none"
        raise ValueError(f"no entry function '{entry}' (the module defines: {known})")
    signature = signatures[entry]
    outputs = _specs(signature, abi.OUTPUTS)
    arenas = signature.get(abi.ARENAS)
    tables = signature.get(abi.MEMBER_TABLES)
    return HostSignature(
        entry=entry,
        function=signature.get(abi.FUNCTION, entry),
        inputs=_specs(signature, abi.INPUTS),
        outputs=outputs,
        workspace_bytes=_optional_int(signature.get(abi.WORKSPACE_BYTES)),
        output_aliases=tuple(signature.get(abi.OUTPUT_ALIASES) or [None] * len(outputs)),
        arena_inputs=_slots(arenas, abi.INPUTS) if arenas is not None else (),
        arena_outputs=_slots(arenas, abi.OUTPUTS) if arenas is not None else (),
        member_tables=None if tables is None else (str(tables[0]), tuple(map(int, tables[1]))),
    )


__all__ = ["ArenaSlot", "ArraySpec", "HostSignature", "format_shape", "read_signature"]
