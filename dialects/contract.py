"""
The pass contract: every `tess.*` attribute one pass writes and another reads, declared once.

MLIR lets a dialect own *discardable* attributes — `tess.kernel` on a `func.func`,
`tess.chunk_size` on a `linalg.generic` — that any op may carry and that passes use to hand
facts down the pipeline. They are the joints between passes: a pass writes one, a later pass
(or codegen, which turns it into `TESSC_SIGNATURES` for the runtime) reads it. This module is
the only place that spells their names. Each is a typed declaration with accessors,

    KERNEL.has(fn) / KERNEL.set(fn)               # a unit attribute (a flag)
    NUM_OUTPUTS.get(fn) -> int | None             # typed value; None when absent
    NUM_OUTPUTS.set(fn, 2)                        # writes `tess.num_outputs = 2 : i64`
    DONATED.has_arg(fn, k) / ALIASES_INPUT.get_arg(fn, k)   # on argument k (`arg_attrs`)

and a docstring saying who writes it and who reads it. Attributes on function arguments
(`arg_attrs`) are `ArgUnit`/`ArgInt`; everything else lives in `op.attributes`. Setting an
attribute writes exactly the attribute the passes wrote before this module existed (an
`i64` `IntegerAttr`, a `DenseArrayBase` of `i64`, ...), so the printed IR is unchanged.

Two groups:

- the contract proper (`tess.kernel`, `tess.num_outputs`, `tess.donated`,
  `tess.aliases_input`, `tess.workspace`, `tess.workspace_bytes`, `tess.chunk_size`,
  `tess.arena_layout`, `tess.op`, `tess.tile_sizes`, ...): facts later passes rely on;
- decision reports (`tess.fused`, `tess.fusion_refused`, `tess.grouped`, the memory plan's
  byte counts, ...): written under a pass's `report` option (or always, for the memory
  plan's figures) for FileCheck tests, benchmarks and readers; a few are read back (a
  re-run of `tess-memory-plan` skips a host with `tess.peak_bytes`).

`tess.arena_layout` has a structured value, `ArenaLayout`. Codegen copies it into
`TESSC_SIGNATURES` (documented in `tessc.runtime.signatures`, the runtime's side of the
contract: the runtime imports nothing from here, so the generated module is plain Python
literals, with `None` where this IR encoding uses `NOT_PACKED`).

Only xDSL is imported: `dialects/` sits below every pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation

# ---------------------------------------------------------------------------------------
# Kinds of declarations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Discardable:
    """A discardable attribute `name` in an op's `attributes`."""

    name: str

    def has(self, op: Operation) -> bool:
        return self.name in op.attributes

    def raw(self, op: Operation) -> Attribute | None:
        return op.attributes.get(self.name)

    def copy(self, source: Operation, target: Operation) -> None:
        """Give `target` the attribute `source` carries, if it carries one."""
        if (attr := source.attributes.get(self.name)) is not None:
            target.attributes[self.name] = attr


@dataclass(frozen=True)
class Unit(_Discardable):
    """A flag: present (`{tess.kernel}`) or not."""

    def set(self, op: Operation) -> None:
        op.attributes[self.name] = UnitAttr()


@dataclass(frozen=True)
class Int(_Discardable):
    """An integer, written as `i64`."""

    def get(self, op: Operation) -> int | None:
        attr = op.attributes.get(self.name)
        return int(attr.value.data) if isinstance(attr, IntegerAttr) else None

    def set(self, op: Operation, value: int) -> None:
        op.attributes[self.name] = IntegerAttr(value, i64)


@dataclass(frozen=True)
class Str(_Discardable):
    """A string."""

    def get(self, op: Operation) -> str | None:
        attr = op.attributes.get(self.name)
        return attr.data if isinstance(attr, StringAttr) else None

    def set(self, op: Operation, value: str) -> None:
        op.attributes[self.name] = StringAttr(value)


