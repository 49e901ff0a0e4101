"""
The flat buffers `tessc.distributed` reduces, and the check that every rank has the same.

A `FlatBuffer` holds every gradient of one dtype back to back (members in flatten order, no
padding: the layout `tessc.arena` makes, so the optimizer's horizontally fused step reads
the reduced gradients as its gradient arena, without a copy), then the extra scalars
reduced with them (the loss). The torch tensor over it shares its memory: no copy between
tessc's arrays and torch's (`torch.from_numpy` on the host; on a CUDA device DLPack, or
the CUDA array interface where the array exports no DLPack). `plan_buckets` cuts it into
all-reduces of at most `bucket_bytes`, as DDP's buckets.

`leaf_specs` names each leaf as Python spells it (`grads['w1']`) and `describe_mismatch`
turns the specs all ranks gathered into the error naming the leaf and each rank's shape.
Only NumPy and the pytree here: torch is passed in, so the checks run without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tessc.frontend.pytree import TreeDef
from tessc.runtime.abi import ALIGNMENT
from tessc.runtime.cuda import is_device_array
from tessc.runtime.host_memory import aligned_empty

DEFAULT_BUCKET_BYTES = 25 * 2**20
"""DDP's `bucket_cap_mb` default: a model under 25 MiB of gradients per dtype is one
all-reduce."""


@dataclass(frozen=True)
class LeafSpec:
    """One leaf as every rank must have it."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        return f"{self.shape} {self.dtype}"


def leaf_names(structure: TreeDef, root: str) -> list[str]:
    """The Python spelling of each leaf of `structure` (`root['w1']`, `root[0]`, `root.w`),
    in flatten order."""
    names: list[str] = []

    def walk(node: TreeDef, path: str) -> None:
        kind = node[0]
        if kind in ("leaf", "weak"):
            names.append(path)
        elif kind is dict:
            for key, child in zip(node[1], node[2], strict=True):
                walk(child, f"{path}[{key!r}]")
        elif kind == "object":
            for name, child in zip(node[2], node[3], strict=True):
                walk(child, f"{path}.{name}")
        elif kind == "static":
            return
        else:  # tuple, list, NamedTuple
            for k, child in enumerate(node[-1]):
                walk(child, f"{path}[{k}]")

    walk(structure, root)
    return names


def leaf_specs(structure: TreeDef, leaves: Sequence[Any], root: str) -> list[LeafSpec]:
    names = leaf_names(structure, root)
    return [
        LeafSpec(name, tuple(int(n) for n in leaf.shape), np.dtype(leaf.dtype).name)
        for name, leaf in zip(names, leaves, strict=True)
    ]


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def describe_mismatch(layouts: Sequence[Sequence[LeafSpec]], what: str) -> str | None:
    """None when every rank's `layouts[rank]` is the same; else the error: the first leaf
    whose shape or dtype differs, with each rank's, or a leaf some ranks lack."""
    if all(list(layout) == list(layouts[0]) for layout in layouts):
        return None
    by_name: list[dict[str, LeafSpec]] = [{s.name: s for s in layout} for layout in layouts]
    order = list(dict.fromkeys(s.name for layout in layouts for s in layout))
    for name in order:
        holders: dict[str, list[int]] = {}
        lacking = [r for r, specs in enumerate(by_name) if name not in specs]
        for r, specs in enumerate(by_name):
            if name in specs:
                holders.setdefault(specs[name].describe(), []).append(r)
        if lacking:
            return (
                f"tessc.distributed: the {what} differ across ranks: `{name}` is on "
                f"{_ranks([r for rs in holders.values() for r in rs])} but not on "
                f"{_ranks(lacking)}"
            )
        if len(holders) > 1:
            shapes = " but ".join(f"{spec} on {_ranks(rs)}" for spec, rs in holders.items())
            return (
                f"tessc.distributed: the {what} differ across ranks: `{name}` is {shapes} "
                "(every rank must build the same model)"
            )
    return f"tessc.distributed: the {what} are in a different order across ranks"


def plan_buckets(size: int, itemsize: int, bucket_bytes: int) -> list[tuple[int, int]]:
    """[start, stop) element ranges of at most `bucket_bytes` covering `size` elements
    (one range when it all fits; a bucket may cut a leaf, the sum is elementwise)."""
    if bucket_bytes < itemsize:
        raise ValueError(f"bucket_bytes={bucket_bytes} is smaller than one element")
    per_bucket = bucket_bytes // itemsize
    return [(start, min(start + per_bucket, size)) for start in range(0, size, per_bucket)] or [
        (0, 0)
    ]


