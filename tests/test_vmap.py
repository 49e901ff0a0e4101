"""`ts.vmap` (issue 22 §4): JAX's semantics (in_axes per argument and pytree prefix, None,
out_axes, nested), batched at trace time by a rule per tess op, composing with jit and
grad: per-example gradients of an MLP match a Python loop."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts

rng = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return rng.normal(size=shape).astype(np.float32)


def loop(f, in_axes, args, out_axis=0):  # noqa: ANN001, ANN201 - the oracle
    size = next(a.shape[ax] for a, ax in zip(args, in_axes, strict=True) if ax is not None)
    outs = [
        f(
            *[
                a if ax is None else np.take(a, b, axis=ax)
                for a, ax in zip(args, in_axes, strict=True)
            ]
        )
        for b in range(size)
    ]
    return np.stack(outs, axis=out_axis)


def test_in_axes_out_axes_and_broadcast_unbatched() -> None:
    x, w, b = rand(4, 5), rand(4, 2), rand(2)

    def f(x, w, b):  # noqa: ANN001, ANN202
        h = x.reshape(4, 1) * w + b  # (4, 2) per example: the batched x meets unbatched w
        return (h.relu().sum(0) / h.max()).exp()

    def oracle(x, w, b):  # noqa: ANN001, ANN202
        h = x[:, None] * w + b
        return np.exp(np.maximum(h, 0).sum(0) / h.max())

    got = ts.vmap(f, in_axes=(1, None, None), out_axes=1)(x, w, b)
    np.testing.assert_allclose(got, loop(oracle, (1, None, None), (x, w, b), 1), rtol=1e-5)


def test_reductions_permutes_matmul_select_slices() -> None:
    x, y = rand(6, 3, 4), rand(4, 5)

    def f(x, y):  # noqa: ANN001, ANN202
        z = ts.where(x > 0, x, 0.5 * x) @ y  # (3, 5)
        return z.T.sum(dim=0, keepdim=True), z[1:, ::2].mean(), z.argmax(dim=1)

    a, m, i = ts.vmap(f, in_axes=(0, None))(x, y)
    for k in range(6):
        z = np.where(x[k] > 0, x[k], 0.5 * x[k]) @ y
        np.testing.assert_allclose(a[k], z.T.sum(0, keepdims=True), rtol=1e-5)
        np.testing.assert_allclose(m[k], z[1:, ::2].mean(), rtol=1e-5)
        np.testing.assert_array_equal(i[k], z.argmax(1))


def test_pytree_in_axes_and_kwargs() -> None:
    params = {"w": rand(3, 3), "b": rand(7, 3)}
    x = rand(7, 3)
    f = ts.vmap(
        lambda p, x, scale: (x @ p["w"] + p["b"]) * scale, in_axes=({"w": None, "b": 0}, 0, None)
    )
    got = f(params, x, 2.0)
    np.testing.assert_allclose(got, (x @ params["w"] + params["b"]) * 2.0, rtol=1e-5)
    kw = ts.vmap(lambda x, *, y: x * y)(x, y=x)  # keyword arguments are mapped over axis 0
    np.testing.assert_allclose(kw, x * x)


def test_take_and_scatter_with_batched_indices() -> None:
    table, idx = rand(4, 6, 3), rng.integers(-6, 6, size=(4, 5))

    def gather(t, i):  # noqa: ANN001, ANN202
        return ts.take(t, i, axis=0) * 2.0

    got = ts.vmap(gather)(table, idx)
    np.testing.assert_allclose(got, np.stack([np.take(table[k], idx[k], 0) for k in range(4)]) * 2)
    shared = ts.vmap(gather, in_axes=(None, 0))(table[0], idx)
    np.testing.assert_allclose(
        shared, np.stack([np.take(table[0], idx[k], 0) for k in range(4)]) * 2
    )
    # take's gradient is a scatter_add with the batched indices
    grads = ts.vmap(ts.grad(lambda t, i: (ts.take(t, i, axis=1) ** 2).sum()))(
        table.transpose(0, 2, 1).copy(), idx
    )
    for k in range(4):
        want = np.zeros((3, 6), np.float32)
        np.add.at(want.T, idx[k] % 6, 2 * np.take(table[k].T, idx[k], 1).T)
        np.testing.assert_allclose(grads[k], want, rtol=1e-5)


def mlp_loss(params, x, label):  # noqa: ANN001, ANN201
    h = (x @ params["w1"] + params["b1"]).tanh()
    logits = h @ params["w2"]
    return ts.nn.cross_entropy(logits.reshape(1, 3), label.reshape(1))


def test_per_example_gradients_of_an_mlp_match_a_loop() -> None:
    params = {"w1": rand(4, 8), "b1": rand(8), "w2": rand(8, 3)}
    xs, labels = rand(6, 4), rng.integers(0, 3, size=6)
    per_example = ts.jit(ts.vmap(ts.grad(mlp_loss), in_axes=(None, 0, 0)))(params, xs, labels)
    single = ts.grad(mlp_loss)
    for k in range(6):
        want = single(params, xs[k], labels[k : k + 1].reshape(()))
        for name in params:
            np.testing.assert_allclose(per_example[name][k], want[name], rtol=2e-5, atol=1e-6)


def test_grad_of_vmap_nested_vmap_and_one_program() -> None:
    x, w = rand(5, 3), rand(3, 2)

    def batch_loss(w, x):  # noqa: ANN001, ANN202
        return ts.vmap(lambda w, x: ((x @ w) ** 2).sum(), in_axes=(None, 0))(w, x).sum()

    np.testing.assert_allclose(ts.grad(batch_loss)(w, x), 2 * x.T @ (x @ w), rtol=1e-5)
    outer = ts.vmap(ts.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))
    np.testing.assert_allclose(outer(x[:, 0], x[0]), x[0][:, None] * x[:, 0][None, :])
    # batched at trace time: the program's op count does not grow with the batch
    f = ts.vmap(lambda x: (x @ w).tanh().sum())
    small, large = f.ir(rand(2, 3)), f.ir(rand(9, 3))
    assert small.count("tess.matmul") == large.count("tess.matmul") == 1


def test_errors_name_the_argument() -> None:
    f = ts.vmap(lambda x, y: x + y)
    with pytest.raises(
        ts.TessError,
        match=r"inconsistent sizes .* `y` \(f32\[4\]\) has size 4 at axis 0, but `x` has size 3",
    ):
        f(rand(3), rand(4))
    with pytest.raises(ts.TessError, match="out_axes is None for output `result`"):
        ts.vmap(lambda x: x * 2, out_axes=None)(rand(3))
    with pytest.raises(ts.TessError, match="at least one argument mapped"):
        ts.vmap(lambda x: x * 2, in_axes=None)(rand(3))
    with pytest.raises(ts.TessError, match=r"axis 2, but it has rank 2"):
        ts.vmap(lambda x: x * 2, in_axes=2)(rand(3, 2))


CASES = [
    # (function on the ts/jnp namespace, in_axes, out_axes, argument shapes)
    (lambda m, x, w: (x @ w).sum(0), (0, None), 0, [(5, 2, 3), (3, 4)]),
    (lambda m, x, w: m.tanh(x) * w, (1, 0), 1, [(3, 5), (5, 3)]),
    (lambda m, x, w: m.where(x > 0, x, w), (None, 0), -1, [(4,), (2, 4)]),
    (lambda m, x, w: m.concatenate([x, w], axis=0), (0, 0), 0, [(3, 2), (3, 4)]),
    (lambda m, x, w: (m.exp(x)[:, 1:] - w.max()).mean(), (2, 0), 0, [(2, 3, 6), (6, 4)]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_jax_vmap(case: int) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    fn, in_axes, out_axes, shapes = CASES[case]
    args = [rand(*shape) for shape in shapes]
    got = ts.vmap(lambda *a: fn(ts, *a), in_axes=in_axes, out_axes=out_axes)(*args)
    want = jax.vmap(lambda *a: fn(jnp, *a), in_axes=in_axes, out_axes=out_axes)(*args)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6)


def test_per_example_gradients_match_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def loss(m, w, x, y):  # noqa: ANN001, ANN202
        return ((m.tanh(x @ w) - y) ** 2).sum()

    w, x, y = rand(3, 2), rand(6, 3), rand(6, 2)
    got = ts.jit(ts.vmap(ts.grad(lambda *a: loss(ts, *a)), in_axes=(None, 0, 0)))(w, x, y)
    want = jax.vmap(jax.grad(lambda *a: loss(jnp, *a)), in_axes=(None, 0, 0))(w, x, y)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-5)


def test_closures_over_enclosing_tensors() -> None:
    w, xs = rand(3, 2), rand(4, 3)

    @ts.jit
    def apply(w, xs):  # noqa: ANN001, ANN202
        scale = w.sum()
        rows = ts.vmap(lambda x: (x @ w) * scale)(xs)  # w, scale: closed over, unmapped
        nested = ts.vmap(ts.vmap(lambda a: a * w.T.sum()))(xs)
        return rows, nested, ts.vmap(lambda x: w, out_axes=None)(xs)

    rows, nested, same = apply(w, xs)
    np.testing.assert_allclose(rows, (xs @ w) * w.sum(), rtol=1e-5)
    np.testing.assert_allclose(nested, xs * w.sum(), rtol=1e-5)
    np.testing.assert_array_equal(same, w)


def test_conv_pool_scan_and_updates_match_a_loop() -> None:
    images, kernel = rand(3, 2, 1, 6, 6), rand(4, 1, 3, 3)
    rows, idx = rand(3, 5), rng.integers(0, 5, size=(3, 2))

    def f(x, k, v, i):  # noqa: ANN001, ANN202
        pooled = ts.nn.max_pool2d(ts.nn.conv2d(x, k, padding=1), 2).sum()
        return pooled + ts.cumsum(v, 0) + ts.take_along_axis(v, i, 0).sum() + v.at[i].add(1.0)

    # the reference target: this checks the batching rules, not Numba's compile time
    got = ts.vmap(f, in_axes=(0, None, 0, 0), target="reference")(images, kernel, rows, idx)
    single = ts.jit(f, target="reference")
    for b in range(3):
        np.testing.assert_allclose(
            got[b], single(images[b], kernel, rows[b], idx[b]), rtol=1e-4, atol=1e-5
        )
    with pytest.raises(ts.TessError, match="convolution's weights"):
        ts.vmap(lambda x, k: ts.nn.conv2d(x, k))(images, np.stack([kernel] * 3))