@dataclass(frozen=True)
class StrList(_Discardable):
    """A list of strings (`["tess.mul", "tess.add"]`)."""

    def get(self, op: Operation) -> list[str] | None:
        attr = op.attributes.get(self.name)
        if not isinstance(attr, ArrayAttr):
            return None
        return [a.data for a in attr if isinstance(a, StringAttr)]

    def set(self, op: Operation, values: Sequence[str]) -> None:
        op.attributes[self.name] = ArrayAttr([StringAttr(v) for v in values])


@dataclass(frozen=True)
class IntArray(_Discardable):
    """A list of integers, written as `array<i64: ...>`."""

    def get(self, op: Operation) -> tuple[int, ...] | None:
        attr = op.attributes.get(self.name)
        if not isinstance(attr, DenseArrayBase):
            return None
        return tuple(int(v) for v in attr.get_values())

    def set(self, op: Operation, values: Sequence[int]) -> None:
        op.attributes[self.name] = DenseArrayBase.from_list(i64, list(values))


def _arg_attrs(function: func.FuncOp, index: int) -> DictionaryAttr:
    attrs = function.arg_attrs
    if attrs is None or index >= len(attrs.data):
        return DictionaryAttr({})
    return attrs.data[index]


def _set_arg_attr(function: func.FuncOp, index: int, name: str, value: Attribute) -> None:
    count = len(function.function_type.inputs.data)
    old = list(function.arg_attrs.data) if function.arg_attrs is not None else []
    old += [DictionaryAttr({})] * (count - len(old))
    old[index] = DictionaryAttr({**old[index].data, name: value})
    function.properties["arg_attrs"] = ArrayAttr(old)


@dataclass(frozen=True)
class ArgUnit:
    """A flag on a function argument (in the function's `arg_attrs`)."""

    name: str

    def has_arg(self, function: func.FuncOp, index: int) -> bool:
        return self.name in _arg_attrs(function, index).data

    def set_arg(self, function: func.FuncOp, index: int) -> None:
        _set_arg_attr(function, index, self.name, UnitAttr())

    def in_dict(self, attrs: DictionaryAttr) -> bool:
        """Whether one argument's attribute dictionary `attrs` carries the flag."""
        return self.name in attrs.data

    def dict(self, present: bool = True) -> DictionaryAttr:
        """An argument's attribute dictionary holding the flag (or nothing)."""
        return DictionaryAttr({self.name: UnitAttr()} if present else {})


@dataclass(frozen=True)
class ArgInt:
    """An integer on a function argument (in the function's `arg_attrs`), written as `i64`."""

    name: str

    def get_arg(self, function: func.FuncOp, index: int) -> int | None:
        attr = _arg_attrs(function, index).data.get(self.name)
        return int(attr.value.data) if isinstance(attr, IntegerAttr) else None

    def set_arg(self, function: func.FuncOp, index: int, value: int) -> None:
        _set_arg_attr(function, index, self.name, IntegerAttr(value, i64))


# ---------------------------------------------------------------------------------------
# tess.arena_layout: a structured value
# ---------------------------------------------------------------------------------------

NOT_PACKED = -1
"""The offset `tess.arena_layout`'s IR encoding gives an array passed as it was (an
`array<i64>` holds no None); `ArenaSlot.offset` is None for it."""


@dataclass(frozen=True)
class ArenaSlot:
    """Where one of the caller's arrays lives in the packed function: argument (or result)
    `host`, from element `offset` (None: the argument is the array itself), of `shape`."""

    host: int
    offset: int | None
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ArenaLayout:
    """The caller's inputs and results of a function `tess-fuse-horizontal` packed, in
    their original order, and the inputs' names."""

    inputs: tuple[ArenaSlot, ...]
    outputs: tuple[ArenaSlot, ...]
    input_names: tuple[str, ...]


def _slot_attr(slot: ArenaSlot) -> DenseArrayBase:
    offset = NOT_PACKED if slot.offset is None else slot.offset
    return DenseArrayBase.from_list(i64, [slot.host, offset, *slot.shape])


def _slot(attr: Attribute) -> ArenaSlot:
    assert isinstance(attr, DenseArrayBase)
    host, offset, *shape = (int(v) for v in attr.get_values())
    return ArenaSlot(host, None if offset == NOT_PACKED else offset, tuple(shape))


