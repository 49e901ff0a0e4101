"""Integer and bool arrays, casts, gathers, one-hot, arg-reductions, slicing, concatenation and
`tessc.nn`, end to end through `jit` on the `cpu` and `reference` targets: values against
NumPy, gradients against float64 central differences, cross-entropy against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts
from tessc.dialects.builder_types import TessError

from helpers import central_difference

TARGETS = ("reference", "cpu")
RNG = np.random.default_rng(7)
X = RNG.normal(size=(5, 4)).astype(np.float32)
IDX = np.array([0, 4, -1, 2, 4], dtype=np.int64)
LABELS = np.array([3, 0, 1, 1, 2], dtype=np.int32)


def check(results, expected) -> None:
    for index, (actual, wanted) in enumerate(zip(results, expected, strict=True)):
        wanted = np.asarray(wanted)
        assert actual.dtype == wanted.dtype, (index, actual.dtype, wanted.dtype)
        assert actual.shape == wanted.shape, (index, actual.shape, wanted.shape)
        if wanted.dtype.kind in "biu":
            np.testing.assert_array_equal(actual, wanted, err_msg=f"result {index}")
        else:
            tol = 1e-5 if wanted.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(actual, wanted, rtol=tol, atol=tol, err_msg=f"{index}")


# ---------------------------------------------------------------------------------------
# values against NumPy
# ---------------------------------------------------------------------------------------


def dtypes_and_casts(x, i, labels):
    return (
        x > 0,
        (x > 0) & (x < 1),
        ~(x > 0) | (x == x),
        x.astype(np.int32),
        x.astype(np.float64),
        i.astype(np.float32) * x[:, :1].sum(),  # int * float is float
        i + labels,  # int32 + int64 is int64
        labels * 2 - 1,
        (x > 0).sum(axis=1),  # a sum of bools counts them
        i.max(),
        abs(labels - 2),
        ts.where(x > 0, x, 0.0),
        x.clip(-0.5, 0.5),
        i / 2,  # true division of integers is a float
    )


def dtypes_and_casts_numpy(x, i, labels):
    return (
        x > 0,
        (x > 0) & (x < 1),
        ~(x > 0) | (x == x),
        x.astype(np.int32),
        x.astype(np.float64),
        i.astype(np.float32) * x[:, :1].sum(),
        i + labels,
        labels * 2 - 1,
        (x > 0).sum(axis=1),
        np.asarray(i.max()),
        np.abs(labels - 2),
        np.where(x > 0, x, np.float32(0.0)),
        np.clip(x, -0.5, 0.5),
        (i / 2).astype(np.float32),
    )


def indexing(x, i, labels):
    return (
        x[i],
        ts.take(x, labels, 1),
        x.take(i[:2], axis=0),
        ts.one_hot(labels, 4),
        ts.one_hot(i, 3, dtype=np.int32),
        x.argmax(dim=1),
        x.argmin(axis=0, keepdims=True),
        x.argmax(),
        x[1:5:2, ::-1],
        x[0],
        x[..., -1],
        x[None, 2:, 1],
        x[::-2, 1:3][:, None],
        ts.concatenate([x, x[i][:2]], 0),
        ts.stack([x[0], x[1], x[2]], dim=1),
        x.var(axis=0, ddof=0),
        x.std(1, keepdim=True, ddof=1),
    )


def indexing_numpy(x, i, labels):
    return (
        x[i],
        np.take(x, labels, 1),
        x[i[:2]],
        np.eye(4, dtype=np.float32)[labels],
        (i[:, None] == np.arange(3)).astype(np.int32),
        x.argmax(1),
        x.argmin(0, keepdims=True),
        np.asarray(x.argmax()),
        x[1:5:2, ::-1],
        x[0],
        x[..., -1],
        x[None, 2:, 1],
        x[::-2, 1:3][:, None],
        np.concatenate([x, x[i][:2]], 0),
        np.stack([x[0], x[1], x[2]], 1),
        x.var(0),
        x.std(1, keepdims=True, ddof=1),
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "program", [(dtypes_and_casts, dtypes_and_casts_numpy), (indexing, indexing_numpy)]
)
def test_against_numpy(target: str, program) -> None:
    traced, numpy = program
    i = IDX.copy()
    check(ts.jit(traced, target=target)(X, i, LABELS), numpy(X, i, LABELS))


@pytest.mark.parametrize("target", TARGETS)
def test_argmax_ties_and_nan_follow_numpy(target: str) -> None:
    x = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 5], [-np.inf] * 4], dtype=np.float64)
    f = ts.jit(lambda x: (x.argmax(1), x.argmin(1)), target=target)
    check(f(x), (x.argmax(1), x.argmin(1)))


@pytest.mark.parametrize("target", TARGETS)
def test_out_of_range_indices_are_clamped(target: str) -> None:
    i = np.array([-7, 9, -5], dtype=np.int32)
    f = ts.jit(lambda x, i: x[i], target=target)
    check((f(X, i),), (X[np.clip(np.where(i < 0, i + 5, i), 0, 4)],))


def test_indexing_errors_are_located() -> None:
    with pytest.raises(TessError, match="out of range"):
        ts.jit(lambda x: x[7], target="reference")(X)
    with pytest.raises(TessError, match="boolean mask"):
        ts.jit(lambda x: x[x > 0], target="reference")(X)
    with pytest.raises(TessError, match="indices must be integers"):
        ts.jit(lambda x, y: ts.take(x, y), target="reference")(X, X[0])


V = RNG.normal(size=(4,)).astype(np.float32)


def numpy_habits(x, v, b):
    return (
        x @ v,  # matrix-vector
        v[:4] @ x.T,  # vector-matrix
        v @ v,
        b @ v,  # batched matrix-vector
        np.exp(x) + np.maximum(x, 0.5),  # NumPy ufuncs map to tess ops
        np.asarray(V) + x,  # an ndarray on the left
        np.sum(x, axis=1, keepdims=True),
        np.concatenate([x, x], axis=0),
        np.where(x > 0, x, 0.0),
        np.argmax(x, axis=1),
        np.transpose(b, (2, 0, 1)),  # NumPy's function: axes
        b.transpose(0, 2),  # the method is PyTorch's: two dims swapped
        b[:, :1].squeeze(),
        b.flatten(),
        b.flatten(1),
        x.sum(axis=(0, 1)),
        np.sin(x) * np.cos(x) + x.prod(axis=1, keepdims=True),
    )


def numpy_habits_numpy(x, v, b):
    return (
        x @ v,
        v[:4] @ x.T,
        np.asarray(v @ v),
        b @ v,
        np.exp(x) + np.maximum(x, np.float32(0.5)),
        V + x,
        np.sum(x, axis=1, keepdims=True),
        np.concatenate([x, x], axis=0),
        np.where(x > 0, x, np.float32(0.0)),
        np.argmax(x, axis=1),
        b.transpose(2, 0, 1),
        b.swapaxes(0, 2),
        b[:, :1].squeeze(),
        b.flatten(),
        b.reshape(2, -1),
        np.asarray(x.sum()),
        np.sin(x) * np.cos(x) + x.prod(axis=1, keepdims=True),
    )


@pytest.mark.parametrize("target", TARGETS)
def test_numpy_habits(target: str) -> None:
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    v = RNG.normal(size=(4,)).astype(np.float32)
    b = RNG.normal(size=(2, 5, 4)).astype(np.float32)
    check(ts.jit(numpy_habits, target=target)(x, v, b), numpy_habits_numpy(x, v, b))


def test_numpy_functions_without_a_tessc_form_are_located_errors() -> None:
    with pytest.raises(TessError, match=r"np.arctan .*no tessc equivalent.*test_training_ops.py"):
        ts.jit(lambda x: np.arctan(x), target="reference")(X)
    with pytest.raises(TessError, match=r"np.diff .*no tessc equivalent"):
        ts.jit(lambda x: np.diff(x), target="reference")(X)
    with pytest.raises(TessError, match=r"\(3\) and \(4\) \(3 != 4\)"):
        ts.jit(lambda x: x[0, :3] @ x[0], target="reference")(X)


# ---------------------------------------------------------------------------------------
# gradients against central differences (float64)
# ---------------------------------------------------------------------------------------


W = RNG.normal(size=(5, 4))

LOSSES = {
    "gather": lambda x, i, y: (x[i] * W[: len(IDX)]).sum(),
    "take_dim1": lambda x, i, y: (ts.take(x, y, 1) ** 2).sum(),
    "slices": lambda x, i, y: (x[1:5:2, :0:-1] * x[:2, 1:]).sum() + x[..., -1].sum() * 3,
    "concat_stack": lambda x, i, y: (
        (ts.concatenate([x, 2 * x[:2]], 0) ** 2).sum() + (ts.stack([x, x * x], 1) * 0.5).sum()
    ),
    "clip_var_std": lambda x, i, y: x.clip(-0.5, 0.7).sum() + x.var(0).sum() + x.std(1).sum(),
    "softmax": lambda x, i, y: (ts.nn.softmax(x, dim=1) * W).sum(),
    "log_softmax": lambda x, i, y: (ts.nn.log_softmax(x, axis=0) * W).sum(),
    "logsumexp": lambda x, i, y: ts.nn.logsumexp(x * 3, 1).sum(),
    "cross_entropy": lambda x, i, y: ts.nn.cross_entropy(x, y),
    "cross_entropy_sum": lambda x, i, y: ts.nn.cross_entropy(x, y, reduction="sum"),
    "mse": lambda x, i, y: ts.nn.mse_loss(x, W),
    "gelu_relu": lambda x, i, y: (ts.nn.gelu(x) * W).sum() + (ts.nn.relu(x) * W).sum(),
    "sin_cos_prod": lambda x, i, y: (
        (x.sin() * W).sum()
        + (np.cos(x) * W).sum()
        + (x + 3.0).prod(1).sum()
        + np.prod(x[:2] + 3.0, axis=0).sum()
    ),
    "matvec": lambda x, i, y: (x @ W[0, :4]).sum() + (W[:, 0] @ x * W[0]).sum(),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_match_central_differences(target: str, name: str) -> None:
    loss = LOSSES[name]
    x = X.astype(np.float64)
    value_and_grad = ts.jit(ts.value_and_grad(loss), target=target)
    value, grad = value_and_grad(x, IDX, LABELS)
    forward = ts.jit(loss, target="reference")
    expected = central_difference(lambda v: forward(v, IDX, LABELS), x)
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(value, forward(x, IDX, LABELS), rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_through_a_float_cast(target: str) -> None:
    def loss(x):
        return (x.astype(np.float32) * W.astype(np.float32)).sum().astype(np.float64)

    grad = ts.jit(ts.grad(loss), target=target)(X.astype(np.float64))
    assert grad.dtype == np.float64
    np.testing.assert_allclose(grad, W.astype(np.float32), rtol=1e-7)


def test_cross_entropy_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    x = X.astype(np.float64)
    value, grad = ts.jit(ts.value_and_grad(ts.nn.cross_entropy))(x, LABELS)
    logits = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(LABELS, dtype=torch.long))
    loss.backward()
    np.testing.assert_allclose(value, loss.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, logits.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("shape", "dim", "index_shape"),
    [((7, 3), 0, (9,)), ((4, 6, 2), 1, (3, 4)), ((3, 5), 1, (8,)), ((2, 3, 6), 2, (5,))],
)
def test_scatter_add_adds_repeated_indices_like_numpy(target: str, shape, dim, index_shape):
    """take's gradient: every element of the incoming gradient lands in the row its index
    names, repeated indices adding up (np.add.at), negative ones counting from the end."""
    rng = np.random.default_rng(len(shape) + dim)
    n = shape[dim]
    idx = rng.integers(-n, n, size=index_shape)
    idx.flat[: min(3, idx.size)] = idx.flat[0]  # some repeats for sure
    x = rng.normal(size=shape)
    w = rng.normal(size=shape[:dim] + index_shape + shape[dim + 1 :])

    def loss(x, idx):
        return (ts.take(x, idx, dim) * w).sum()

    grad = ts.jit(ts.grad(loss), target=target)(x, idx)
    expected = np.zeros(shape)
    moved = np.moveaxis(expected, dim, 0)
    np.add.at(moved, idx % n, np.moveaxis(w, list(range(dim, dim + idx.ndim)), range(idx.ndim)))
    np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-12)


def _with_zeros(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values in which rows of the last dim hold 0, 1, 2 ... zeros (in turn)."""
    x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    rows = x.reshape(-1, shape[-1])
    for r, row in enumerate(rows):
        row[rng.permutation(shape[-1])[: r % (shape[-1] + 1)]] = 0.0
    return rows.reshape(shape)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("dim", "keepdim"), [(-1, False), (0, False), ((0, 2), True), (None, False)]
)
def test_prod_gradient_at_zeros_matches_torch(target: str, dim, keepdim: bool) -> None:
    """No zero in a slice: prod / x; one: the product of the others at the zero and 0
    elsewhere; two or more: 0 (torch's rule), never NaN."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = _with_zeros((3, 4, 3), rng)
    weight = rng.normal(size=np.shape(np.prod(x, axis=dim, keepdims=keepdim)))

    def loss(v):
        return (v.prod(dim, keepdim=keepdim) * weight).sum()

    grad = ts.jit(ts.grad(loss), target=target)(x)
    t = torch.tensor(x, requires_grad=True)
    product = t.prod() if dim is None else t
    if dim is not None:
        for d in sorted((dim,) if isinstance(dim, int) else dim, reverse=True):
            product = product.prod(d, keepdim=keepdim)
    (product * torch.tensor(weight)).sum().backward()
    assert not np.isnan(grad).any()
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-12, atol=1e-15)
    expected = central_difference(ts.jit(loss, target="reference"), x)
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------------------
# tessc-run: --out result.npz, and a closed pipe
# ---------------------------------------------------------------------------------------


def test_tessc_run_writes_npz_and_stops_quietly_on_a_closed_pipe(tmp_path) -> None:
    import subprocess
    import sys

    count = 1500  # ~100 KB of text: more than a pipe buffer
    types = ", ".join(["tensor<8xf32>"] * count)
    program = tmp_path / "many.mlir"
    program.write_text(
        f"func.func @f(%a: tensor<8xf32>) -> ({types}) {{\n"
        "  %0 = tess.exp %a : tensor<8xf32>\n"
        f"  func.return {', '.join(['%0'] * count)} : {types}\n}}\n"
    )
    run = [sys.executable, "-m", "tessc.cli.run", str(program), "--pipeline", "reference"]
    out = tmp_path / "result.npz"
    assert subprocess.run([*run, "--out", str(out)], capture_output=True).returncode == 0
    arrays = np.load(out)
    assert len(arrays.files) == count and arrays["output_7"].shape == (8,)
    np.testing.assert_array_equal(arrays["output_0"], arrays["output_1499"])

    process = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    stderr = process.stderr.read()
    assert process.wait() == 141
    assert b"Traceback" not in stderr and b"Error" not in stderr, stderr


def test_many_retraces_warn_once() -> None:
    from tessc.frontend.jit import RETRACE_WARNING, RetraceWarning

    f = ts.jit(lambda x, step: x * step, target="reference", static_argnums=1)
    with pytest.warns(RetraceWarning, match=r"traced 8 times.*\(int\).*traced argument") as record:
        for step in range(RETRACE_WARNING + 3):
            f(X, step)
    assert len([w for w in record if w.category is RetraceWarning]) == 1
