"""
The register tile of a contraction's micro-kernel for the host's vector width, and its
operands read in place: shared by `tess-pack-matmul` and `tess-row-dots`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, NoneAttr
from xdsl.ir import Operation, SSAValue

from tessc.lowering.buffers.arena_layout import memref_bytes
from tessc.lowering.linalg.generic_analysis import depends_on
from tessc.lowering.loops.index_emitter import Emitter, IndexValue


def host_vector_bits() -> int:
    """The widest float vector Numba will compile for: 512 (AVX-512F), 256 (AVX2 + FMA) or
    128. `NUMBA_CPU_FEATURES` (what Numba targets when set) wins over the host's CPU flags
    (`/proc/cpuinfo`; lowering imports no compiler library); 256 where neither is known."""
    features = os.environ.get("NUMBA_CPU_FEATURES", "")
    if features:
        enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    else:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
                flags = next((line for line in info if line.startswith("flags")), "")
        except OSError:
            return 256
        if not flags:
            return 256
        enabled = set(flags.partition(":")[2].split())
    if "avx512f" in enabled:
        return 512
    return 256 if {"avx2", "fma"} <= enabled else 128


def register_tile(vector_bits: int, element_bits: int) -> tuple[int, int, int]:
    """(MR, NR, lanes) for the vector width (`tess-pack-matmul`'s module docstring)."""
    lanes = max(1, vector_bits // element_bits)
    if vector_bits >= 512:
        return 8, 2 * lanes, lanes
    if vector_bits >= 256:
        return 6, 2 * lanes, lanes
    return 4, 2 * lanes, lanes


def accumulator_registers(vector_bits: int) -> int:
    """Vector registers the target has (32 zmm with AVX-512, 16 ymm or xmm otherwise)."""
    return 32 if vector_bits >= 512 else 16


def max_tile_rows(vector_bits: int, tile: tuple[int, int, int]) -> int:
    """The tallest register tile of `tile`'s width whose accumulators, B vectors and
    broadcast A value fit in the registers: a product of that few rows is one tile tall."""
    _, nr, lanes = tile
    vectors = nr // lanes
    return max(1, (accumulator_registers(vector_bits) - vectors - 1) // vectors)


@dataclass(frozen=True)
class InPlace:
    """An operand the micro-kernel can read where it lies: one load of an identity-layout
    memref of static shape, `outer` and `inner` (i and k of the left-hand side, k and j of
    the right-hand one) each one of its indices, its other indices moving with neither."""

    memref: SSAValue
    indices: tuple[SSAValue, ...]
    strides: tuple[int, ...]  # the memref's element strides
    outer_stride: int
    inner_stride: int
    bytes: int

    def offset(self, e: Emitter, at: Mapping[SSAValue, IndexValue]) -> IndexValue:
        """The element offset, in the memref, of the entry the load's indices name with
        each replaced by its value in `at` where it has one (the tile's first row and k)."""
        total: IndexValue = 0
        for index, stride in zip(self.indices, self.strides, strict=True):
            total = e.add(total, e.mul(at.get(index, index), stride))
        return total


def in_place_operand(
    ops: Sequence[Operation],
    value: SSAValue,
    outer: SSAValue,
    inner: SSAValue,
    loops: Sequence[SSAValue],
) -> InPlace | None:
    """`value` as an `InPlace` operand, if `ops` (what computes it) is one such load."""
    if len(ops) != 1 or not isinstance(load := ops[0], memref.LoadOp) or load.res is not value:
        return None
    typ = load.memref.type
    if not isinstance(typ, MemRefType) or not isinstance(typ.layout, NoneAttr):
        return None
    if (size := memref_bytes(typ)) is None or (strides := typ.get_strides()) is None:
        return None  # a dynamic shape
    indices = tuple(load.indices)
    at_outer = [d for d, v in enumerate(indices) if v is outer]
    at_inner = [d for d, v in enumerate(indices) if v is inner]
    others = [v for v in indices if v is not outer and v is not inner]
    if len(at_outer) != 1 or len(at_inner) != 1:
        return None
    if any(depends_on(v, loop) for v in others for loop in loops):
        return None
    return InPlace(load.memref, indices, strides, strides[at_outer[0]], strides[at_inner[0]], size)


__all__ = [
    "InPlace",
    "accumulator_registers",
    "host_vector_bits",
    "in_place_operand",
    "max_tile_rows",
    "register_tile",
]