@dataclass(frozen=True)
class ArenaLayoutAttr(_Discardable):
    """`{inputs = [array<i64: host, offset, shape...>, ...], outputs = [...],
    input_names = ["w", ...]}` (offset `NOT_PACKED` for an array passed as it was)."""

    def get(self, op: Operation) -> ArenaLayout | None:
        attr = op.attributes.get(self.name)
        if not isinstance(attr, DictionaryAttr):
            return None
        inputs, outputs, names = (attr.data[k] for k in ("inputs", "outputs", "input_names"))
        assert isinstance(inputs, ArrayAttr) and isinstance(outputs, ArrayAttr)
        assert isinstance(names, ArrayAttr)
        return ArenaLayout(
            tuple(_slot(a) for a in inputs),
            tuple(_slot(a) for a in outputs),
            tuple(n.data for n in names if isinstance(n, StringAttr)),
        )

    def set(self, op: Operation, layout: ArenaLayout) -> None:
        op.attributes[self.name] = DictionaryAttr(
            {
                "inputs": ArrayAttr([_slot_attr(s) for s in layout.inputs]),
                "outputs": ArrayAttr([_slot_attr(s) for s in layout.outputs]),
                "input_names": ArrayAttr([StringAttr(n) for n in layout.input_names]),
            }
        )


ATTENTION_RESULTS = ("out", "lse", "dq", "dk", "dv")
"""What an attention kernel may compute (`AttentionKernel.computes`)."""


@dataclass(frozen=True)
class AttentionKernel:
    """What a fused attention kernel computes (names of `ATTENTION_RESULTS`, one per
    out-param, in their order), its score scale and whether it is causal. `layouts`: per
    argument (inputs, then results), how it lies in memory: element `x` of the operand the
    kernel computes with is element `(x[p] for p in layout)` of the array passed (`()`:
    as it is; `tess-attention-views` sets them); empty: every argument as it is."""

    computes: tuple[str, ...]
    scale: float
    causal: bool
    layouts: tuple[tuple[int, ...], ...] = ()

    def layout(self, k: int) -> tuple[int, ...]:
        """Argument `k`'s layout (`()`: as it is)."""
        return self.layouts[k] if k < len(self.layouts) else ()


@dataclass(frozen=True)
class AttentionKernelAttr(_Discardable):
    """`{computes = ["out", "lse"], scale = 0.125 : f64, causal = true}`, and
    `layouts = [array<i64: 0, 2, 1, 3>, array<i64>, ...]` where an argument is permuted."""

    def get(self, op: Operation) -> AttentionKernel | None:
        attr = op.attributes.get(self.name)
        if not isinstance(attr, DictionaryAttr):
            return None
        computes, scale, causal = (attr.data[k] for k in ("computes", "scale", "causal"))
        assert isinstance(computes, ArrayAttr) and isinstance(scale, FloatAttr)
        assert isinstance(causal, IntegerAttr)
        names = tuple(c.data for c in computes if isinstance(c, StringAttr))
        layouts = attr.data.get("layouts")
        found: tuple[tuple[int, ...], ...] = ()
        if isinstance(layouts, ArrayAttr):
            found = tuple(tuple(a.get_values()) for a in layouts if isinstance(a, DenseArrayBase))  # type: ignore[misc]
        return AttentionKernel(names, float(scale.value.data), bool(causal.value.data), found)

    def set(self, op: Operation, kernel: AttentionKernel) -> None:
        entries: dict[str, Attribute] = {
            "computes": ArrayAttr([StringAttr(c) for c in kernel.computes]),
            "scale": FloatAttr(kernel.scale, f64),
            "causal": BoolAttr.from_bool(kernel.causal),
        }
        if any(kernel.layouts):
            entries["layouts"] = ArrayAttr(
                [DenseArrayBase.from_list(i64, list(p)) for p in kernel.layouts]
            )
        op.attributes[self.name] = DictionaryAttr(entries)


# ---------------------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------------------

ORIGIN = Str("tess.op")
"""On a `linalg.generic`: the tess op it computes (`"tess.add"`). Written by
`tess-to-linalg`; read by `tess-fuse` and `tess-fuse-epilogue` to name ops in their reports
(`tess.fused`, `tess.grouped`, ...)."""

