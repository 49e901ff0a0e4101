"""`ts.nn.scaled_dot_product_attention` (issue 21): the fused `tess.attention` against the
reference interpreter, PyTorch (float64, skipped without it) and central differences, on
shapes with broadcast masks, causal rows, several key blocks and zero sizes; the memory
plan at L = 1024 (no `(L, S)` buffer, forward or backward) and the kernel counts."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

import tessc as ts
from tessc.dialects.builder_types import TessError
from tessc.lowering.loops.attention_kernels import JOINT_MIN_BATCH

from helpers import central_difference

RNG = np.random.default_rng(2121)
sdpa = ts.nn.scaled_dot_product_attention


def normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape)


def bool_mask(*shape: int) -> np.ndarray:
    mask = RNG.random(shape) < 0.7
    mask[..., 0, :] = False  # a row that attends to nothing (where L is its own dim)
    return mask


def float_mask(*shape: int) -> np.ndarray:
    mask = RNG.normal(size=shape)
    mask[RNG.random(shape) < 0.2] = -np.inf
    return mask


# (q, k, v shapes, mask or None, is_causal)
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], Any, bool]] = {
    "plain": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6), None, False),
    "causal": ((1, 2, 6, 4), (1, 2, 9, 4), (1, 2, 9, 3), None, True),
    "blocks": ((1, 70, 4), (1, 150, 4), (1, 150, 5), None, True),
    # several query and key blocks of 64 with partial last ones, S != L, and depths that
    # are no multiple of a vector (the kernels' padded packs and causal key-block skipping)
    "causal-tiles": ((2, 130, 13), (2, 100, 13), (2, 100, 11), None, True),
    "mask-tiles": ((1, 2, 70, 17), (1, 2, 81, 17), (1, 2, 81, 9), bool_mask(70, 81), False),
    "bool-mask": ((2, 2, 5, 4), (2, 2, 7, 4), (2, 2, 7, 4), bool_mask(5, 7), False),
    "float-mask": ((2, 3, 4, 4), (2, 3, 6, 4), (2, 3, 6, 2), float_mask(1, 3, 1, 6), False),
    "unbatched": ((5, 4), (6, 4), (6, 3), float_mask(5, 1), False),
    "batch-broadcast": ((2, 1, 3, 4), (1, 3, 5, 4), (5, 2), None, False),
    "no-keys": ((2, 3, 4), (2, 0, 4), (2, 0, 3), None, False),
    "no-queries": ((2, 0, 4), (2, 5, 4), (2, 5, 3), None, True),
    "no-batch": ((0, 3, 4), (0, 5, 4), (0, 5, 3), None, False),
    # >= JOINT_MIN_BATCH (8) batch entries: dq, dk and dv in one pass per entry (a whole-L
    # dq accumulator), over partial query and key blocks, S != L both ways
    "joint-causal": ((2, 4, 70, 5), (2, 4, 100, 5), (2, 4, 100, 3), None, True),
    "joint-mask": ((8, 130, 6), (8, 70, 6), (8, 70, 4), bool_mask(130, 70), False),
}


def case_arrays(name: str) -> tuple[list[np.ndarray], Any, bool]:
    qs, ks, vs, mask, causal = CASES[name]
    rng = np.random.default_rng(list(CASES).index(name))
    return [rng.normal(size=s) for s in (qs, ks, vs)], mask, causal


def attention(mask: Any, causal: bool, **kwargs: Any) -> Any:
    if mask is None:
        return lambda q, k, v: sdpa(q, k, v, is_causal=causal, **kwargs)
    return lambda q, k, v, m: sdpa(q, k, v, m, is_causal=causal, **kwargs)


def loss(mask: Any, causal: bool) -> Any:
    f = attention(mask, causal)
    return lambda c, *args: (f(*args) * c).sum()


def close(actual: Any, wanted: Any, tol: float = 1e-11) -> None:
    actual, wanted = np.asarray(actual), np.asarray(wanted)
    assert actual.shape == wanted.shape, (actual.shape, wanted.shape)
    np.testing.assert_allclose(actual, wanted, rtol=tol, atol=tol)


def kernel_names(ir: str) -> list[str]:
    return re.findall(r"func\.func (?:private )?@(\w+)\([^\n]*tess\.kernel", ir)


def value_and_grads(mask: Any, causal: bool) -> Any:
    """`(attention(*args), its q/k/v gradients for the cotangent c)`: one program."""
    f, grad = attention(mask, causal), ts.grad(loss(mask, causal), argnums=(1, 2, 3))
    return lambda c, *args: (f(*args), grad(c, *args))


@functools.cache
def results(name: str, target: str) -> tuple[list[np.ndarray], np.ndarray, Any]:
    """(arguments, cotangent, (value, gradients)) of case `name` on `target`, computed
    once per target for every test that reads them."""
    arrays, mask, causal = case_arrays(name)
    args = [*arrays, *([] if mask is None else [mask])]
    shape = ts.jit(attention(mask, causal), target="reference")(*args).shape
    c = np.random.default_rng(len(name)).normal(size=shape)
    return args, c, ts.jit(value_and_grads(mask, causal), target=target)(c, *args)


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_against_the_reference(name: str) -> None:
    _, _, (value, grads) = results(name, "cpu")
    _, _, (wanted, wanted_grads) = results(name, "reference")
    assert np.isfinite(wanted).all()
    close(value, wanted)
    for actual, expected in zip(grads, wanted_grads, strict=True):
        close(actual, expected)


@pytest.mark.parametrize("pipeline", ["cpu-unfused", "cpu-basic"])
def test_other_pipelines(pipeline: str) -> None:
    arrays, mask, causal = case_arrays("float-mask")
    f = attention(mask, causal)
    close(ts.jit(f, target=pipeline)(*arrays, mask), ts.jit(f, target="reference")(*arrays, mask))


def test_float32() -> None:
    q, k, v = (normal(2, 9, 8).astype(np.float32) for _ in range(3))
    f = attention(None, True)
    out = ts.jit(f)(q, k, v)
    assert out.dtype == np.float32
    close(out, ts.jit(f, target="reference")(q, k, v), tol=1e-5)


def test_float32_tiles_and_gradients() -> None:
    """f32 on the vector width's register tiles: blocks of 64 with partial last ones, an
    odd depth; values and gradients against the float64 reference."""
    q, k, v, c = normal(2, 150, 20), normal(2, 90, 20), normal(2, 90, 7), normal(2, 150, 7)
    step = value_and_grads(None, True)
    value, grads = ts.jit(step)(*(a.astype(np.float32) for a in (c, q, k, v)))
    wanted, wanted_grads = ts.jit(step, target="reference")(c, q, k, v)
    assert value.dtype == np.float32
    close(value, wanted, tol=1e-4)
    for actual, expected in zip(grads, wanted_grads, strict=True):
        close(actual, expected, tol=1e-3)


# The gradient formulas against central differences (through the two-pass backward); the
# joint backward (>= 8 entries) computes the same gradients, checked against the reference
# interpreter and PyTorch by "joint-causal" and "joint-mask" above.
@pytest.mark.parametrize("name", ["causal", "float-mask"])
def test_gradients_against_central_differences(name: str) -> None:
    qs, ks, vs, mask, causal = CASES[name]
    small = {"causal": ((1, 1, 3, 2), (1, 1, 4, 2), (1, 1, 4, 2)),
             "float-mask": ((1, 2, 2, 2), (1, 2, 3, 2), (1, 2, 3, 2))}[name]  # fmt: skip
    arrays = [normal(*s) for s in small]
    if mask is not None:
        mask = normal(1, 2, 1, 3)  # finite: the mask's gradient too
    args = [*arrays, *([] if mask is None else [mask])]
    f = ts.jit(attention(mask, causal))
    c = normal(*f(*args).shape)
    argnums = tuple(range(1, len(args) + 1))
    grads = ts.jit(ts.grad(loss(mask, causal), argnums=argnums))(c, *args)
    for position, actual in enumerate(grads):

        def at(x: np.ndarray, position: int = position) -> float:
            values = list(args)
            values[position] = x
            return float((f(*values) * c).sum())

        close(actual, central_difference(at, args[position]), tol=1e-7)


@pytest.mark.parametrize(
    "name",
    [
        "plain",
        "causal",
        "blocks",
        "causal-tiles",
        "mask-tiles",
        "bool-mask",
        "float-mask",
        "joint-causal",
        "joint-mask",
    ],
)
def test_against_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    args, c, (value, grads) = results(name, "cpu")
    mask, causal = CASES[name][3:]
    tensors = [torch.tensor(a, requires_grad=True) for a in args[:3]]
    torch_mask = None if mask is None else torch.tensor(mask)
    y = torch.nn.functional.scaled_dot_product_attention(
        *tensors, attn_mask=torch_mask, is_causal=causal
    )
    (y * torch.tensor(c)).sum().backward()
    # PyTorch gives 0 where a row attends to nothing (its _safe_softmax), as tessc.
    close(value, y.detach().numpy())
    for actual, tensor in zip(grads, tensors, strict=True):
        close(actual, tensor.grad.numpy())


def test_scale_argument() -> None:
    q, k, v = normal(4, 3), normal(5, 3), normal(5, 2)
    f = attention(None, False, scale=0.3)
    close(ts.jit(f)(q, k, v), ts.jit(lambda q, k, v: sdpa(q * 0.3, k, v, scale=1.0))(q, k, v))


def test_no_scores_buffer_at_1024() -> None:
    """The memory plan of forward + backward at L = S = 1024: every buffer is O(L); the
    composite `softmax(q @ k^T) @ v` needs the (L, L) scores."""
    length, depth = 1024, 16
    q, k, v, c = (np.zeros((1, length, depth)) for _ in range(4))
    fused = ts.jit(ts.grad(loss(None, True), argnums=(1, 2, 3)))
    ir = fused.ir(c, q, k, v, stage="loops")
    assert f"{length}x{length}" not in ir
    peaks = [int(p) for p in re.findall(r"tess\.peak_bytes = (\d+)", ir)]
    scratch = [int(p) for p in re.findall(r"tess\.workspace_bytes = (\d+)", ir)]
    assert peaks and max(peaks + scratch) < 16 * length * depth * 8
    assert max(peaks) < length * length * 8 // 8

    def composite(c, q, k, v):
        return (ts.nn.softmax(q @ k.mT / 4.0) @ v * c).sum()

    unfused = ts.jit(ts.grad(composite, argnums=(1, 2, 3))).ir(c, q, k, v, stage="loops")
    assert max(int(p) for p in re.findall(r"tess\.peak_bytes = (\d+)", unfused)) >= (
        length * length * 8
    )


def test_kernel_counts() -> None:
    """Forward: one kernel computing the output (and, for the gradient, the row
    logsumexp); backward: one computing dq, dk and dv: two parallel passes (dq over query
    blocks; dk, dv over key blocks) below 8 batch entries, one pass over the entries from
    8 on (`JOINT_MIN_BATCH`)."""
    q, k, v = normal(2, 6, 4), normal(2, 7, 4), normal(2, 7, 3)
    forward = kernel_names(ts.jit(attention(None, True)).ir(q, k, v, stage="loops"))
    assert forward == ["attention_kernel_0"]
    # Static per size: at a second size `jit` would make the batch `?` (automatic dynamic
    # shapes), where the entry count is not known and the two passes are kept.
    grad = ts.jit(ts.grad(loss(None, True), argnums=(1, 2, 3)), dynamic=False)
    for batch, passes in ((2, 2), (JOINT_MIN_BATCH, 1)):
        q, k, v = normal(batch, 6, 4), normal(batch, 7, 4), normal(batch, 7, 3)
        ir = grad.ir(normal(batch, 6, 3), q, k, v, stage="loops")
        names = kernel_names(ir)
        assert sorted(n for n in names if n.startswith("attention")) == [
            "attention_kernel_0",
            "attention_kernel_1",
        ]
        body = ir[ir.index("func.func private @attention_kernel_1(") :]
        body = body[: body.index("func.return")]
        assert body.count("scf.parallel") == passes, body


def test_dropout_needs_a_key_and_runs_with_one() -> None:
    q, k, v = normal(2, 4, 3), normal(2, 5, 3), normal(2, 5, 2)
    with pytest.raises(TessError, match="dropout_key"):
        ts.jit(lambda q, k, v: sdpa(q, k, v, dropout_p=0.5))(q, k, v)
    key = ts.random.key(0)

    def f(q, k, v, key):
        return sdpa(q, k, v, dropout_p=0.5, dropout_key=key)

    out = ts.jit(f)(q, k, v, key)
    assert out.shape == (2, 4, 2) and np.isfinite(out).all()
    close(out, ts.jit(f, target="reference")(q, k, v, key))
    assert not np.allclose(out, ts.jit(attention(None, False))(q, k, v))


@pytest.mark.parametrize(
    "shapes, mask, message",
    [
        (((3, 4), (5, 3), (5, 2)), None, r"query \(3, 4\), key \(5, 3\)"),
        (((3, 4), (5, 4), (6, 2)), None, r"value \(6, 2\)"),
        (((4,), (5, 4), (5, 2)), None, r"query must be \(\.\.\., L, E\), got shape \(4,\)"),
        (((2, 3, 4), (3, 5, 4), (3, 5, 2)), None, "batch dims .* do not broadcast"),
        (((3, 4), (5, 4), (5, 2)), np.ones((2, 5), bool), r"attn_mask of shape \(2, 5\)"),
        (((3, 4), (5, 4), (5, 2)), np.ones((3, 5), np.int64), "bool or float"),
    ],
)
def test_errors_name_the_shapes(shapes: Any, mask: Any, message: str) -> None:
    arrays = [normal(*s) for s in shapes]
    with pytest.raises(TessError, match=message):
        ts.jit(lambda q, k, v: sdpa(q, k, v, mask))(*arrays)


def test_mask_and_causal_are_exclusive() -> None:
    with pytest.raises(TessError, match="exclusive"):
        ts.jit(lambda q: sdpa(q, q, q, np.ones((3, 3), bool), is_causal=True))(normal(3, 2))


def test_the_tess_language_gives_the_tracers_ir() -> None:
    source = (
        "def f(q: f64[2, 3, 4], k: f64[2, 5, 4], v: f64[2, 5, 2], m: f64[3, 5]):\n"
        "    return scaled_dot_product_attention(q, k, v, m, scale=0.5)\n"
    )

    def f(q, k, v, m):
        return sdpa(q, k, v, m, scale=0.5)

    args = (normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 2), normal(3, 5))
    assert str(ts.parse_tess(source, "f.tess")) == ts.trace(f, *args).ir()


def test_sliced_operands_are_read_where_they_lie() -> None:
    """q, k, v as slices of one tensor (a fused qkv projection): strided views, which the
    kernel reads in place."""
    x = normal(2, 5, 12)

    def f(x):
        return sdpa(x[..., :4], x[:, 1:, 4:8], x[:, 1:, 8:])

    close(ts.jit(f)(x), ts.jit(f, target="reference")(x))


def test_vmap_adds_a_batch_dim() -> None:
    """`vmap` of attention (and of its gradient) is attention with one more batch dim; an
    unbatched mask stays one, broadcast."""
    q, k, v = normal(3, 4, 2), normal(3, 5, 2), normal(3, 5, 2)
    mask = float_mask(4, 5)

    def one(q, k, v):
        return sdpa(q, k, v, mask)

    def grads(q, k, v):
        return ts.grad(lambda q, k, v: sdpa(q, k, v, mask).sum(), argnums=(0, 1, 2))(q, k, v)

    batched = ts.jit(lambda q, k, v: (ts.vmap(one)(q, k, v), ts.vmap(grads)(q, k, v)))
    value, per_example = batched(q, k, v)
    close(value, ts.jit(one, target="reference")(q, k, v))
    for example in range(3):
        wanted = ts.jit(grads, target="reference")(q[example], k[example], v[example])
        for got, want in zip(per_example, wanted, strict=True):
            close(got[example], want)


def test_sliced_operands_verify_after_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """With `TESSC_VERIFY_PASSES=1` the module verifies after each pass: the kernel's
    declaration takes its call's strided types at `tess-bufferize` already."""
    monkeypatch.setenv("TESSC_VERIFY_PASSES", "1")
    x = normal(2, 5, 12)

    def f(x):
        return sdpa(x[..., :4], x[:, 1:, 4:8], x[:, 1:, 8:], scale=0.25)

    ir = ts.jit(f).ir(x, stage="loops")
    assert "strided<[60, 12, 1]" in ir.split("func.func private @attention_kernel_0(")[1]
