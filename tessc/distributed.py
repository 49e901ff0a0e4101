"""
`tessc.distributed`: data-parallel training on `torch.distributed` (gloo on the CPU, NCCL
for the cuda target). Run the script under `torchrun --nproc_per_node=N`:

    ts.distributed.init(target="cpu")              # reads torchrun's RANK, WORLD_SIZE, ...
    params = ts.distributed.broadcast(params)       # rank 0's values, on every rank
    reducer = ts.distributed.GradientReducer()
    step = ts.jit(grad_step, donate_argnums=(1,))  # grad_step(params, out, x, y): `out`
    for idx in batches:                             # unread, the gradients go there
        out = reducer.gradient_buffers(params, scalars=1)
        mine = ts.distributed.shard(idx)            # this rank's share of the batch
        loss, grads = step(params, out, x[mine], y[mine])
        grads, loss = reducer(grads, loss)          # mean over the ranks
        params, state = opt.step(params, grads, state)

Each rank computes the gradients of its shard into one flat buffer per dtype (the loss in
its last slot), and `GradientReducer` sums it with ONE all-reduce per step (bucketed by
`bucket_mb`, as DDP, when larger) over a torch tensor sharing its memory. Gradients that
were computed elsewhere are copied in first. The reduced gradients are views of the buffer
in `tessc.arena`'s layout, so the optimizer's fused step reads them without a copy either.
The first call checks that every rank has the same leaves (`ValueError` naming a leaf and
each rank's shape); a failed collective names the dead rank (`RankFailure`).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np

from tessc.distributed_failures import RankFailure, guarded
from tessc.distributed_layout import (
    DEFAULT_BUCKET_BYTES,
    FlatBuffer,
    LeafSpec,
    describe_mismatch,
    leaf_specs,
)
from tessc.frontend.pytree import flatten_tree, unflatten_tree
from tessc.runtime.cuda import is_device_array

Pytree = Any
DEFAULT_BUCKET_MB = DEFAULT_BUCKET_BYTES / 2**20


def _torch() -> tuple[Any, Any]:
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise ImportError(
            "tessc.distributed runs on torch.distributed: pip install -e '.[distributed]' "
            "(torch==2.13.0)"
        ) from None
    if not dist.is_available():
        raise ImportError("this torch build has no torch.distributed")
    return torch, dist


@dataclass
class Group:
    """The process group `init` joined: this rank, the world, the rendezvous store (for the
    roll call, `tessc.distributed_failures`), the collective timeout."""

    rank: int
    world: int
    local_rank: int
    backend: str
    store: Any
    timeout_s: float
    sequence: int = 0
    """Collectives issued so far: the same on every rank while they agree."""

    def guarded(self, what: str) -> Any:
        self.sequence += 1
        answer_s = min(5.0, self.timeout_s / 2)
        return guarded(what, self.store, self.rank, self.world, self.sequence, answer_s)


_group: Group | None = None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init(target: str = "cpu", timeout: float = 60.0, backend: str | None = None) -> Group:
    """Join the process group torchrun describes (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
    `MASTER_ADDR`, `MASTER_PORT`); without them, a group of one process. `backend`:
    `nccl` for `target="cuda"` (each rank on GPU `LOCAL_RANK`), else `gloo`. A collective
    that waits longer than `timeout` seconds for a rank fails, naming it."""
    global _group
    torch, dist = _torch()
    if not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"invalid timeout: {timeout!r} (seconds, > 0)")
    if _group is not None:
        return _group
    environ = os.environ
    rank = int(environ.get("RANK", "0"))
    world = int(environ.get("WORLD_SIZE", "1"))
    local_rank = int(environ.get("LOCAL_RANK", str(rank)))
    backend = backend or ("nccl" if target == "cuda" else "gloo")
    if target == "cuda":
        from numba import cuda

        cuda.select_device(local_rank)
        torch.cuda.set_device(local_rank)
    if dist.is_initialized():  # the caller's group: adopt it (its store, if torch shows it)
        getter = getattr(dist.distributed_c10d, "_get_default_store", None)
        store = dist.PrefixStore("tessc", getter()) if getter else None
        _group = Group(dist.get_rank(), dist.get_world_size(), local_rank, backend, store, timeout)
        return _group
    if world == 1 and "MASTER_PORT" not in environ:
        address, port = "127.0.0.1", _free_port()
    elif "MASTER_PORT" in environ:
        address = environ.get("MASTER_ADDR", "127.0.0.1")
        port = int(environ["MASTER_PORT"])
    else:
        raise RuntimeError(
            f"tessc.distributed.init: WORLD_SIZE={world} but no MASTER_PORT; start the "
            "processes with torchrun (or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"
        )
    # As torch's env:// rendezvous: torchrun's agent hosts the store when it says so
    # (then the store outlives any worker), else rank 0 does.
    agent_store = environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(
        address,
        port,
        world,
        is_master=rank == 0 and not agent_store,
        timeout=timedelta(seconds=timeout),
        multi_tenant=True,
    )
    attempt = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(
        backend,
        store=dist.PrefixStore(f"default_pg/{attempt}", store),
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout),
    )
    tessc_store = dist.PrefixStore(f"tessc/{attempt}", store)
    _group = Group(rank, world, local_rank, backend, tessc_store, float(timeout))
    return _group


def shutdown() -> None:
    """Leave the process group (`init` may be called again)."""
    global _group
    if _group is None:
        return
    _, dist = _torch()
    if dist.is_initialized():
        dist.destroy_process_group()
    _group = None


def group() -> Group:
    if _group is None:
        raise RuntimeError("tessc.distributed: call ts.distributed.init() first")
    return _group


def rank() -> int:
    """This process's rank (0 when `init` was not called)."""
    return _group.rank if _group is not None else 0


