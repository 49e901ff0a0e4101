"""
`tessc.optim` against `torch.optim` (every option, 20 steps in float64, 1e-6 relative) and
Lamb against a NumPy transcription of You et al. 2019; on the `reference` target (the
step traced inside a jit) for every option and on `cpu` (the standalone step: compiled
once, donated, in arena storage, updated in place) for each optimizer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tessc as ts
from tessc.frontend.pytree import flatten_tree, unflatten_tree

STEPS = 20
SHAPES = {"bias": (5,), "layers": [(3, 4), (2, 3, 2)]}


def make_params(dtype: Any = np.float64, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "bias": rng.standard_normal(SHAPES["bias"]).astype(dtype),
        "layers": [rng.standard_normal(s).astype(dtype) for s in SHAPES["layers"]],
    }


def leaves(tree: Any) -> list[np.ndarray]:
    return [leaf for _, leaf in flatten_tree(tree, lambda v: isinstance(v, np.ndarray), "")[1]]


def as_dtype(tree: Any, dtype: Any) -> Any:
    structure, found = flatten_tree(tree, lambda v: isinstance(v, np.ndarray), "")
    return unflatten_tree(structure, [leaf.astype(dtype) for _, leaf in found])


def gradient_sequence(params: Any, seed: int = 1) -> list[Any]:
    """Gradients for STEPS steps (one of them all zero for the first parameter, so Lamb's
    norms meet a zero update)."""
    rng = np.random.default_rng(seed)
    sequence = []
    for step in range(STEPS):
        grads = {
            "bias": rng.standard_normal(SHAPES["bias"]),
            "layers": [rng.standard_normal(s) for s in SHAPES["layers"]],
        }
        if step == 3:
            grads["bias"][:] = 0.0
        sequence.append(grads)
    return sequence


def torch_run(name: str, options: dict[str, Any], params: Any, grads: list[Any]) -> list:
    torch = pytest.importorskip("torch")
    tensors = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in leaves(params)]
    optimizer = getattr(torch.optim, name)(tensors, foreach=False, **options)
    for step_grads in grads:
        for tensor, g in zip(tensors, leaves(step_grads), strict=True):
            tensor.grad = torch.from_numpy(g.copy())
        optimizer.step()
    return [t.detach().numpy() for t in tensors]


def tessc_run(optimizer: ts.optim.Optimizer, params: Any, grads: list[Any], target: str) -> Any:
    """STEPS steps: traced inside a jit on `target`, or standalone for "standalone"."""
    state = optimizer.init(params)
    if target == "standalone":
        step = optimizer.step
    else:
        step = ts.jit(lambda p, g, s: optimizer.step(p, g, s), target=target)
    for step_grads in grads:
        params, state = step(params, step_grads, state)
    assert float(state["step"]) == len(grads)
    return params, state


CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.02}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.02, "betas": (0.85, 0.995), "weight_decay": 0.1, "amsgrad": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.01}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.05}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.005, "centered": True, "momentum": 0.5, "weight_decay": 0.01}),
]


def case_id(case: tuple[str, dict[str, Any]]) -> str:
    name, options = case
    return name + "".join(f"-{k}={v}" for k, v in options.items() if k != "lr")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_torch_on_reference(case: tuple[str, dict[str, Any]]) -> None:
    name, options = case
    params, grads = make_params(), gradient_sequence(make_params())
    expected = torch_run(name, options, params, grads)
    got, _ = tessc_run(getattr(ts.optim, name)(**options), params, grads, "reference")
    for g, e in zip(leaves(got), expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-12)


# One compiled case per optimizer (all its options on), standalone on cpu.
COMPILED = [CASES[4], CASES[8], CASES[10], CASES[12], CASES[18]]


@pytest.mark.parametrize("case", COMPILED, ids=case_id)
def test_standalone_step_matches_torch_and_updates_in_place(
    case: tuple[str, dict[str, Any]],
) -> None:
    name, options = case
    params, grads = make_params(), gradient_sequence(make_params())
    expected = torch_run(name, options, params, grads)
    optimizer = getattr(ts.optim, name)(**options)
    state = optimizer.init(params)
    params, state = optimizer.step(params, grads[0], state)
    # From the second call on, what the step returned is updated in place (the rank-0
    # step count is a new array each call: the old one is read after the new is written).
    slots = [n for n in state if n != "step"]
    kept = leaves((params, [state[n] for n in slots]))
    for step_grads in grads[1:]:
        params, state = optimizer.step(params, step_grads, state)
    now = leaves((params, [state[n] for n in slots]))
    assert all(a is b for a, b in zip(now, kept, strict=True))
    assert optimizer._compiled["cpu"].trace_count == 1
    for g, e in zip(leaves(params), expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-12)


def numpy_lamb(params: list, grads: list[list], lr, betas, eps, weight_decay) -> list:
    b1, b2 = betas
    params = [p.copy() for p in params]
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    for t, step_grads in enumerate(grads, start=1):
        for k, g in enumerate(step_grads):
            ms[k] = b1 * ms[k] + (1 - b1) * g
            vs[k] = b2 * vs[k] + (1 - b2) * g * g
            m_hat, v_hat = ms[k] / (1 - b1**t), vs[k] / (1 - b2**t)
            u = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * params[k]
            p_norm, u_norm = np.linalg.norm(params[k]), np.linalg.norm(u)
            ratio = p_norm / u_norm if p_norm > 0 and u_norm > 0 else 1.0
            params[k] = params[k] - lr * ratio * u
    return params


@pytest.mark.parametrize("target", ["reference", "standalone"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lamb_matches_numpy(target: str, weight_decay: float) -> None:
    params = make_params()
    params["bias"][:] = 0.0  # |p| = 0 on the first step: ratio 1
    grads = gradient_sequence(params)
    options = {"lr": 0.01, "betas": (0.9, 0.99), "eps": 1e-6, "weight_decay": weight_decay}
    expected = numpy_lamb(leaves(params), [leaves(g) for g in grads], **options)
    got, _ = tessc_run(ts.optim.Lamb(**options), params, grads, target)
    for g, e in zip(leaves(got), expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-12)


def test_float32_standalone_step_is_close_to_float64() -> None:
    params64, grads = make_params(), gradient_sequence(make_params())
    expected, _ = tessc_run(ts.optim.Adam(lr=0.01), params64, grads, "reference")
    params32 = make_params(np.float32)
    grads32 = [as_dtype(g, np.float32) for g in grads]
    got, state = tessc_run(ts.optim.Adam(lr=0.01), params32, grads32, "standalone")
    assert state["step"].dtype == np.float32
    for g, e in zip(leaves(got), leaves(expected), strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_init_keeps_each_slot_in_one_arena() -> None:
    state = ts.optim.Adam(amsgrad=True).init(make_params())
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    for slot in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        arrays = leaves(state[slot])
        assert ts.arena_buffer(arrays) is not None and not any(a.any() for a in arrays)
    assert state["step"].shape == () and state["step"].dtype == np.float64
    assert ts.optim.SGD(lr=0.1).init(make_params()) == {"step": 0.0}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid lr"):
        ts.optim.SGD(lr=-1.0)
    with pytest.raises(ValueError, match="nesterov"):
        ts.optim.SGD(lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        ts.optim.Adam(betas=(0.9, 1.0))
    opt = ts.optim.Adam()
    params = make_params()
    state = opt.init(params)
    with pytest.raises(ValueError, match="structure of the parameters"):
        opt.step(params, {"bias": params["bias"]}, state)
    with pytest.raises(TypeError, match="one float dtype"):
        opt.init({"a": np.zeros(2), "b": np.zeros(2, np.float32)})


def test_inside_a_jitted_train_step_with_donation() -> None:
    def loss_fn(params: Any, x: Any, y: Any) -> Any:
        h = (x @ params["w1"] + params["b1"]).tanh()
        return ((h @ params["w2"] - y) ** 2.0).mean()

    def train_step(params: Any, state: Any, x: Any, y: Any) -> Any:
        loss, grads = ts.value_and_grad(loss_fn)(params, x, y)
        params, state = optimizer.step(params, grads, state)
        return params, state, loss

    rng = np.random.default_rng(3)
    params = {
        "w1": rng.standard_normal((4, 8)),
        "b1": np.zeros(8),
        "w2": rng.standard_normal((8, 2)),
    }
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 2))
    optimizer = ts.optim.AdamW(lr=0.05, amsgrad=True)
    runs = {}
    for target in ("reference", "cpu"):
        step = ts.jit(train_step, target=target, donate_argnums=(0, 1))
        p = {k: v.copy() for k, v in params.items()}
        state = optimizer.init(p)
        losses = []
        for _ in range(5):
            p, state, loss = step(p, state, x, y)
            losses.append(float(loss))
        assert step.trace_count == 1  # the step count is an array: no retrace
        assert losses[-1] < losses[0]
        runs[target] = (p, losses)
    np.testing.assert_allclose(runs["cpu"][1], runs["reference"][1], rtol=1e-9)
    for name in params:
        np.testing.assert_allclose(runs["cpu"][0][name], runs["reference"][0][name], rtol=1e-9)


@pytest.mark.parametrize("chunk", [4, 0])
def test_lamb_segmented_step_matches_reference_and_updates_in_place(monkeypatch, chunk) -> None:
    """Random shapes against the reference interpreter, with chunks of 4 elements: one-
    element parameters, segments smaller than a chunk, of odd sizes, and larger than
    several chunks (with 0: one chunk per parameter); one parameter zero (ratio 1); the
    standalone step updates in place."""
    from dataclasses import replace

    from tessc import pipelines

    cpu = pipelines.PIPELINES["cpu"]
    option = f"{{donated-only=true chunk-size={chunk}}}"
    fuse = cpu.passes[0].replace("{donated-only=true}", option)
    assert fuse != cpu.passes[0]
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", replace(cpu, passes=(fuse, *cpu.passes[1:])))
    rng = np.random.default_rng(7)
    shapes = [
        (1,),
        (3,),
        (2, 5),
        (1,),
        (7,),
        (13,),
        (3, 1, 3),
        *(tuple(int(d) for d in rng.integers(1, 6, size=rng.integers(1, 3))) for _ in range(5)),
    ]
    params = [rng.standard_normal(s) for s in shapes]
    params[2][:] = 0.0
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    grads[2][4][:] = 0.0  # |u| = 0 only through weight decay: p is not 0
    options = {"lr": 0.02, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.01}
    expected, _ = tessc_run(ts.optim.Lamb(**options), params, grads, "reference")

    optimizer = ts.optim.Lamb(**options)
    state = optimizer.init(params)
    got, state = optimizer.step(params, grads[0], state)
    kept = leaves((got, state["exp_avg"], state["exp_avg_sq"]))
    for step_grads in grads[1:]:
        got, state = optimizer.step(got, step_grads, state)
    now = leaves((got, state["exp_avg"], state["exp_avg_sq"]))
    assert all(a is b for a, b in zip(now, kept, strict=True))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
