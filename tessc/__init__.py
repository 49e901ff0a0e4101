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

The function forms below (`ts.exp(x)`, `ts.sum(x, dim=1)`, `ts.maximum(a, b)`,
`ts.where(c, a, b)`, ...) are the `Tensor` methods of the same name. `ts.max`/`ts.min`
reduce (like `Tensor.max`); the elementwise forms are `ts.maximum`/`ts.minimum`.

Importing tessc loads xDSL and the `tess` dialect, not Numba: compilation modules load on
the first call of a jitted function.
"""

from tessc.frontend.builder import TessBuilder, TessError, build_function, build_module
from tessc.frontend.tracer import (
    JitFunction,
    Tensor,
    TraceError,
    full,
    jit,
    ones,
    tensor_function,
    trace,
    where,
    zeros,
)

exp = tensor_function("exp")
log = tensor_function("log")
relu = tensor_function("relu")
sigmoid = tensor_function("sigmoid")
tanh = tensor_function("tanh")
sqrt = tensor_function("sqrt")
abs = tensor_function("abs")
neg = tensor_function("neg")
reciprocal = tensor_function("reciprocal")

pow = tensor_function("pow")
maximum = tensor_function("maximum")
minimum = tensor_function("minimum")
matmul = tensor_function("matmul")

sum = tensor_function("sum")
mean = tensor_function("mean")
max = tensor_function("max")
min = tensor_function("min")

reshape = tensor_function("reshape")
view = tensor_function("view")
permute = tensor_function("permute")
transpose = tensor_function("transpose")
broadcast_to = tensor_function("broadcast_to")
unsqueeze = tensor_function("unsqueeze")

__all__ = [
    "JitFunction",
    "Tensor",
    "TessBuilder",
    "TessError",
    "TraceError",
    "abs",
    "broadcast_to",
    "build_function",
    "build_module",
    "exp",
    "full",
    "jit",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "neg",
    "ones",
    "permute",
    "pow",
    "reciprocal",
    "relu",
    "reshape",
    "sigmoid",
    "sqrt",
    "sum",
    "tanh",
    "trace",
    "transpose",
    "unsqueeze",
    "view",
    "where",
    "zeros",
]
