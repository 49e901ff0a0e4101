"""
Codegen's choice of parallel form: a Numba parfor (`prange` under `parallel=True`), or a
threaded kernel launched from a plain-Python host (`tessc.runtime.threads`).

A parfor is the costliest thing Numba compiles (W1: 0.46 s of CPU against 0.18 s serial,
plus its threading layer in every process). A threaded kernel is that loop compiled serially
`nogil=True` over a share `range(lo, hi)`, the host calling `parallel_for(kernel, extent,
...)`. The host is then plain Python, so the form is used only in a module whose hosts only
call kernels and make buffers, and whose parallel kernels are each one constant-extent
`scf.parallel` (serial kernels beside them are functions the host calls).
Where parfors stay, a parallel kernel that is its hosts' only callee is emitted into them
(`sole_parallel_kernels`). The rules are in lowering/codegen/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func, memref, scf

from tessc.dialects import contract

PYTHON_HOST_OPS = (
    func.CallOp,
    func.ReturnOp,
    arith.ConstantOp,
    memref.AllocOp,
    memref.DeallocOp,
    memref.ViewOp,
    memref.CastOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
)


def sole_parallel_kernels(
    functions: Sequence[func.FuncOp], parallel: dict[str, bool]
) -> dict[str, func.FuncOp]:
    """The parallel kernels (returning nothing) every caller of which calls no other
    function: each can be emitted into its callers, which then need no callee."""
    callers: dict[str, list[func.FuncOp]] = {}
    call_count: dict[func.FuncOp, int] = {}
    for fn in functions:
        ops = [op for op in fn.walk() if isinstance(op, func.CallOp)]
        call_count[fn] = len(ops)
        for op in ops:
            callers.setdefault(op.callee.root_reference.data, []).append(fn)
    return {
        fn.sym_name.data: fn
        for fn in functions
        if parallel[fn.sym_name.data]
        and not fn.function_type.outputs.data
        and fn.sym_name.data in callers
        and all(
            call_count[caller] == 1 and not contract.KERNEL.has(caller)
            for caller in callers[fn.sym_name.data]
        )
    }


def threadable(kernel: func.FuncOp) -> bool:
    """Whether `kernel`'s body is one `scf.parallel` beside `arith` ops only: each share
    then runs the loop's iterations and nothing else (a buffer the loop fills, or a copy
    after it, would be one per share)."""
    ops = list(kernel.body.block.ops)
    loops = [op for op in ops if isinstance(op, scf.ParallelOp)]
    return (
        len(loops) == 1
        and not kernel.function_type.outputs.data
        and all(
            op is loops[0] or isinstance(op, func.ReturnOp) or op.name.startswith("arith.")
            for op in ops
        )
    )


def python_host(host: func.FuncOp) -> bool:
    """Whether `host` only calls kernels and makes buffers."""
    return all(isinstance(op, PYTHON_HOST_OPS) for op in host.body.block.ops)


def threaded_candidates(
    functions: Sequence[func.FuncOp], parallel: dict[str, bool]
) -> set[str] | None:
    """The parallel kernels to emit threaded, or None when the module keeps parfors (see
    the module docstring)."""
    hosts = [fn for fn in functions if not contract.KERNEL.has(fn)]
    kernels = [fn for fn in functions if contract.KERNEL.has(fn)]
    if not hosts or not all(python_host(h) for h in hosts):
        return None
    if any(isinstance(op, func.CallOp) for k in kernels for op in k.walk()):
        return None
    candidates = {k.sym_name.data for k in kernels if parallel[k.sym_name.data] and threadable(k)}
    serial = {k.sym_name.data for k in kernels if not parallel[k.sym_name.data]}
    called = {
        op.callee.root_reference.data
        for h in hosts
        for op in h.body.block.ops
        if isinstance(op, func.CallOp)
    }
    # Serial kernels beside them are functions of their own the host calls: a parfor
    # compiles its body twice (outlined as a gufunc), ~3x a serial kernel's compile time.
    threaded = called & candidates
    return candidates if threaded and called <= candidates | serial else None


__all__ = [
    "PYTHON_HOST_OPS",
    "python_host",
    "sole_parallel_kernels",
    "threadable",
    "threaded_candidates",
]
