"""`tess-merge-aliased-outputs`: an in-place update of donated arrays (SGD with momentum,
horizontally fused over arenas) is a kernel that takes each updated buffer once, in both
of codegen's parallel forms and serial, and computes what NumPy does."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tessc
from tessc.compiler import compile_module
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.pipelines import get_pipeline, run_passes
from tessc.runtime import Executable, load_source

LR, MOMENTUM = 0.01, 0.9
SGD = tessc.optim.SGD(lr=LR, momentum=MOMENTUM)


def sgd(step, params, grads, buffers):
    new_params, state = SGD.step(params, grads, {"step": step - 1.0, "momentum_buffer": buffers})
    return new_params, state["momentum_buffer"]


def out_param_uses(source: str) -> list[str]:
    """The generated lines that name an out-param (`out0`, ...) other than the host's
    `def` lines (the host and its member form, `sgd_members`): a store through it, or an
    argument of a kernel call or definition."""
    code = source.split("TESSC_SIGNATURES", 1)[1].split("\n}\n", 1)[1]
    return [
        line
        for line in code.splitlines()
        if re.search(r"\bout\d+\b", line) and not re.match(r"def sgd(_members)?\(", line)
    ]


@pytest.mark.parametrize(
    ("sizes", "threaded", "parallel_threshold"),
    [
        ((1, 17, 1000), True, None),  # serial: under the parallel threshold
        ((0, 3, 70_001, 200_003), True, None),  # threaded kernel, uneven sizes, an empty one
        ((0, 3, 70_001, 200_003), False, None),  # a parfor
        ((5, 33), False, 0),  # a parfor of a few elements (fewer than the threads' chunks)
    ],
)
def test_momentum_step_reads_and_writes_each_buffer_under_one_name(
    sizes: tuple[int, ...], threaded: bool, parallel_threshold: int | None
) -> None:
    rng = np.random.default_rng(len(sizes))
    params = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    buffers = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    step = np.float32(2.0).reshape(())
    module = tessc.jit(sgd, donate_argnums=(1, 3)).trace(step, params, grads, buffers).module
    run_passes(module, get_pipeline("cpu").spec)
    options = {} if parallel_threshold is None else {"parallel_threshold": parallel_threshold}
    source = emit_numba(module, threaded_kernels=threaded, **options)
    assert out_param_uses(source) == [], source
    program = Executable(load_source(source), "sgd")

    want_b = [MOMENTUM * b + g for b, g in zip(buffers, grads, strict=True)]
    want_p = [p - np.float32(LR) * b for p, b in zip(params, want_b, strict=True)]
    arenas = [tessc.arena(a) for a in (params, grads, buffers)]
    outputs = program(step, *arenas[0], *arenas[1], *arenas[2])
    count = len(sizes)
    for got, mine in zip(outputs, [*arenas[0], *arenas[2]], strict=True):
        assert got is mine or np.shares_memory(got, mine)  # in place
    for got, want in zip([*outputs[:count], *outputs[count:]], [*want_p, *want_b], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    reference = compile_module(
        tessc.jit(sgd, donate_argnums=(1, 3)).trace(step, params, grads, buffers).module,
        "sgd",
        "reference",
    )
    expected = reference(step, *params, *grads, *buffers)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
