"""
A test oracle for the gpu level: runs a host function of a gpu-level module on NumPy arrays,
every thread of every block of every launch, in Python.

Threads are generators that stop at each `gpu.barrier`; a block runs until every thread
has reached the barrier (or all have returned), so a kernel that needs a barrier it lacks
reads stale workgroup memory, and a barrier only some threads reach raises. Shared memory
(a `gpu.func`'s workgroup attributions, or `#gpu.address_space<workgroup>` allocas) is one
array per block, filled with NaN so a read before any write shows. Scalar ops evaluate the
CPU emitter's own templates (`tessc.lowering.codegen.numba_ops`), so the arithmetic is the
generated code's. Slow (~µs per op per thread): small shapes only. The cuda-runtime's
simulator tests run the real emitter; this checks the IR on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Block, Operation, SSAValue

from tessc.dialects import contract
from tessc.dialects.gpu_memory import is_workgroup
from tessc.lowering.codegen.numba_ops import _CMPF, _CMPI, EXPRESSIONS, dtype_name

Env = dict[SSAValue, Any]
Thread = Generator[None, None, Any]


def poisoned(shape: Sequence[int], dtype: str) -> np.ndarray:
    """An array whose unwritten elements show: NaN for floats, a sentinel for integers."""
    fill = np.nan if np.dtype(dtype).kind == "f" else -7
    return np.full(shape, fill, dtype=dtype)


def _ctor(typ: Any) -> str:
    return "int" if isinstance(typ, IndexType) else f"np.{dtype_name(typ)}"


_COMPILED: dict[Operation, Callable[..., Any]] = {}
"""Per op (held, so no other op can reuse its id while the cache lives)."""


def _scalar_fn(op: Operation) -> Callable[..., Any]:
    key = op
    if key not in _COMPILED:
        if isinstance(op, arith.CmpfOp):
            template = _CMPF[arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]]
        elif isinstance(op, arith.CmpiOp):
            predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            template = f"{{0}} {_CMPI[predicate]} {{1}}"
        else:
            template = EXPRESSIONS[op.name]
        names = [f"a{k}" for k in range(len(op.operands))]
        result = op.results[0].type
        source = op.operands[0].type if op.operands else result
        text = template.format(*names, T=_ctor(result), S=_ctor(source), one=f"{_ctor(result)}(1)")
        if isinstance(result, AnyFloat) or (
            not isinstance(result, IndexType) and result.name == "integer_type"
        ):
            text = f"{_ctor(result)}({text})"
        _COMPILED[key] = eval(f"lambda {', '.join(names)}: {text}", {"np": np, "math": math})
    return _COMPILED[key]


def _constant(op: arith.ConstantOp) -> Any:
    value = op.value
    if isinstance(value, FloatAttr):
        return getattr(np, dtype_name(value.type))(value.value.data)
    assert isinstance(value, IntegerAttr)
    if isinstance(value.type, IndexType):
        return int(value.value.data)
    if value.type.width.data == 1:
        return bool(value.value.data)
    return getattr(np, dtype_name(value.type))(value.value.data)


class Block3:
    """One block's shared memory and ids."""

    def __init__(self, block_id: tuple[int, int, int], grid: Sequence[int], threads: Sequence[int]):
        self.block_id = block_id
        self.grid = tuple(grid)
        self.threads = tuple(threads)
        self.shared: dict[int, np.ndarray] = {}


def _run_block(block: Block, env: Env, ctx: Block3, tid: tuple[int, int, int]) -> Thread:
    """Run `block`'s ops; the generator's return value is the terminator's operands."""
    for op in block.ops:
        if isinstance(op, scf.YieldOp | gpu.ReturnOp):
            return [env[v] for v in op.operands]
        if isinstance(op, gpu.BarrierOp):
            yield None
            continue
        if isinstance(op, scf.ForOp):
            lb, ub, step = env[op.lb], env[op.ub], env[op.step]
            carried = [env[v] for v in op.iter_args]
            body = op.body.block
            for i in range(lb, ub, step):
                env[body.args[0]] = i
                for arg, value in zip(body.args[1:], carried, strict=True):
                    env[arg] = value
                carried = yield from _run_block(body, env, ctx, tid)
            for result, value in zip(op.results, carried, strict=True):
                env[result] = value
            continue
        if isinstance(op, scf.IfOp):
            region = op.true_region if env[op.cond] else op.false_region
            values = (yield from _run_block(region.block, env, ctx, tid)) if region.blocks else []
            for result, value in zip(op.results, values, strict=True):
                env[result] = value
            continue
        _run_op(op, env, ctx, tid)
    return []


_IDS = {
    "gpu.thread_id": lambda ctx, tid: tid,
    "gpu.block_id": lambda ctx, tid: ctx.block_id,
    "gpu.block_dim": lambda ctx, tid: ctx.threads,
    "gpu.grid_dim": lambda ctx, tid: ctx.grid,
}