DONATED = ArgUnit("tess.donated")
"""On a host function's input argument: the caller gives up the array, so an output may be
computed in its storage. Written by the front (`tessc.jit(donate=...)`, textual IR) and by
`tess-fuse-horizontal` (on an arena all of whose members were donated); read by
`tess-fuse-horizontal` (`donated-only`) and `tess-memory-plan` (out-params aliasing
inputs: `tess.aliases_input`)."""

CHUNK_SIZE = Int("tess.chunk_size")
"""On a horizontally fused arena `linalg.generic`, then on its `scf.parallel`: the loop's
scheduling chunk in elements. Written by `tess-fuse-horizontal`; moved to the loop by
`tess-linalg-to-loops`; read by codegen (`tess-to-numba`: a `prange` over chunks)."""

ROW_RANGES = IntArray("tess.row_ranges")
"""On a 2-D `linalg.generic` `(r, i)` (levels 3-4): `array<i64: lo_0, hi_0, lo_1, hi_1, ...>`,
one pair per value of `r`; the generic iterates only `(r, i)` with `lo_r <= i < hi_r` (a
segmented loop: arena chunks, or a segment's chunks), not its whole box. Then on the
`scf.parallel` over `r` it becomes (level 5). Written by `tess-fuse-horizontal` (segmented
reductions); carried by `tess-bufferize` and `tess-outline-kernels`; read by
`tess-memory-plan` (an update by chunks of disjoint ranges writes in place through
`(r, i) -> (i)`), `tess-linalg-to-loops` (an inner loop over each row's range, bounds from
a constant table; never fused with another nest) and codegen (the loop's static work: the
ranges' total). The gpu passes do not read it: the cuda pipeline does not make such
generics."""

ARENA_LAYOUT = ArenaLayoutAttr("tess.arena_layout")
"""On a function `tess-fuse-horizontal` packed into arenas: where each of the caller's
original inputs and results lives (`ArenaLayout`). Written by `tess-fuse-horizontal` (which
also skips a function that has it); kept through bufferization; read by codegen, which
copies it into `TESSC_SIGNATURES["arenas"]` for the runtime."""

NUM_OUTPUTS = Int("tess.num_outputs")
"""On a bufferized function: how many of its trailing memref arguments are out-params
(destination-passing style). Written by `tess-bufferize`; read by `tess-memory-plan` and
codegen, CPU and CUDA (the `TESSC_SIGNATURES` inputs/outputs split)."""

ATTENTION_KERNEL = AttentionKernelAttr("tess.attention_kernel")
"""On a private `func.func` declaration (levels 3-4) that a host calls: a fused attention
kernel to be written (`AttentionKernel`); its arguments are the tess op's operands, its
results (out-params after bufferization) `computes`. Written by `tess-to-linalg`
(`to_linalg_attention.py`); its `layouts` by `tess-attention-views` (cpu: an operand or
result read or written through a permutation instead of a transposing copy); kept by
`tess-bufferize` (which turns the declaration's signature into destination-passing form,
with the memref types its one call passes); read by `tess-attention-kernels`, which gives
the declaration its body and marks it `tess.kernel`, and `tess-gpu-attention` (no
layouts)."""

KERNEL = Unit("tess.kernel")
"""On a `func.func`: a kernel (one loop nest the host calls), not a host. Written by
`tess-outline-kernels` (copied by `tess-gpu-partition` onto the kernels it splits); read by
`tess-linalg-to-loops` (chains of nests share loops only in kernels),
`tess-parallel-columns`, `tess-memory-plan` (plans hosts only), `tess-gpu-partition` and
the gpu passes after it (`gpu_common.kernel_functions`), and codegen (`@njit(parallel=...)`
kernels, no `TESSC_SIGNATURES` entry)."""

ALIASES_INPUT = ArgInt("tess.aliases_input")
"""On a host's out-param argument: the input argument (index) whose donated storage it
reuses. Written by `tess-memory-plan`; read by `tess-merge-aliased-outputs` (cpu: the host's
uses of the out-param become uses of the input) and codegen
(`TESSC_SIGNATURES["output_aliases"]`: the runtime passes that input's array as the out-param)."""