def world_size() -> int:
    """The number of processes (1 when `init` was not called)."""
    return _group.world if _group is not None else 1


def is_main() -> bool:
    """Whether this is rank 0, the one that prints and plots."""
    return rank() == 0


def shard(batch: Any) -> Any:
    """This rank's contiguous share of `batch` (indices or samples along axis 0). Equal
    shares, so that the mean of the ranks' mean losses is the global batch's mean."""
    world, me = world_size(), rank()
    length = len(batch)
    if length % world:
        raise ValueError(
            f"tessc.distributed.shard: a batch of {length} does not split into {world} equal "
            "shares; use a global batch size divisible by the number of processes"
        )
    share = length // world
    return batch[me * share : (me + 1) * share]


def _is_leaf(value: Any) -> bool:
    return isinstance(value, np.ndarray | np.generic) or is_device_array(value)


class _Layout:
    """The flat buffers of one pytree's leaves, one per dtype (first appearance order).
    The extra scalars (the loss) ride in the widest buffer, or in a float32 one of their
    own when every leaf is 16-bit (a bfloat16 loss would lose its digits)."""

    def __init__(
        self,
        specs: list[LeafSpec],
        dtypes: dict[str, np.dtype],
        extras: int,
        device: bool,
        torch: Any,
        bucket_bytes: int,
    ):
        self.specs = specs
        self.members = {d: [k for k, s in enumerate(specs) if s.dtype == d] for d in dtypes}
        self.extras_dtype = max(dtypes, key=lambda d: dtypes[d].itemsize)
        if extras and dtypes[self.extras_dtype].itemsize < 4:
            self.extras_dtype = "float32"
            dtypes = {**dtypes, "float32": np.dtype(np.float32)}
            self.members.setdefault("float32", [])
        self.buffers = {
            d: FlatBuffer(
                dtypes[d],
                [specs[k].shape for k in members],
                extras if d == self.extras_dtype else 0,
                device,
                torch,
                bucket_bytes,
            )
            for d, members in self.members.items()
        }

    def pack(self, leaves: list[Any], extras: tuple[Any, ...]) -> int:
        """Copy the leaves not already in place; returns how many were copied."""
        copied = 0
        for d, members in self.members.items():
            mine = extras if d == self.extras_dtype else ()
            copied += self.buffers[d].pack([leaves[k] for k in members], mine)
        return copied

    def views(self, fresh: bool = False) -> list[Any]:
        """Every leaf's view, in flatten order (new array objects with `fresh`)."""
        out: list[Any] = [None] * len(self.specs)
        for d, members in self.members.items():
            buffer = self.buffers[d]
            views = buffer.fresh_views() if fresh else buffer.views
            for k, view in zip(members, views, strict=True):
                out[k] = view
        return out


