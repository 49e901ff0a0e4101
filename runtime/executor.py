"""
`Executable`: a compiled tessc program, callable on NumPy arrays.

A module made by `tessc.runtime.cache.load_source` carries `TESSC_SIGNATURES` (written by
codegen, so the runtime never reads IR; its format is `tessc.runtime.signatures`): the
shapes and dtypes of each host function's inputs and outputs. The host function takes its
inputs followed by one preallocated buffer per output (destination-passing style) and
returns nothing; `Executable` checks the inputs against the signature, makes them
C-contiguous (the compiled code assumes row-major layout, and one memory layout means one
Numba specialisation), allocates the outputs (from 1 MiB, possibly arrays the caller has
dropped: `output_cache`), calls the host, and returns the outputs as a tuple.

- A host with `"workspace_bytes"` (from `tess-memory-plan`) gets its byte arena,
  allocated once per `Executable` and thread (`host_memory.workspace_buffer`: 64-byte
  aligned, 2 MiB aligned and advised huge pages from 2 MiB on) and reused by every call,
  so a call allocates nothing but its outputs.
- A program that donates nothing allocates its outputs as views of one buffer per dtype,
  back to back in order (`host_memory.carve_plan`): the gradients a jitted gradient
  function returns are then an arena an optimizer step reads without packing them.
- For `"output_aliases"` (donated inputs, e.g. a parameter an optimizer step overwrites),
  output j is computed in input k's array, which is then returned as that output. When
  input k's array is read-only or shares memory with another input, it is copied first,
  so donation never changes a result.
- For `"arenas"` (from `tess-fuse-horizontal`), `Executable` keeps the caller's
  convention — separate arrays in, separate arrays out. The arrays packed into one arena
  are passed without a copy when they are already views of one buffer at their offsets (as
  `tessc.arena` makes them; checked by data pointer, `host_memory.arena_of`, and
  remembered for the same array objects), else copied into a new arena. Each output is a
  view of its output arena; when that arena is a donated input arena the caller passed
  without a copy, the outputs are the caller's own arrays, updated in place.
- For `"member_tables"` (`codegen.numba_members`), arrays that are not one buffer are not
  copied into those arenas: the host's member form reads each where it lies, through a
  table of addresses filled in the compiled call that reads the arrays
  (`array_fields.member_table`); unless one overlaps an array the call writes (a donated
  arena), which is packed as before.
"""

from __future__ import annotations

import operator
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tessc.runtime.abi import KERNEL_BITS_DTYPES
from tessc.runtime.cache import CompileStats, numba_compile_stats
from tessc.runtime.host_memory import (
    BULK_ARRAYS,
    aligned,
    aligned_empty,
    arena_of,
    carve_outputs,
    carve_plan,
    disjoint,
    workspace_buffer,
)
from tessc.runtime.output_cache import MIN_BYTES as CACHED_OUTPUT_BYTES
from tessc.runtime.output_cache import empty as output_empty
from tessc.runtime.signatures import ArenaSlot, ArraySpec, format_shape, read_signature
from tessc.runtime.threads import with_idle_threads


def as_bits(array: np.ndarray) -> np.ndarray:
    """A 16-bit float array as the compiled code takes it: its bits (a view)."""
    return array.view(np.uint16) if array.dtype.name in KERNEL_BITS_DTYPES else array


def as_bits_call(function: Callable[..., None]) -> Callable[..., None]:
    """`function`, called with its 16-bit float arrays viewed as their bits."""

    def call(*arrays: np.ndarray) -> None:
        function(*map(as_bits, arrays))

    return call


