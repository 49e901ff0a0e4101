"""
Launch configurations from the device, and the launch counter.

Generated CUDA host code asks here for every launch's grid: `strided_grid(x, y, z, threads)`
for a kernel whose blocks stride over its work along x (`tess.grid_stride`; `x` is the most
blocks with work), `fixed_grid(x, y, z)` for the others. A strided grid gets
`min(x, multiprocessors * blocks per multiprocessor)` blocks: as many as the device keeps
resident at once for blocks of `threads` threads (its thread and block limits per
multiprocessor), so a large elementwise or reduction launch fills every SM once and its
grid-stride loop covers the rest. The limits are read from the current device once per
process; Numba's simulator has no device attributes, so it gets `SIMULATOR_LIMITS` (small:
the simulator runs every thread as a Python thread). Tests replace `LAUNCH.limits`.

`LAUNCH.count` counts launches (each asks for its grid once), so tests count launches per
call without timing anything; `LAUNCH.grids`, when a list, records each grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceLimits:
    multiprocessors: int
    threads_per_multiprocessor: int
    blocks_per_multiprocessor: int

    def resident_blocks(self, threads: int) -> int:
        """Blocks of `threads` threads the whole device runs at once (at least one)."""
        per_multiprocessor = min(
            self.blocks_per_multiprocessor, self.threads_per_multiprocessor // max(threads, 1)
        )
        return max(1, self.multiprocessors * max(per_multiprocessor, 1))


SIMULATOR_LIMITS = DeviceLimits(
    multiprocessors=2, threads_per_multiprocessor=512, blocks_per_multiprocessor=16
)


def read_device_limits() -> DeviceLimits:
    """The current CUDA device's limits (the simulator's stand-in under `NUMBA_ENABLE_CUDASIM`)."""
    from numba import config, cuda

    if getattr(config, "ENABLE_CUDASIM", 0):
        return SIMULATOR_LIMITS
    device: Any = cuda.get_current_device()
    return DeviceLimits(
        int(device.MULTIPROCESSOR_COUNT),
        int(device.MAX_THREADS_PER_MULTI_PROCESSOR),
        int(getattr(device, "MAX_BLOCKS_PER_MULTIPROCESSOR", 16)),
    )


class LaunchState:
    """The device limits (read on first use), the launch count, the optional grid log."""

    def __init__(self) -> None:
        self.limits: DeviceLimits | None = None
        self.count = 0
        self.grids: list[tuple[int, int, int]] | None = None

    def device_limits(self) -> DeviceLimits:
        if self.limits is None:
            self.limits = read_device_limits()
        return self.limits


LAUNCH = LaunchState()


def strided_grid(x: int, y: int, z: int, threads: int) -> tuple[int, int, int]:
    """The grid of a grid-stride launch with at most `x` blocks of `threads` threads with work
    along x: what the device runs at once, if fewer."""
    grid = (min(x, LAUNCH.device_limits().resident_blocks(threads)), y, z)
    LAUNCH.count += 1
    if LAUNCH.grids is not None:
        LAUNCH.grids.append(grid)
    return grid


def fixed_grid(x: int, y: int, z: int) -> tuple[int, int, int]:
    """The grid of a launch whose blocks each own fixed work (a matmul's tiles)."""
    LAUNCH.count += 1
    if LAUNCH.grids is not None:
        LAUNCH.grids.append((x, y, z))
    return x, y, z


__all__ = [
    "LAUNCH",
    "SIMULATOR_LIMITS",
    "DeviceLimits",
    "LaunchState",
    "fixed_grid",
    "read_device_limits",
    "strided_grid",
]
