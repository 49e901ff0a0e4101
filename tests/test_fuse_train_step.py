"""
Grouped updates inside a jitted train step (`tess-fuse-horizontal`'s step 4): a 12-layer
MLP's SGD updates that read gradients computed in the step run as one kernel per class of
identical updates, not a kernel per parameter; and the results still match the
reference interpreter.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp

import tessc
from tessc.compiler import lower_module
from tessc.context import make_context
from tessc.dialects.kernel import GroupOp
from tessc.pipelines import get_pipeline, run_passes

HIDDEN, BATCH = 8, 4
OPT = tessc.optim.SGD(lr=0.1)


def mlp_params(layers: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "w": (rng.standard_normal((HIDDEN, HIDDEN)) * 0.4).astype(np.float32),
            "b": (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32),
        }
        for _ in range(layers)
    ]


def loss_fn(params: list, x: Any) -> Any:
    h = x
    for p in params:
        h = (h @ p["w"] + p["b"]).relu()
    return (h * h).sum()


def train_step(params: list, state: dict, x: Any) -> tuple:
    loss, grads = tessc.value_and_grad(loss_fn)(params, x)
    params, state = OPT.step(params, grads, state)
    return params, state, loss


def batch(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((BATCH, HIDDEN)).astype(np.float32)


def traced_step(layers: int) -> ModuleOp:
    params = mlp_params(layers)
    step = tessc.jit(train_step, donate_argnums=(0, 1))
    return step.trace(params, OPT.init(params), batch()).module


def kernel_count(module: ModuleOp, computed_groups: bool = True) -> int:
    spec = get_pipeline("cpu").passes_to("loops")
    if not computed_groups:
        spec = spec.replace("donated-only=true", "donated-only=true computed-groups=false")
    lowered = module.clone()
    run_passes(lowered, spec, make_context())
    return sum(isinstance(op, func.FuncOp) and "tess.kernel" in op.attributes for op in lowered.ops)


def test_twelve_layer_mlp_updates_are_one_kernel() -> None:
    module = traced_step(12)
    fused = lower_module(module, "fused")
    bias_updates = [
        op
        for op in fused.walk()
        if isinstance(op, GenericOp)
        and len(op.iterator_types) == 1
        and any(getattr(v, "name_hint", "") and "_b" in v.name_hint for v in op.inputs)
    ]
    # Every bias update is in one and the same kernel.group.
    assert len(bias_updates) == 12
    parents = {op.parent_op() for op in bias_updates}
    assert len(parents) == 1 and isinstance(parents.pop(), GroupOp)
    # 12 bias-update kernels (and the weight updates outside their gradients' kernels)
    # become one.
    grouped, separate = kernel_count(module), kernel_count(module, computed_groups=False)
    assert separate - grouped >= 11


def test_grouped_train_step_matches_the_reference() -> None:
    params = mlp_params(4)
    x = batch()
    results = {}
    for target in ("cpu", "reference"):
        p, s = copy.deepcopy(params), OPT.init(copy.deepcopy(params))
        step = tessc.jit(train_step, donate_argnums=(0, 1), target=target)
        for _ in range(3):
            p, s, loss = step(p, s, x)
        results[target] = (p, float(loss))
    for got, want in zip(results["cpu"][0], results["reference"][0], strict=True):
        for name in ("w", "b"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results["cpu"][1], results["reference"][1], rtol=1e-5)


# ---------------------------------------------------------------------------------------
# A standalone optimizer step packs only on its first call
# ---------------------------------------------------------------------------------------

SHAPES = [(3,), (4, 2), (5,), (2, 2, 2), (0,), (1,)]


def executable_of(optimizer: tessc.optim.Optimizer) -> Any:
    (compiled,) = optimizer._compiled["cpu"]._compiled.values()
    return compiled


def test_gradients_from_a_jitted_function_are_not_packed() -> None:
    rng = np.random.default_rng(3)
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]  # apart
    scale = tessc.jit(lambda ps, k: [p * k for p in ps])
    optimizer = tessc.optim.SGD(lr=0.1, momentum=0.9)
    state = optimizer.init(params)
    want_p, want_buf = [p.copy() for p in params], [np.zeros_like(p) for p in params]
    p = params
    copies = []
    for step in range(4):
        k = np.float32(0.5 + step)
        grads = scale(want_p, k)  # views of one buffer, in the parameters' order
        p, state = optimizer.step(p, grads, state)
        copies.append(executable_of(optimizer).packing_copies)
        for i, g in enumerate(grads):
            want_buf[i] = g.copy() if step == 0 else 0.9 * want_buf[i] + g
            want_p[i] = want_p[i] - np.float32(0.1) * want_buf[i]
    # The separately allocated parameters once; never the gradients, never again.
    assert copies == [1, 1, 1, 1]
    for got, want in zip(p, want_p, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_separate_gradient_arrays_are_read_where_they_lie() -> None:
    rng = np.random.default_rng(4)
    optimizer = tessc.optim.SGD(lr=0.1)
    p = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    want = [x.copy() for x in p]
    state = optimizer.init(p)
    for step in range(3):
        grads = [np.full(s, step + 1, np.float32) for s in SHAPES]  # new arrays, apart
        p, state = optimizer.step(p, grads, state)
        want = [w - np.float32(0.1) * g for w, g in zip(want, grads, strict=True)]
    # The parameters on the first call; the gradients never (the step's member form).
    assert executable_of(optimizer).packing_copies == 1
    for got, expected in zip(p, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