class Executable:
    """The host function `entry` of a loaded module, called on NumPy arrays.

    `Executable(module, "f")(x, w)` returns `f`'s outputs as a tuple of new arrays.
    """

    def __init__(self, module: types.ModuleType, entry: str):
        signature = read_signature(module, entry)
        signature.check_static_outputs()
        self.module = module
        self.entry = entry
        self.host_inputs = signature.inputs
        self.host_outputs = signature.outputs
        self.input_slots: tuple[ArenaSlot, ...] = signature.arena_inputs
        self.output_slots: tuple[ArenaSlot, ...] = signature.arena_outputs
        self.inputs, self.outputs = signature.caller_inputs, signature.caller_outputs
        self._members = signature.arena_members()
        self._back_to_back = {  # arenas whose members fill them in order, without gaps
            h for h, m in self._members.items() if self._fills(h, m)
        }
        self._pick_members = {  # each arena's caller inputs, as a tuple (in C)
            h: (operator.itemgetter(*m) if len(m) > 1 else lambda a, k=m[0]: (a[k],))
            for h, m in self._members.items()
        }
        self._offsets = {  # each arena's members' offsets, in elements and in bytes
            h: (offsets, np.asarray(offsets, np.int64) * self.host_inputs[h].dtype.itemsize)
            for h, m in self._members.items()
            for offsets in ([self.input_slots[k].offset for k in m],)
        }
        self._zero_copy: dict[int, tuple[tuple[object, ...], np.ndarray]] = {}
        self.function = getattr(module, signature.function)
        # The host's form reading these arenas' members where they lie, through address
        # tables (`"member_tables"`): arenas filled by their members in order.
        self.member_function: Callable[..., None] | None = None
        self._tabled: tuple[int, ...] = ()
        if signature.member_tables is not None:
            name, tabled = signature.member_tables
            if all(h in self._back_to_back for h in tabled):
                self.member_function, self._tabled = getattr(module, name), tabled
        if hasattr(module, "prange"):  # parfors: on the threads that have a core now
            self.function = with_idle_threads(self.function)
            if self.member_function is not None:
                self.member_function = with_idle_threads(self.member_function)
        if any(s.dtype.name in KERNEL_BITS_DTYPES for s in (*self.host_inputs, *self.host_outputs)):
            self.function = as_bits_call(self.function)
            if self.member_function is not None:
                self.member_function = as_bits_call(self.member_function)
        self.workspace_bytes = signature.workspace_bytes
        self.output_aliases = signature.output_aliases
        self._donates = any(alias is not None for alias in self.output_aliases)
        self._donated_inputs = sorted({a for a in self.output_aliases if a is not None})
        self._carved = carve_plan(self.host_outputs) if not self._donates else None
        self.packing_copies = 0
        """Input arenas packed by copy so far (a counter for tests: a training loop
        that feeds back what the step returned packs only on its first call)."""
        self._per_thread = threading.local()
        self._member_layouts: dict[int, Any] = {}
        """Host input -> its members' `array_fields.Layouts` (`_members_match`)."""
        # The caller input each output is when computed in place in its donated arena.
        self._same_as_input = [signature.input_in_place(slot) for slot in self.output_slots]
        # The caller inputs passed as they are (no arena); and, for a call whose donated
        # arenas all came without a copy, so that each arena output is the caller's input
        # updated in place: which of (caller inputs, host outputs) each output is.
        self._separate = [(k, s.host) for k, s in enumerate(self.input_slots) if s.offset is None]
        arena_outputs = {s.host for s in self.output_slots if s.offset is not None}
        self._arena_outputs = tuple(sorted(arena_outputs))
        picks = [
            len(self.inputs) + slot.host if slot.offset is None else k
            for slot, k in zip(self.output_slots, self._same_as_input, strict=True)
        ]
        self._pick_in_place: Callable[[tuple], tuple] | None = None
        if len(picks) > 1 and None not in picks:
            self._pick_in_place = operator.itemgetter(*picks)  # type: ignore[arg-type]
        # (shape, dtype) of every caller input when none has a dynamic dimension: then one
        # comparison per array checks a well-formed call (`check_inputs`).
        self._input_types: tuple[tuple[tuple[int, ...], np.dtype], ...] | None = None
        if all(None not in spec.shape for spec in self.inputs):
            self._input_types = tuple((spec.shape, spec.dtype) for spec in self.inputs)  # type: ignore[misc]

    def _fills(self, h: int, members: Sequence[int]) -> bool:
        """Whether the caller inputs `members` fill host input `h` in order, no gaps."""
        end = 0
        for k in members:
            slot = self.input_slots[k]
            if slot.offset != end:
                return False
            end += slot.size
        return end == (self.host_inputs[h].shape[0] or 0)

    def check_inputs(self, args: Sequence[object]) -> list[np.ndarray]:
        """`args` as C-contiguous arrays; ValueError naming the first mismatch."""
        types = self._input_types
        if types is not None and len(args) == len(types):
            for arg, (shape, dtype) in zip(args, types, strict=True):
                if (
                    type(arg) is not np.ndarray
                    or arg.shape != shape
                    or arg.dtype != dtype
                    or not arg.flags.c_contiguous
                ):
                    break
            else:
                return list(args)  # type: ignore[arg-type]
        if len(args) != len(self.inputs):
            raise ValueError(f"'{self.entry}' takes {len(self.inputs)} inputs, got {len(args)}")
        return [self.check_input(k, arg) for k, arg in enumerate(args)]

    def check_input(self, k: int, arg: object) -> np.ndarray:
        """Input `k` as a C-contiguous array of its spec; ValueError if it does not fit."""
        spec = self.inputs[k]
        array = np.asarray(arg)
        where = f"'{self.entry}' input {k} ('{spec.name}')"
        if array.dtype != spec.dtype:
            if array.dtype.newbyteorder("=") == spec.dtype:  # big-endian: a copy fixes it
                array = array.astype(spec.dtype)
            else:
                raise ValueError(
                    f"{where} has dtype {array.dtype.name}, expected {spec.dtype.name}"
                )
        matches = len(array.shape) == len(spec.shape) and all(
            want is None or want == got for want, got in zip(spec.shape, array.shape, strict=False)
        )
        if not matches:
            raise ValueError(
                f"{where} has shape {format_shape(array.shape)}, expected {spec.shape_text()}"
            )
        if not array.flags.c_contiguous:
            array = array.copy(order="C")
        return array

    def pack_inputs(
        self,
        args: Sequence[object],
        checked: bool = False,
        tables: list[tuple[np.ndarray, Sequence[np.ndarray]]] | None = None,
    ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
        """The host's inputs for the caller's `args`, and the host inputs that are arenas the
        caller's arrays are views of (passed without a copy), by index. `checked`: the
        arena members are C-contiguous arrays of their shapes and dtypes already.
        `tables`, when given and the host has a member form (`member_function`), receives
        the address tables that form reads instead of packed arenas, each with the arrays
        it points into (checked copies among them: the caller holds the list until the
        call returns), when that form is to be called: those host inputs are then the
        tables (`_tables`)."""
        if len(args) != len(self.inputs):
            raise ValueError(f"'{self.entry}' takes {len(self.inputs)} inputs, got {len(args)}")
        host: list[np.ndarray | None] = [None] * len(self.host_inputs)
        for k, h in self._separate:
            host[h] = self.check_input(k, args[k])
        zero_copy: dict[int, np.ndarray] = {}
        deferred: dict[int, Sequence[np.ndarray]] = {}
        for h, members in self._members.items():
            given = self._pick_members[h](args)
            cached = self._zero_copy.get(h)
            if cached is not None and all(map(operator.is_, given, cached[0])):
                host[h] = zero_copy[h] = cached[1]
                continue
            arrays: Sequence[np.ndarray]
            if checked or self._members_match(h, given):  # C-contiguous, of their specs
                arrays = given
            else:
                arrays = [self.check_input(k, args[k]) for k in members]
            if tables is not None and h in self._tabled and self.member_function is not None:
                deferred[h] = arrays  # after the arenas it must not overlap
                continue
            host[h] = self._arena(h, given, arrays, zero_copy)
        if deferred:
            found = self._tables(deferred, host)
            if found is not None:
                assert tables is not None
                for h, table in found.items():
                    tables.append((table, deferred.get(h) or [host[h]]))  # type: ignore[list-item]
                    host[h] = table
            else:
                for h, arrays in deferred.items():
                    given = self._pick_members[h](args)
                    host[h] = self._arena(h, given, arrays, zero_copy)
        missing = [h for h, a in enumerate(host) if a is None]
        if missing:  # pragma: no cover - codegen lists every host input in "arenas"
            raise ValueError(f"'{self.entry}': no caller input fills host input {missing[0]}")
        return [a for a in host if a is not None], zero_copy

    def _arena(
        self,
        h: int,
        given: tuple[object, ...],
        arrays: Sequence[np.ndarray],
        zero_copy: dict[int, np.ndarray],
    ) -> np.ndarray:
        """Host input `h`'s arena holding `arrays` (the caller's `given`, checked): their
        own memory when they are views of one at their offsets, else a packed copy."""
        offsets, byte_offsets = self._offsets[h]
        size = self.host_inputs[h].shape[0] or 0
        arena = arena_of(arrays, offsets, size, byte_offsets)
        if arena is not None:
            # The same array objects next time are the same views: no check needed.
            self._zero_copy[h] = (given, arena)
            zero_copy[h] = arena
            return arena
        self.packing_copies += 1
        arena = self.packing_buffer(h, size)
        if h in self._back_to_back:  # one copy loop, in C
            np.concatenate(arrays, axis=None, out=arena)
        else:
            for array, k in zip(arrays, self._members[h], strict=True):
                slot = self.input_slots[k]
                arena[slot.offset : slot.offset + slot.size] = array.reshape(-1)
        return arena

    def _tables(
        self, deferred: dict[int, Sequence[np.ndarray]], host: Sequence[np.ndarray | None]
    ) -> dict[int, np.ndarray] | None:
        """The member form's address tables for the tabled arenas' checked `deferred`
        arrays, each filled in one compiled call (`array_fields.member_table`), and for
        those already in `host` (the caller's arrays, recognized as one buffer), its base
        address in every entry, so that one arena packs nothing for another; None when
        the plain host is to be called: every tabled arena is one buffer already (no copy
        to save), a table cannot be read in bulk, or a member overlaps an array the call
        writes (a donated input: the packed copy keeps the values it had, as before)."""
        from tessc.runtime import array_fields

        written = tuple(host[a] for a in self._donated_inputs)
        forbidden = self._forbidden(written)
        buffers = self._per_thread.__dict__.setdefault("tables", {})
        found: dict[int, np.ndarray] = {}
        separate = False
        for h in self._tabled:
            table = buffers.get(h)
            if table is None:
                table = buffers[h] = np.empty(len(self._members[h]), np.int64)
            found[h] = table
            arena = host[h]
            if arena is not None:  # one buffer already (a call before showed it): its base
                table.fill(arena.__array_interface__["data"][0])
        for h, arrays in deferred.items():
            table = found[h]
            _, byte_offsets = self._offsets[h]
            itemsize = self.host_inputs[h].dtype.itemsize
            shown = array_fields.member_table(arrays, byte_offsets, itemsize, table, forbidden)
            if shown is None or shown < 0:
                return None
            separate |= shown == 0
        return found if separate else None

    def _forbidden(self, written: tuple[np.ndarray | None, ...]) -> np.ndarray:
        """The byte ranges `[start, end)` of the arrays `written`, as int64 pairs; kept for
        the same array objects (a step's parameter arena, passed back)."""
        kept = self._per_thread.__dict__.get("forbidden")
        if kept is not None and len(kept[0]) == len(written):
            if all(map(operator.is_, kept[0], written)):
                return kept[1]
        bounds: list[int] = []
        for array in written:
            if array is not None:
                start = array.__array_interface__["data"][0]
                bounds += [start, start + array.nbytes]
        forbidden = np.array(bounds, np.int64)
        self._per_thread.forbidden = (written, forbidden)
        return forbidden

    def _members_match(self, h: int, given: Sequence[object]) -> bool:
        """Whether the caller inputs `given` packed into host input `h` are shown, in one
        compiled call (`array_fields.Layouts`), to be C-contiguous ndarrays of their
        specs: from `BULK_ARRAYS` of them, instead of a `check_input` each."""
        if len(given) < BULK_ARRAYS:
            return False
        layouts = self._member_layouts.get(h)
        if layouts is None:
            specs = [self.inputs[k] for k in self._members[h]]
            layouts = False  # a dynamic dimension: checked one by one
            if all(None not in spec.shape for spec in specs):
                from tessc.runtime.array_fields import Layouts

                layouts = Layouts([(spec.shape, np.dtype(spec.dtype)) for spec in specs])  # type: ignore[misc]
            self._member_layouts[h] = layouts
        return layouts is not False and layouts.match(given)

    def packing_buffer(self, h: int, size: int) -> np.ndarray:
        """A new array for host input `h`'s arena, or, if no output aliases that input
        (nothing refers to it after the call), this thread's reused one: a fresh large
        array costs page faults on every call."""
        dtype = self.host_inputs[h].dtype
        if h in self.output_aliases:
            return np.empty(size, dtype=dtype)
        buffers = self._per_thread.__dict__.setdefault("packing", {})
        if h not in buffers:
            buffers[h] = np.empty(size, dtype=dtype)
        return buffers[h]

    def unpack_outputs(
        self,
        outputs: list[np.ndarray],
        args: Sequence[object],
        zero_copy: dict[int, np.ndarray],
    ) -> tuple[np.ndarray, ...]:
        """The caller's outputs: host outputs, or views of the output arenas (the caller's
        own arrays where the arena is the donated input arena they are views of)."""
        in_place = [
            alias is not None and outputs[h] is zero_copy.get(alias)
            for h, alias in enumerate(self.output_aliases)
        ]
        if self._pick_in_place is not None and all(in_place[h] for h in self._arena_outputs):
            return self._pick_in_place((*args, *outputs))  # the caller's arrays, in place
        results: list[np.ndarray] = []
        for slot, k in zip(self.output_slots, self._same_as_input, strict=True):
            arena = outputs[slot.host]
            if slot.offset is None:
                results.append(arena)
            elif k is not None and in_place[slot.host]:
                results.append(args[k])  # type: ignore[arg-type]
            else:
                view = arena[slot.offset : slot.offset + slot.size]
                results.append(view.reshape(slot.spec.shape))
        return tuple(results)

    def workspace(self) -> np.ndarray:
        """This thread's arena of `workspace_bytes` bytes, allocated on first use."""
        arena = getattr(self._per_thread, "workspace", None)
        if arena is None:
            arena = self._per_thread.workspace = workspace_buffer(self.workspace_bytes or 0)
        return arena

    def donated(self, inputs: list[np.ndarray], index: int, apart: bool = False) -> np.ndarray:
        """Input `index`'s array, to be overwritten as an output (a copy if it must not).
        `apart`: no two inputs overlap (`disjoint`), which saves `np.shares_memory` (~0.3 us
        a pair, and a donated input is compared with every other)."""
        array = inputs[index]
        if apart and array.flags.writeable:
            return array
        others = (a for k, a in enumerate(inputs) if k != index)
        if not array.flags.writeable or any(np.shares_memory(array, a) for a in others):
            array = array.copy()
            inputs[index] = array
        return array

    def __call__(self, *args: object) -> tuple[np.ndarray, ...]:
        if self.input_slots:
            tables: list[tuple[np.ndarray, Sequence[np.ndarray]]] = []  # alive for the call
            inputs, zero_copy = self.pack_inputs(args, tables=tables)
            return self._run(inputs, args, zero_copy, self.member_function if tables else None)
        return self._run(self.check_inputs(args), args, {})

    def call_checked(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """`self(*args)` for a caller that has checked `args` already: C-contiguous
        ndarrays of exactly the inputs' shapes and dtypes (`jit`'s fast path, whose plan
        checks them against the same signature). Skips `check_inputs`."""
        if self.input_slots:
            tables: list[tuple[np.ndarray, Sequence[np.ndarray]]] = []  # alive for the call
            inputs, zero_copy = self.pack_inputs(args, checked=True, tables=tables)
            return self._run(inputs, args, zero_copy, self.member_function if tables else None)
        return self._run(list(args), args, {})

    def runner(self) -> Callable[..., Sequence[np.ndarray]]:
        """`call_checked` specialised to this program for a caller that calls it in a loop
        (`jit`'s planned path): output specs, aliases and the workspace looked up once, and
        the donation check done inline. It is `_run`'s: every input's memory owner distinct
        (NumPy points a view's `base` at the owner), each donated input its own owner and
        writeable; any other call takes `_run`'s exact path. Returns the host's outputs."""
        if self.input_slots or self.output_slots:
            return self.call_checked
        if any(None in spec.shape for spec in self.host_outputs):
            return self.call_checked  # outputs sized by the call's N (`output_shape`)
        # Straight-line Python for this program (`exec`'d once): the loops over inputs and
        # outputs, `*args` and the list of outputs cost ~1.5 us a call written generically.
        count = len(self.host_inputs)
        params = [f"i{k}" for k in range(count)]
        names = {"function": self.function, "exact": self._run, "ndarray": np.ndarray}
        lines = [f"def run({', '.join(params)}):"]
        aliased = {h: alias for h, alias in enumerate(self.output_aliases) if alias is not None}
        if aliased:
            fallback = f"return exact([{', '.join(params)}], ({', '.join(params)},), {{}})"
            donated = set(aliased.values())
            for k, name in enumerate(params):  # every input's memory owner, distinct
                if k in donated:  # its own owner, and writeable
                    lines += [
                        f"    if {name}.base is not None or not {name}.flags.writeable:",
                        f"        {fallback}",
                        f"    o{k} = id({name})",
                    ]
                    continue
                lines += [
                    f"    b = {name}.base",
                    "    if b is None:",
                    f"        o{k} = id({name})",
                    "    elif type(b) is ndarray and b.base is None:",
                    f"        o{k} = id(b)",
                    "    else:",
                    f"        {fallback}",
                ]
            owners = ", ".join(f"o{k}" for k in range(count))
            lines.append(f"    if len({{{owners}}}) != {count}: {fallback}")
        outputs = []
        if self._carved is not None:
            names["carve"], names["plan"] = carve_outputs, self._carved
            outputs = [f"r{h}" for h in range(len(self.host_outputs))]
            lines.append(f"    {', '.join(outputs)}, = carve(*plan)")
        for h, spec in enumerate(self.host_outputs):
            if self._carved is not None:
                break
            if h in aliased:
                outputs.append(f"i{aliased[h]}")
                continue
            shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
            names[f"S{h}"], names[f"D{h}"] = shape, dtype
            # A large output may be one the caller dropped (`output_cache`); a small one
            # skips the lookup.
            large = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize >= CACHED_OUTPUT_BYTES
            lines.append(f"    r{h} = {'cached' if large else 'empty'}(S{h}, D{h})")
            outputs.append(f"r{h}")
        names["empty"], names["cached"] = np.empty, output_empty
        arguments = [*params, *outputs]
        if self.workspace_bytes is not None:
            names["workspace"] = self.workspace
            arguments.append("workspace()")
        lines.append(f"    function({', '.join(arguments)})")
        lines.append(f"    return [{', '.join(outputs)}]")
        exec(compile("\n".join(lines) + "\n", "<tessc runner>", "exec"), names)
        run = names["run"]
        run.source = "\n".join(lines)
        return run

    def output_shape(
        self, shape: tuple[int | None, ...], inputs: Sequence[np.ndarray]
    ) -> tuple[int, ...]:
        """`shape` with a dynamic dim (`None`) as the size of the inputs' dynamic dims
        (a generic program's N: one per program, checked by `jit`)."""
        if None not in shape:
            return shape  # type: ignore[return-value]
        size = next(
            array.shape[d]
            for spec, array in zip(self.host_inputs, inputs, strict=False)
            for d, want in enumerate(spec.shape)
            if want is None
        )
        return tuple(size if d is None else d for d in shape)

    def _run(
        self,
        inputs: list[np.ndarray],
        args: Sequence[object],
        zero_copy: dict[int, np.ndarray],
        function: Callable[..., None] | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Calls the host (or `function`, its member form) on the host `inputs`."""
        function = function or self.function
        apart = self._donates and disjoint(inputs)  # then `donated` checks nothing
        if self._carved is not None:
            outputs = carve_outputs(*self._carved)
        else:
            outputs = [
                output_empty(tuple(self.output_shape(spec.shape, inputs)), np.dtype(spec.dtype))
                if alias is None
                else self.donated(inputs, alias, apart)
                for spec, alias in zip(self.host_outputs, self.output_aliases, strict=True)
            ]
        if self.workspace_bytes is not None:
            function(*inputs, *outputs, self.workspace())
        else:
            function(*inputs, *outputs)
        if self.output_slots:
            return self.unpack_outputs(outputs, args, zero_copy)
        return tuple(outputs)

    def compile_stats(self) -> CompileStats:
        """Numba compilations and disk-cache hits of the module so far (in this process)."""
        return numba_compile_stats(self.module)

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return f"<Executable {self.entry}({ins}) -> ({outs})>"


# (`host_memory`'s names are importable here too, where tests and older callers import them.)
__all__ = [
    "ArenaSlot",
    "ArraySpec",
    "Executable",
    "aligned",
    "aligned_empty",
    "arena_of",
    "disjoint",
    "workspace_buffer",
]
