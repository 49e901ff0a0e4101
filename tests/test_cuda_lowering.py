"""The emitted CUDA kernels against Numba's real CUDA target, without a GPU: every arith/
math template of the CUDA emitter and every kernel of a set of programs is typed and
lowered to LLVM IR by numba-cuda's compiler (`compile_cuda`, which stops before NVVM/PTX),
and compiled on to PTX where NVVM is installed (`pip install 'numba-cuda[cu12]'`), so a
spelling the CUDA target lacks (e.g. `np.exp`: the simulator runs it, a GPU would not
compile it) fails here. Runs in the main suite: it needs numba-cuda, not the simulator."""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
    reason="needs numba-cuda's real CUDA target (not the simulator)",
)

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")


@functools.cache
def can_make_ptx() -> bool:
    """Whether NVVM is installed (the `numba-cuda[cu12]` wheels): then kernels go on to PTX."""
    from numba import cuda, float32

    def kernel(out: Any) -> None:
        out[0] = float32(1)

    try:
        cuda.compile_ptx(kernel, (float32[:],), cc=(7, 5))
    except Exception:
        return False
    return True


def lower(function: Callable[..., Any], argument_types: tuple) -> None:
    """Type `function` as a kernel of `argument_types` and lower it to LLVM IR for the
    CUDA target; to PTX too when NVVM is there."""
    from numba import cuda, types
    from numba.cuda.compiler import compile_cuda

    compile_cuda(function, types.void, argument_types, cc=(7, 5))
    if can_make_ptx():
        cuda.compile_ptx(function, argument_types, cc=(7, 5))


def operand_dtypes(name: str) -> tuple[str, ...]:
    if name in ("math.absi",) or name.endswith(("i", "si", "ui")):
        return INTS
    return FLOATS


def cuda_templates() -> dict[str, str]:
    from tessc.lowering.codegen.to_cuda import CUDA_TEMPLATES

    casts = {"index_cast", "index_castui", "sitofp", "uitofp", "fptosi", "fptoui", "extf"}
    casts |= {"truncf", "extsi", "extui", "trunci", "bitcast"}
    return {k: v for k, v in CUDA_TEMPLATES.items() if k.partition(".")[2] not in casts}


@pytest.mark.parametrize("name", sorted(cuda_templates()))
def test_every_template_lowers_for_the_cuda_target(name: str) -> None:
    from numba import types

    template = cuda_templates()[name]
    for dtype in operand_dtypes(name):
        constructor = f"np.{dtype}"
        big = f"{constructor}({2.0 ** (23 if dtype == 'float32' else 52)!r})"
        if name == "arith.select":
            expression = template.format("a > b", "a", "b")
        else:
            expression = template.format(
                "a", "b", "c", T=constructor, S=constructor, one=f"{constructor}(1)", big=big
            )
        source = f"def kernel(out, x):\n    a, b, c = x[0], x[1], x[2]\n    out[0] = {expression}\n"
        namespace: dict[str, Any] = {"np": np, "math": math}
        exec(source, namespace)
        array = types.Array(getattr(types, dtype), 1, "C")
        lower(namespace["kernel"], (array, array))