WORKSPACE = ArgUnit("tess.workspace")
"""On a planned host's last argument: the byte arena (`memref<Nxi8>`) its intermediates live
in. Written by `tess-memory-plan` (`workspace-arg=true`); for readers of the IR."""

WORKSPACE_BYTES = Int("tess.workspace_bytes")
"""On a planned host with a workspace argument: its size in bytes. Written by
`tess-memory-plan`; read by `tess-memory-plan` (a caller of an already planned host passes
it a workspace) and codegen (the trailing argument; `TESSC_SIGNATURES["workspace_bytes"]`)."""

GPU_SHAPE = Str("tess.gpu_shape")
"""On a `tess.kernel` function at the gpu level: `"map"`, `"reduce"` or `"rows"`, how it is
launched. Written by `tess-gpu-partition`; read by `tess-gpu-rows`, `tess-gpu-contract`,
`tess-gpu-reduce` and `tess-gpu-map`, each taking the kernels of its shape
(`gpu_common.kernel_functions`)."""

GRID_STRIDE = Unit("tess.grid_stride")
"""On a `gpu.func`: its blocks stride over the work along grid x (`for p = block_id x; ...;
p += grid_dim x`), so any grid x from 1 to its launch's runs it; the launch's grid x is the
most blocks with work (the kernel has no `known_grid_size`). Written by the gpu passes
(`GpuKernel.finish`); read by codegen, which sizes grid x at launch time from the device
(`tessc.runtime.cuda_launch`)."""

UNSIGNED_INDICES = Unit("tess.unsigned_indices")
"""On a `gpu.func`: every `index` value of the kernel is non-negative (thread and block
ids, constants, sums and products of them). Written by `GpuKernel.finish` (any gpu pass,
`gpu_common.non_negative_indices`), `tess-gpu-contract` and `tess-gpu-horizontal`; read by
`to_cuda`, which then counts in `np.uint64`: Numba checks a signed index for Python's
negative wraparound on every access, an unsigned one it does not."""

TILE_SIZES = IntArray("tess.tile_sizes")
"""On a tiled row kernel's `scf.parallel`: its row tile, then each contraction's (TK, TJ).
Written by `tess-tile`, which also skips loops that carry it (tiling once)."""

REGISTER_TILE = IntArray("tess.register_tile")
"""On a tiled row kernel's `scf.parallel`: its register tile (rows, columns). Written by
`tess-tile`; for readers and tests. On a dot-product nest's `scf.parallel`: its (rows,
columns) of jammed outputs, `1, 1` on the leftover nests; written by `tess-tile-dot`, which
skips loops that carry it (tiling once). On `tess-pack-matmul`'s packed nest: its `micro.mma`
tile, read by `tess-row-dots` (it tiles row loops in packed nests), which writes it on the
`scf.for` loops it builds (its tile; `1, 1` on the rows left over) and skips those."""

# The memory plan's figures, written on every planned host by `tess-memory-plan`, in this
# order; `tess.peak_bytes` also marks a host as planned (a re-run skips it). Read by tests
# and `bench/bench_fusion.py`.

PEAK_BYTES = Int("tess.peak_bytes")
"""Static peak of one call's allocations: out-params (less donated ones) plus the arena."""
ARENA_BYTES = Int("tess.arena_bytes")
"""The arena, plus static allocations kept because they escape."""
UNPLANNED_BYTES = Int("tess.unplanned_bytes")
"""`tess.peak_bytes` without the plan: out-params plus every intermediate."""
LIVE_PEAK_BYTES = Int("tess.live_peak_bytes")
"""Out-params plus the most arena bytes live at one op."""
INPUT_BYTES = Int("tess.input_bytes")
"""The inputs' bytes."""
OUTPUT_BYTES = Int("tess.output_bytes")
"""The out-params' bytes."""
ALIASED_BYTES = Int("tess.aliased_bytes")
"""Bytes of out-params backed by donated inputs."""

# Decision reports (`report=true`), for FileCheck tests and readers.