def _run_op(op: Operation, env: Env, ctx: Block3, tid: tuple[int, int, int]) -> None:
    if isinstance(op, arith.ConstantOp):
        env[op.result] = _constant(op)
    elif op.name in _IDS:
        dim = "xyz".index(str(op.dimension.data))  # type: ignore[attr-defined]
        env[op.results[0]] = _IDS[op.name](ctx, tid)[dim]
    elif isinstance(op, memref.LoadOp):
        env[op.res] = env[op.memref][tuple(env[i] for i in op.indices)]
    elif isinstance(op, memref.StoreOp):
        env[op.memref][tuple(env[i] for i in op.indices)] = env[op.value]
    elif isinstance(op, memref.AllocaOp):
        typ = op.memref.type
        assert isinstance(typ, MemRefType) and is_workgroup(typ), "only workgroup allocas"
        if id(op) not in ctx.shared:
            ctx.shared[id(op)] = poisoned(typ.get_shape(), dtype_name(typ.element_type))
        env[op.memref] = ctx.shared[id(op)]
    else:
        env[op.results[0]] = _scalar_fn(op)(*[env[v] for v in op.operands])


def run_kernel(
    kernel: gpu.FuncOp, grid: Sequence[int], threads: Sequence[int], args: Sequence[Any]
) -> None:
    body = kernel.body.block
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                ctx = Block3((bx, by, bz), grid, threads)
                # Workgroup attributions: one array per block, shared by its threads.
                shared = [
                    poisoned(arg.type.get_shape(), dtype_name(arg.type.element_type))
                    for arg in body.args[len(args) :]
                    if isinstance(arg.type, MemRefType) and is_workgroup(arg.type)
                ]
                block_args = [*args, *shared]
                running: list[Thread] = []
                for tz in range(threads[2]):
                    for ty in range(threads[1]):
                        for tx in range(threads[0]):
                            env: Env = dict(zip(body.args, block_args, strict=True))
                            running.append(_run_block(body, env, ctx, (tx, ty, tz)))
                while running:
                    waiting: list[Thread] = []
                    for thread in running:
                        try:
                            next(thread)
                            waiting.append(thread)
                        except StopIteration:
                            pass
                    if waiting and len(waiting) != len(running):
                        raise AssertionError(f"@{kernel.sym_name.data}: divergent gpu.barrier")
                    running = waiting


GRID_STRIDE_BLOCKS = 2
"""The grid x the interpreter runs a `tess.grid_stride` kernel with, if it has more work."""


def run_host(module: ModuleOp, name: str, args: Sequence[np.ndarray]) -> None:
    """Run host `@name` on `args` (its inputs, out-params and workspace), in place."""
    host = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == name)
    kernels = {
        k.sym_name.data: k
        for m in module.ops
        if isinstance(m, gpu.ModuleOp)
        for k in m.body.block.ops
        if isinstance(k, gpu.FuncOp)
    }
    env: Env = dict(zip(host.body.block.args, args, strict=True))
    for op in host.body.block.ops:
        if isinstance(op, gpu.LaunchFuncOp):
            sizes = [env[v] for v in op.operands[:6]]
            kernel = kernels[op.kernel.nested_references.data[0].data]
            if contract.GRID_STRIDE.has(kernel):
                # Any grid x runs a grid-stride kernel: the runtime sizes it to the device,
                # so run it with fewer blocks than it has work for (each loops more).
                sizes[0] = min(sizes[0], GRID_STRIDE_BLOCKS)
            run_kernel(kernel, sizes[:3], sizes[3:], [env[v] for v in op.kernelOperands])
        elif isinstance(op, memref.AllocOp):
            typ = op.memref.type
            env[op.memref] = poisoned(typ.get_shape(), dtype_name(typ.element_type))
        elif isinstance(op, memref.ViewOp):
            typ = op.result.type
            dtype = np.dtype(dtype_name(typ.element_type))
            offset = env[op.byte_shift]
            size = dtype.itemsize * math.prod(typ.get_shape())
            window = env[op.source][offset : offset + size]
            env[op.result] = window.view(dtype).reshape(typ.get_shape())
        elif isinstance(op, memref.CollapseShapeOp | memref.ExpandShapeOp):
            env[op.results[0]] = env[op.operands[0]].reshape(op.results[0].type.get_shape())
        elif isinstance(op, memref.SubviewOp):
            dynamic = iter(env[v] for v in (*op.offsets, *op.sizes, *op.strides))
            offsets, sizes, strides = (
                [next(dynamic) if x < -(2**62) else x for x in a.get_values()]
                for a in (op.static_offsets, op.static_sizes, op.static_strides)
            )
            window = env[op.source][
                tuple(
                    slice(o, o + n * st if o + n * st >= 0 else None, st)
                    for o, n, st in zip(offsets, sizes, strides, strict=True)
                )
            ]
            env[op.result] = window.reshape(op.result.type.get_shape())
        elif isinstance(op, memref.CopyOp):
            env[op.destination][...] = env[op.source]
        elif isinstance(op, arith.ConstantOp):
            env[op.result] = _constant(op)
        elif isinstance(op, memref.DeallocOp | func.ReturnOp):
            pass
        else:
            raise NotImplementedError(f"host op {op.name}")


__all__ = ["poisoned", "run_host", "run_kernel"]