class FlatBuffer:
    """Leaves of one dtype back to back, then `extras` scalar slots, in one buffer that
    tessc (`array`, `views`) and torch (`tensor`) share.

    On the host the buffer is `ALIGNMENT`-aligned NumPy memory; with `device`, a Numba
    device array on the current CUDA device.
    """

    def __init__(
        self,
        dtype: np.dtype,
        shapes: Sequence[tuple[int, ...]],
        extras: int,
        device: bool,
        torch: Any,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ):
        self.dtype = np.dtype(dtype)
        self.device = device
        offsets = np.cumsum([0, *(int(np.prod(s, dtype=np.int64)) for s in shapes)])
        self.size = int(offsets[-1]) + extras
        if device:
            from numba import cuda

            self.array = cuda.device_array(self.size, dtype=self.dtype)
        else:
            raw = aligned_empty(self.size * self.dtype.itemsize, ALIGNMENT)
            self.array = raw.view(self.dtype)
        self.spans = [
            (int(a), int(b), tuple(shape))
            for a, b, shape in zip(offsets[:-1], offsets[1:], shapes, strict=True)
        ]
        self.views = self.fresh_views()
        first_extra = int(offsets[-1])
        self.extra_views = [self.array[k : k + 1] for k in range(first_extra, self.size)]
        self.tensor = torch_view(self.array, torch)
        self.buckets = plan_buckets(self.size, self.dtype.itemsize, bucket_bytes)

    def fresh_views(self) -> list[Any]:
        """New array objects over the leaves' spans (the same memory as `views`)."""
        return [self.array[a:b].reshape(shape) for a, b, shape in self.spans]

    def pack(self, leaves: Sequence[Any], extras: Sequence[Any]) -> int:
        """Copy `leaves` and `extras` in; a leaf already at its place in the buffer (a
        gradient the compiled step computed in a donated view) is not copied. Returns the
        number of leaves copied."""
        moved = [
            (view, leaf)
            for view, leaf in zip(self.views, leaves, strict=True)
            if data_address(leaf) != data_address(view)
        ]
        if self.device:
            for view, leaf in moved:
                view.copy_to_device(leaf)
            for view, extra in zip(self.extra_views, extras, strict=True):
                if is_device_array(extra):
                    view.copy_to_device(extra.reshape(1))
                else:
                    view.copy_to_device(np.asarray(extra, dtype=self.dtype).reshape(1))
            return len(moved)
        for view, leaf in moved:
            np.copyto(view, leaf, casting="no")
        for view, extra in zip(self.extra_views, extras, strict=True):
            view[0] = extra
        return len(moved)

    def extras_on_host(self) -> list[np.ndarray]:
        """The extra slots, copied out as 0-d host arrays (the buffer is reused next step)."""
        if not self.extra_views:
            return []
        first = self.size - len(self.extra_views)
        tail = self.array[first:]
        values = tail.copy_to_host() if self.device else tail.copy()
        return [values[k].reshape(()) for k in range(len(values))]


def data_address(array: Any) -> int | None:
    """Where `array`'s data starts (device or host memory), or None for a non-array."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is None:
        interface = getattr(array, "__array_interface__", None)
    return int(interface["data"][0]) if interface is not None else None


def torch_view(array: Any, torch: Any) -> Any:
    """A torch tensor sharing `array`'s memory (raises if torch would copy)."""
    if not is_device_array(array):
        if array.dtype.name == "bfloat16":  # ml_dtypes' type, which NumPy knows as void
            tensor = torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        else:
            tensor = torch.from_numpy(array)
        if tensor.data_ptr() != array.ctypes.data:  # pragma: no cover - from_numpy never copies
            raise RuntimeError("torch.from_numpy copied the gradient buffer")
        return tensor
    if hasattr(array, "__dlpack__"):
        return torch.from_dlpack(array)
    # Numba's device arrays export the CUDA array interface, which torch wraps in place.
    return torch.as_tensor(array, device=f"cuda:{torch.cuda.current_device()}")


__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "FlatBuffer",
    "LeafSpec",
    "data_address",
    "describe_mismatch",
    "leaf_names",
    "leaf_specs",
    "plan_buckets",
    "torch_view",
]