KIND = Str("tess.kind")
"""`tess-fuse`: a generic's pattern kind (`elementwise`, `reduction`, ...)."""
FUSED = StrList("tess.fused")
"""`tess-fuse`: the ops merged into a fused generic, in program order (by `tess.op`); read
back by `tess-fuse` and `tess-fuse-epilogue` to name the merged op in later reports."""
FUSION_REFUSED = Str("tess.fusion_refused")
"""`tess-fuse`: why each remaining producer edge was not fused."""
POOL_FUSED = Str("tess.pool_fused")
"""`tess-fuse` (`pool-windows`): on a pool that computes its conv inside its windows, why
that is sound."""
POOL_REFUSED = Str("tess.pool_refused")
"""`tess-fuse` (`pool-windows`): why a pool does not compute the conv it reads."""
FC_STACKED = Str("tess.fc_stacked")
"""`tess-fuse` (`horizontal-fc`): on a product over stacked left operands, how many
products it computes and how the rows were stacked (a view, or a copy)."""
FC_REFUSED = Str("tess.fc_refused")
"""`tess-fuse` (`horizontal-fc`): why a product sharing its right operand with another
was not stacked with it."""
HORIZONTAL_MEMBERS = Int("tess.horizontal_members")
"""`tess-fuse-horizontal`: how many updates an arena generic computes."""
HORIZONTAL_PROLOGUE = Int("tess.horizontal_prologue")
"""`tess-fuse-horizontal`: how many prologue generics (e.g. Lamb's norms) share a
`kernel.group` with an arena generic."""
HORIZONTAL_REFUSED = Str("tess.horizontal_refused")
"""`tess-fuse-horizontal`: why a top-level generic was not packed."""
GROUPED = StrList("tess.grouped")
"""`tess-fuse-epilogue`: the members of a `kernel.group` (labels as in `tess.fused`)."""
SHARED_LOOPS = Int("tess.shared_loops")
"""`tess-fuse-epilogue`: how many outer loops a group's ops share."""
IN_PLACE = StrList("tess.in_place")
"""`tess-fuse-epilogue`: the group members that write into their input's buffer."""
GROUP_REFUSED = Str("tess.group_refused")
"""`tess-fuse-epilogue`: why an op was not grouped."""

REPORTS = (
    KIND,
    FUSED,
    FUSION_REFUSED,
    POOL_FUSED,
    POOL_REFUSED,
    FC_STACKED,
    FC_REFUSED,
    HORIZONTAL_MEMBERS,
    HORIZONTAL_PROLOGUE,
    HORIZONTAL_REFUSED,
    GROUPED,
    SHARED_LOOPS,
    IN_PLACE,
    GROUP_REFUSED,
)

__all__ = [
    "ALIASED_BYTES",
    "ALIASES_INPUT",
    "ARENA_BYTES",
    "ARENA_LAYOUT",
    "ATTENTION_KERNEL",
    "ATTENTION_RESULTS",
    "AttentionKernel",
    "AttentionKernelAttr",
    "ROW_RANGES",
    "CHUNK_SIZE",
    "DONATED",
    "FUSED",
    "FUSION_REFUSED",
    "GROUPED",
    "GROUP_REFUSED",
    "GPU_SHAPE",
    "FC_REFUSED",
    "FC_STACKED",
    "POOL_FUSED",
    "POOL_REFUSED",
    "GRID_STRIDE",
    "HORIZONTAL_MEMBERS",
    "HORIZONTAL_PROLOGUE",
    "HORIZONTAL_REFUSED",
    "INPUT_BYTES",
    "IN_PLACE",
    "KERNEL",
    "KIND",
    "LIVE_PEAK_BYTES",
    "NOT_PACKED",
    "NUM_OUTPUTS",
    "ORIGIN",
    "OUTPUT_BYTES",
    "PEAK_BYTES",
    "REGISTER_TILE",
    "REPORTS",
    "SHARED_LOOPS",
    "TILE_SIZES",
    "UNPLANNED_BYTES",
    "WORKSPACE",
    "WORKSPACE_BYTES",
    "ArenaLayout",
    "ArenaSlot",
    "ArgInt",
    "ArgUnit",
    "Int",
    "IntArray",
    "Str",
    "StrList",
    "Unit",
]
