"""
tessc: a small multi-level tensor compiler on xDSL, lowering to Numba kernels.

    import numpy as np
    import tessc as ts

    @ts.jit
    def mlp(x, w1, b1, w2):
        h = (x @ w1 + b1).relu()
        return (h @ w2).sum(dim=1)

    y = mlp(x, w1, b1, w2)                       # traced and compiled once per signature
    print(mlp.ir(x, w1, b1, w2, stage="tess"))   # "tess", "fused", "buffers", "loops", "numba"

The function forms (`ts.exp(x)`, `ts.sum(x, dim=1)`, `ts.maximum(a, b)`, ...) are the
`Tensor` methods of the same name; `ts.max`/`ts.min` reduce (values only), the
elementwise forms are `ts.maximum`/`ts.minimum`. `ts.where(c, a, b)` selects. Where NumPy
and PyTorch disagree, the function is NumPy's and the method PyTorch's (`ts.transpose(x,
axes)` vs `x.transpose(d0, d1)`, `ts.var(x, axis, ddof=0)` vs `x.var(dim)`, `ts.max(x, axis)`
vs `x.max(dim)`: `tessc.frontend.numpy_forms`, README "NumPy or PyTorch").
`ts.vmap(f, in_axes, out_axes)` maps a function of one example over a batch dim (JAX's;
batched at trace time, composing with `jit` and `grad`), `ts.debug.print(fmt, x=x)` prints
runtime values from a compiled function, and `ts.tree_util` registers pytree nodes.
`ts.parse_tess(text, filename)` reads the `.tess` language into the same `tess` IR.
`ts.arena(arrays)` copies arrays into one contiguous buffer and returns views of it, the
layout a horizontally fused optimizer step (`tess-fuse-horizontal`) reads without a copy.

Every name is loaded on first use (PEP 562), so `import tessc` costs nothing and tools such
as `tessc-opt`, which import only `tessc.cli`, never load the tracer; Numba loads only when
a jitted function is first called.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_JIT = "tessc.frontend.jit"
_TRACER = "tessc.frontend.tracer"
_FORMS = "tessc.frontend.function_forms"
_NUMPY_FORMS = "tessc.frontend.numpy_forms"
_BUILDER = "tessc.dialects.builder"
_GRAD = "tessc.frontend.grad"
_TESS_LANG = "tessc.frontend.tess_lang"
_ARENA = "tessc.runtime.arena"
_VOCABULARY = "tessc.frontend.vocabulary"
_VOCABULARY_NAMES = (
    "all", "any", "arange", "ceil", "cumprod", "cumsum", "eye", "flip", "floor", "full_like",
    "isfinite", "isnan", "linspace", "moveaxis", "ones_like", "roll", "round", "sign", "split",
    "tril", "triu", "zeros_like",
)  # fmt: skip

_EXPORTS: dict[str, str] = {
    "jit": _JIT,
    "JitFunction": _JIT,
    "Tensor": _TRACER,
    "TraceError": "tessc.frontend.user_location",
    "trace": "tessc.frontend.trace_function",
    "where": _FORMS,
    "concatenate": _FORMS,
    "stack": _FORMS,
    "one_hot": _FORMS,
    "take": _FORMS,
    "take_along_axis": "tessc.frontend.advanced_index",
    "einsum": "tessc.frontend.einsum",
    "stop_gradient": _FORMS,
    "clip": _FORMS,
    "full": _FORMS,
    "zeros": _FORMS,
    "ones": _FORMS,
    # NumPy's meaning where PyTorch's differs (the Tensor method of the name is PyTorch's)
    "transpose": _NUMPY_FORMS,
    "var": _NUMPY_FORMS,
    "std": _NUMPY_FORMS,
    "max": _NUMPY_FORMS,
    "min": _NUMPY_FORMS,
    "repeat": _NUMPY_FORMS,
    "tile": _NUMPY_FORMS,
    "TessBuilder": _BUILDER,
    "TessError": "tessc.dialects.builder_types",
    "build_function": _BUILDER,
    "build_module": _BUILDER,
    "parse_tess": _TESS_LANG,
    "TessSourceError": _TESS_LANG,
    "grad": _GRAD,
    "value_and_grad": _GRAD,
    "vmap": "tessc.frontend.vmap",
    "pad": "tessc.nn_conv",
    "arena": _ARENA,
    "arena_buffer": _ARENA,
    # NumPy's everyday functions (issue 22 §4)
    **dict.fromkeys(_VOCABULARY_NAMES, _VOCABULARY),
}

# The Tensor methods offered as functions: tessc.<name>(x, ...) == x.<name>(...).
_FUNCTION_FORMS = (
    "exp", "log", "relu", "sigmoid", "tanh", "sqrt", "abs", "neg", "reciprocal", "sin", "cos",
    "erf", "pow", "maximum", "minimum", "matmul",
    "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "astype",
    "bitcast",
    "reshape", "view", "permute", "swapaxes", "broadcast_to", "unsqueeze", "squeeze", "flatten",
    "repeat_interleave",
)  # fmt: skip


def _available(name: str) -> bool:
    module = _EXPORTS.get(name)
    return module is not None and (module != _GRAD or importlib.util.find_spec(_GRAD) is not None)


_SUBMODULES = ("optim", "nn", "linalg", "random", "tree_util", "debug", "distributed")
"""Subpackages offered as attributes (`tessc.optim.Adam`), imported on first use."""


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = importlib.import_module(f"tessc.{name}")
    elif name in _FUNCTION_FORMS:
        from tessc.frontend.function_forms import tensor_function

        value = tensor_function(name)
    elif _available(name):
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'tessc' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = sorted([*(name for name in _EXPORTS if _available(name)), *_FUNCTION_FORMS, *_SUBMODULES])
