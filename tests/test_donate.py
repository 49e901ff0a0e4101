"""`jit(..., donate_argnums=...)`: `{tess.donated}` arguments, in-place updates, one kernel."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tessc as ts

LR = 0.1
EPS = 1e-6


def sgd(w, g):
    return w - LR * g


def adagrad(params, grads, states):
    new_params, new_states = [], []
    for p, g, s in zip(params, grads, states, strict=True):
        s = s + g * g
        new_params.append(p - LR * g / (ts.sqrt(s) + EPS))
        new_states.append(s)
    return new_params, new_states


def numpy_adagrad(params, grads, states):
    new_states = [s + g * g for g, s in zip(grads, states, strict=True)]
    new_params = [
        p - np.float32(LR) * g / (np.sqrt(s) + np.float32(EPS))
        for p, g, s in zip(params, grads, new_states, strict=True)
    ]
    return new_params, new_states


def random(shape: tuple[int, ...], seed: int, low: float = -1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, 1.0, shape).astype(np.float32)


def donated_args(ir: str) -> list[bool]:
    """Whether each argument of the entry carries `{tess.donated}`, in order."""
    header = ir[ir.index("func.func") : ir.index("{\n", ir.index("func.func"))]
    marks = re.findall(r"%[\w$.-]+: tensor<[^>]*>( \{tess\.donated\})?", header)
    return [bool(mark) for mark in marks]


def kernel_count(ir: str) -> int:
    return len(re.findall(r"func\.func [^\n]*tess\.kernel", ir))


def test_sgd_donated_updates_the_callers_array_in_place() -> None:
    step = ts.jit(sgd, donate_argnums=0)
    w, g = random((4, 8), 0), random((4, 8), 1)
    expected = w - np.float32(LR) * g
    result = step(w, g)
    assert result is w or np.shares_memory(result, w)
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    np.testing.assert_array_equal(g, random((4, 8), 1))  # not donated: unchanged


def test_sgd_without_donation_leaves_the_input_unchanged() -> None:
    step = ts.jit(sgd)
    w, g = random((4, 8), 0), random((4, 8), 1)
    result = step(w, g)
    assert not np.shares_memory(result, w)
    np.testing.assert_array_equal(w, random((4, 8), 0))
    np.testing.assert_allclose(result, w - np.float32(LR) * g, rtol=1e-6)


def test_tess_ir_marks_every_leaf_of_the_donated_arguments() -> None:
    @ts.jit(donate_argnums=(0, 2))
    def step(params, grads, states, scale):
        return {k: params[k] * scale + grads[k] for k in params}, [s + 1.0 for s in states]

    params = {"a": random((3,), 0), "b": random((2, 2), 1)}
    grads = {"a": random((3,), 2), "b": random((2, 2), 3)}
    states = [random((3,), 4)]
    ir = step.ir(params, grads, states, random((), 5), stage="tess")
    # params_a, params_b, grads_a, grads_b, states_0, scale
    assert donated_args(ir) == [True, True, False, False, True, False]
    assert not any(donated_args(ts.jit(step.fn).ir(params, grads, states, random((), 5))))


def test_donation_by_keyword_and_star_args() -> None:
    def scaled(w, *rest):
        return w * 2.0, [r + 1.0 for r in rest]

    x, y, z = random((2,), 0), random((2,), 1), random((2,), 2)
    assert donated_args(ts.jit(scaled, donate_argnums=(0, 2)).ir(x, y, z)) == [True, False, True]

    def keyword(w, g):
        return w - g

    assert donated_args(ts.jit(keyword, donate_argnums=1).ir(w=x, g=y)) == [False, True]


def test_donate_argnums_is_validated() -> None:
    with pytest.raises(ValueError, match="2 positional parameters"):
        ts.jit(sgd, donate_argnums=2)
    with pytest.raises(TypeError, match="non-negative ints"):
        ts.jit(sgd, donate_argnums=(-1,))


def test_donated_and_plain_traces_are_cached_apart() -> None:
    w, g = random((4, 8), 0), random((4, 8), 1)
    donating, plain = ts.jit(sgd, donate_argnums=0), ts.jit(sgd)
    donated_signature = donating.trace(w, g).signature
    assert donated_signature.donated == (0,)
    assert plain.trace(w, g).signature != donated_signature


def test_adagrad_over_arena_views_is_one_in_place_kernel() -> None:
    shapes = [(i % 4 + 1, 3) if i % 2 else (i + 2,) for i in range(20)]
    params = ts.arena([random(s, k) for k, s in enumerate(shapes)])
    states = ts.arena([np.zeros(s, np.float32) for s in shapes])
    step = ts.jit(adagrad, donate_argnums=(0, 2))
    grads0 = [random(s, 100 + k) for k, s in enumerate(shapes)]
    assert kernel_count(step.ir(params, grads0, states, stage="loops")) == 1

    expected = [p.copy() for p in params], [s.copy() for s in states]
    for round_ in range(3):
        grads = [random(s, 100 * round_ + k) for k, s in enumerate(shapes)]
        expected = numpy_adagrad(expected[0], grads, expected[1])
        new_params, new_states = step(params, grads, states)
        got_all, want_all = [*new_params, *new_states], [*expected[0], *expected[1]]
        for got, want in zip(got_all, want_all, strict=True):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
        assert all(np.shares_memory(n, p) for n, p in zip(new_params, params, strict=True))
        params, states = new_params, new_states
    assert step.trace_count == 1


def mlp_loss(params, x, y):
    h = (x @ params["w1"] + params["b1"]).relu()
    z = h @ params["w2"] + params["b2"]
    return ((z - y) * (z - y)).sum() / x.shape[0]


OPTIMIZERS = {
    "sgd": lambda: ts.optim.SGD(lr=0.1),
    "momentum": lambda: ts.optim.SGD(lr=0.05, momentum=0.9),
    "adam": lambda: ts.optim.Adam(lr=0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mlp_step_updates_matmul_weights_and_biases_in_place(name: str) -> None:
    """The weights' gradients are matmuls grouped with their update (`tess-fuse-epilogue`);
    donated, every parameter and optimizer slot still comes back in its own array, with
    the values of the plain step and of the reference interpreter."""
    optimizer = OPTIMIZERS[name]()

    def train_step(params, state, x, y):
        loss, grads = ts.value_and_grad(mlp_loss)(params, x, y)
        params, state = optimizer.step(params, grads, state)
        return params, state, loss

    params0 = {
        "w1": random((4, 5), 0),
        "b1": random((5,), 1),
        "w2": random((5, 3), 2),
        "b2": random((3,), 3),
    }
    x, y = random((6, 4), 4), random((6, 3), 5)
    donating = ts.jit(train_step, donate_argnums=(0, 1))
    plain, reference = ts.jit(train_step), ts.jit(train_step, target="reference")
    params = {k: v.copy() for k, v in params0.items()}
    state = optimizer.init(params)
    runs = {
        step: ({k: v.copy() for k, v in params0.items()}, optimizer.init(params0))
        for step in (plain, reference)
    }
    for _ in range(3):
        new_params, new_state, loss = donating(params, state, x, y)
        for k in params:
            assert new_params[k] is params[k], k  # the donated array itself, updated
        for slot in set(state) - {"step"}:  # momentum, exp_avg, ...: in place too
            for k in params:
                assert new_state[slot][k] is state[slot][k], (slot, k)
        params, state = new_params, new_state
        for step, (p, s) in list(runs.items()):
            p, s, expected_loss = step(p, s, x, y)
            runs[step] = (p, s)
            np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-5)
    for p, s in runs.values():
        for k in params:
            np.testing.assert_allclose(params[k], p[k], rtol=1e-5, atol=1e-6, err_msg=k)
            for slot in set(state) - {"step"}:
                np.testing.assert_allclose(state[slot][k], s[slot][k], rtol=1e-5, atol=1e-6)
    weights = donating.ir(params, state, x, y, stage="buffers")
    assert weights.count("tess.aliases_input") >= len(params)


def test_donated_views_of_one_arena_are_not_compared_pairwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An AdamW step's state is views of one arena per slot: its inputs share a memory owner
    but not a byte, which sorted byte ranges show (`executor.disjoint`) without asking
    `np.shares_memory` of every donated input against every other input (O(n^2): ~8,000
    pairs, ~2.5 ms a call, in the char-GPT train step of bench/bench_transformer.py)."""
    opt = ts.optim.AdamW(lr=LR)
    params = {"a": random((4, 3), 0), "b": random((3,), 1), "c": random((5,), 2)}
    state = opt.init(params)
    x = random((2, 4), 3)

    @ts.jit(donate_argnums=(0, 1))
    def step(params, state, x):
        def loss(p, x):
            return (ts.nn.gelu(x @ p["a"] + p["b"]).sum() + 0.5 * p["c"].sum()) ** 2

        value, grads = ts.value_and_grad(loss)(params, x)
        return (*opt.step(params, grads, state), value)

    wanted = ts.jit(step.fn)  # the same step, not donated: copies its inputs
    expected = wanted(params, state, x)
    pairs: list[int] = []
    shares_memory = np.shares_memory
    monkeypatch.setattr(
        np, "shares_memory", lambda *a, **k: pairs.append(1) or shares_memory(*a, **k)
    )
    for _ in range(3):
        params, state, value = step(params, state, x)
        assert state["exp_avg"]["a"].base is not None  # views of the state's arena
    assert pairs == []
    monkeypatch.undo()
    for _ in range(2):
        expected = wanted(*expected[:2], x)
    np.testing.assert_allclose(value, expected[2], rtol=1e-5)
    np.testing.assert_allclose(params["a"], expected[0]["a"], rtol=1e-5)


def test_disjoint_reads_byte_ranges() -> None:
    from tessc.runtime.executor import disjoint

    buffer = np.zeros(12, np.float32)
    assert disjoint([buffer[:4], buffer[4:8], buffer[8:], np.zeros(3), buffer[:0]])
    assert not disjoint([buffer[:5], buffer[4:8]])
    assert not disjoint([buffer[:8], buffer[2:4], buffer[8:]])  # inside, not next to it
    assert not disjoint([buffer[::2], np.zeros(2)])  # strided: not proven