class _Collective:
    """A layout fixed at the first call, after checking it is every rank's."""

    what = "gradients"
    root = "grads"
    """How the error messages name the pytree and its leaves (`grads['w1']`)."""

    def __init__(self, bucket_mb: float = DEFAULT_BUCKET_MB):
        if not isinstance(bucket_mb, int | float) or not bucket_mb > 0:
            raise ValueError(f"invalid bucket_mb: {bucket_mb!r} (MiB, > 0)")
        self.bucket_bytes = int(bucket_mb * 2**20)
        self._key: tuple | None = None
        self._layout: _Layout | None = None
        self.structure: Any = None
        self.collectives = 0
        """All-reduces (or broadcasts) issued so far: one per bucket per call."""

    def prepare(self, tree: Pytree, extras: tuple[Any, ...]) -> tuple[_Layout, list[Any]]:
        torch, dist = _torch()
        structure, pairs = flatten_tree(tree, _is_leaf, self.what)
        leaves = [leaf for _, leaf in pairs]
        if not leaves:
            raise ValueError(f"tessc.distributed: no arrays in the {self.what}")
        devices = {is_device_array(leaf) for leaf in leaves}
        if len(devices) > 1:
            raise TypeError(f"tessc.distributed: the {self.what} mix host and device arrays")
        specs = leaf_specs(structure, leaves, self.root)
        key = (structure, tuple(specs), len(extras), devices.pop())
        if self._key == key:
            assert self._layout is not None
            return self._layout, leaves
        if self._key is not None:
            raise ValueError(
                f"tessc.distributed: the {self.what} (or the number of scalars reduced with "
                "them) changed since the first call; a reducer's layout is fixed (make a new "
                "one on every rank)"
            )
        g = group()
        layouts: list[Any] = [None] * g.world
        with g.guarded(f"checking the {self.what}' shapes"):
            dist.all_gather_object(layouts, specs)
        mismatch = describe_mismatch(layouts, self.what)
        if mismatch is not None:
            raise ValueError(mismatch)
        dtypes = {s.dtype: np.dtype(leaf.dtype) for s, leaf in zip(specs, leaves, strict=True)}
        self._layout = _Layout(specs, dtypes, len(extras), key[3], torch, self.bucket_bytes)
        self._key, self.structure = key, structure
        return self._layout, leaves

    @property
    def buffers(self) -> list[FlatBuffer]:
        """The flat buffers (one per dtype), empty before the first call."""
        return list(self._layout.buffers.values()) if self._layout is not None else []


class GradientReducer(_Collective):
    """`reducer(grads, *scalars)`: the mean (or, with `average=False`, the sum) over all
    ranks of the pytree `grads` and of each scalar (e.g. the loss), by one all-reduce per
    bucket of `bucket_mb` MiB (DDP's default: 25) over a flat buffer per dtype.

    Returns the reduced gradients, views of the reducer's buffer valid until its next call
    (in `tessc.arena`'s layout: the optimizer step reads them without a copy), followed by
    the scalars as 0-d NumPy arrays; just the gradients when no scalar is given."""

    def __init__(self, average: bool = True, bucket_mb: float = DEFAULT_BUCKET_MB):
        super().__init__(bucket_mb)
        self.average = bool(average)
        self.copied = 0
        """Gradients the last call copied into the buffer (0 when all were computed in
        `gradient_buffers`)."""

    def gradient_buffers(self, like: Pytree, scalars: int = 0) -> Pytree:
        """Views of the flat buffer shaped like `like` (the parameters): give them to the
        jitted gradient step as a donated argument it does not read, and the compiled step
        computes each gradient in its view, so nothing is copied before the all-reduce.
        `scalars`: how many scalars the calls will reduce with the gradients. New array
        objects each call (a donated view the step did not use is marked donated)."""
        layout, _ = self.prepare(like, (None,) * scalars)
        return unflatten_tree(self.structure, layout.views(fresh=True))

    def __call__(self, grads: Pytree, *scalars: Any) -> Any:
        _, dist = _torch()
        layout, leaves = self.prepare(grads, scalars)
        self.copied = layout.pack(leaves, scalars)
        g = group()
        with g.guarded("the gradient all-reduce"):
            works = []
            for buffer in layout.buffers.values():
                for start, stop in buffer.buckets:
                    bucket = buffer.tensor[start:stop]
                    works.append(dist.all_reduce(bucket, async_op=True))
            self.collectives += len(works)
            for work in works:
                work.wait()
        if self.average and g.world > 1:
            for buffer in layout.buffers.values():
                buffer.tensor.div_(g.world)
        if g.backend == "nccl":  # Numba launches next, on its own stream
            import torch

            torch.cuda.current_stream().synchronize()
        reduced = unflatten_tree(self.structure, layout.views())
        if not scalars:
            return reduced
        return (reduced, *layout.buffers[layout.extras_dtype].extras_on_host())


def broadcast(tree: Pytree, src: int = 0, bucket_mb: float = DEFAULT_BUCKET_MB) -> Pytree:
    """`tree` as rank `src` has it, on every rank (after checking every rank's leaves have
    the same shapes): new arrays, views of one buffer per dtype (`tessc.arena`'s layout)."""
    _, dist = _torch()
    collective = _Collective(bucket_mb)
    collective.what, collective.root = "parameters", "params"
    layout, leaves = collective.prepare(tree, ())
    layout.pack(leaves, ())
    with group().guarded(f"broadcasting the parameters from rank {src}"):
        for buffer in layout.buffers.values():
            for start, stop in buffer.buckets:
                dist.broadcast(buffer.tensor[start:stop], src=src)
    return unflatten_tree(collective.structure, layout.views())


__all__ = [
    "GradientReducer",
    "Group",
    "RankFailure",
    "broadcast",
    "group",
    "init",
    "is_main",
    "rank",
    "shard",
    "shutdown",
    "world_size",
]