def programs() -> dict[str, tuple[Callable[..., Any], tuple]]:
    import tessc as ts

    rng = np.random.default_rng(0)

    def r(*shape: int, dtype: type = np.float32) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)

    def mlp_loss(p: dict, x: np.ndarray) -> Any:
        h = (x @ p["w1"] + p["b1"]).tanh()
        return ((h @ p["w2"]) ** 2).mean()

    params = {"w1": r(5, 7, dtype=np.float64), "b1": r(7, dtype=np.float64)}
    params["w2"] = r(7, 3, dtype=np.float64)
    return {
        "elementwise": (
            lambda x, y: ((x * y).exp() + y.sqrt().log() - x.tanh()).sigmoid().abs(),
            (r(31), r(31)),
        ),
        "reductions": (
            lambda x: (x.sum(dim=1), x.amax(dim=0), x.mean(), (x * x).sum(dim=0)),
            (r(33, 5),),
        ),
        "matmul": (lambda a, b, c: (a @ b + c).relu(), (r(45, 33), r(33, 40), r(40))),
        "batched": (
            lambda a, b: a @ b,
            (r(2, 9, 5, dtype=np.float64), r(2, 5, 4, dtype=np.float64)),
        ),
        "mlp_grad": (ts.value_and_grad(mlp_loss), (params, r(8, 5, dtype=np.float64))),
        "conv_grad": (  # tess-gpu-conv: forward, input and weight gradients staged
            ts.grad(
                lambda x, w, b: ts.nn.conv2d(x, w, b, stride=2, padding=1, groups=2).relu().sum(),
                argnums=(0, 1, 2),
            ),
            (r(1, 4, 5, 5), r(6, 2, 3, 3), r(6)),
        ),
        "conv1d": (
            lambda x, w: ts.nn.conv1d(x, w, padding=2, dilation=2).tanh(),
            (r(2, 3, 70, dtype=np.float64), r(5, 3, 3, dtype=np.float64)),
        ),
        "optimizer": (
            lambda p, g, s: (
                {k: p[k] - 0.1 * g[k] / ((s[k] + g[k] * g[k]).sqrt() + 1e-10) for k in p},
                {k: s[k] + g[k] * g[k] for k in s},
            ),
            tuple({"a": r(3, 5), "b": r(7)} for _ in range(3)),
        ),
    }


@pytest.mark.parametrize("program", sorted(programs()))
def test_every_emitted_kernel_lowers_for_the_cuda_target(program: str) -> None:
    import tessc as ts
    from tessc.compiler import lower_module

    function, args = programs()[program]
    # Parameters and states donated, as an optimizer step is: its updates are one arena
    # kernel (`tess-fuse-horizontal{donated-only=true}`).
    donated = (0, 2) if program == "optimizer" else ()
    traced = ts.jit(function, target="cuda", donate_argnums=donated).trace(*args)
    lower_kernels(lower_module(traced.module, "gpu", pipeline="cuda"))


HAND_WRITTEN = [
    Path(__file__).parent / "filecheck" / "codegen" / "to-cuda.mlir",
    *sorted((Path(__file__).parent / "cuda" / "inputs").glob("*.mlir")),
]


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=lambda p: p.name)
def test_hand_written_gpu_level_kernels_lower_for_the_cuda_target(path: Path) -> None:
    """Shared arrays, barriers, atomics on a 0-d buffer, the bitcast intrinsic."""
    from xdsl.parser import Parser

    from tessc.context import make_context

    module = Parser(make_context(), path.read_text()).parse_module()
    module.verify()
    lower_kernels(module)


def lower_kernels(module: Any) -> None:
    """Every `gpu.func` of `module`'s emitted source, typed from its memref arguments and
    lowered for the CUDA target."""
    from numba import types
    from xdsl.dialects import gpu
    from xdsl.dialects.builtin import MemRefType

    from tessc.lowering.codegen.numba_source import dtype_name
    from tessc.lowering.codegen.to_cuda import emit_cuda, kernel_python_names
    from tessc.runtime import load_source

    loaded = load_source(emit_cuda(module))
    kernels = [op for op in module.walk() if isinstance(op, gpu.FuncOp)]
    assert kernels
    for kernel in kernels:
        argument_types = []
        for typ in kernel.function_type.inputs.data:
            assert isinstance(typ, MemRefType)
            dtype = getattr(types, dtype_name(typ.element_type))
            argument_types.append(types.Array(dtype, len(typ.get_shape()), "C"))
        dispatcher = getattr(loaded, kernel_python_names(module)[kernel.sym_name.data])
        lower(dispatcher.py_func, tuple(argument_types))
