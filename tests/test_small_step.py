"""The small-program passes of issue 12 item 3: `tess-pack-narrow` (a narrow right-hand side
packed transposed: the contraction runs as dot products) and `tess-register-accumulate`
(an innermost accumulation keeps its element in a register), against the reference on
matmuls around the thresholds, batched and with epilogues; and the digits MLP step's kernel
structure (structure, not time; FileCheck in tests/filecheck/fusion/tess-pack-narrow.mlir
and tests/filecheck/loops/tess-register-accumulate.mlir)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func, scf
from xdsl.dialects.linalg.ops import GenericOp

import tessc as ts
from tessc.compiler import compile_module, lower_module
from tessc.reference import interpret, parse_module

from helpers import assert_compiles_like_reference, assert_results_match, random_inputs

MATMUL = """
func.func @f(%a: {a}, %b: {b}, %c: {c}) -> {out} {{
  %m = tess.matmul %a, %b : {a}, {b} -> {out}
  %s = tess.add %m, %c : {out}, {c} -> {out}
  %r = tess.relu %s : {out}
  func.return %r : {out}
}}
"""


def tensor(shape: tuple[int, ...], t: str) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{t}>"


def matmul(batch: tuple[int, ...], n: int, k: int, m: int, t: str = "f32") -> str:
    return MATMUL.format(
        a=tensor((*batch, n, k), t),
        b=tensor((*batch, k, m), t),
        c=tensor((m,), t),
        out=tensor((*batch, n, m), t),
    )


def packed_copies(text: str) -> int:
    """How many transposing copies `tess-pack-narrow` added (at the fused stage)."""
    fused = lower_module(parse_module(text), "fused")
    return sum(
        1
        for op in fused.walk()
        if isinstance(op, GenericOp)
        and op.attributes.get("tess.op") is not None
        and op.attributes["tess.op"].data == "tess.permute"
    )


def register_loops(text: str) -> int:
    """How many `scf.for` loops of the kernels carry a value (an accumulator)."""
    loops = lower_module(parse_module(text), "loops")
    return sum(
        1
        for fn in loops.ops
        if isinstance(fn, func.FuncOp)
        for op in fn.walk()
        if isinstance(op, scf.ForOp) and op.iter_args
    )


CASES = [
    ((), 128, 128, 10, "f32", True),  # the digits MLP's last layer
    ((), 33, 32, 15, "f64", True),  # at both thresholds
    ((), 20, 31, 10, "f32", False),  # too shallow: dots of 31
    ((), 20, 64, 16, "f32", False),  # wide enough for i-k-j
    ((2,), 9, 40, 3, "f32", True),  # batched, 3 columns
    ((), 5, 48, 1, "f64", True),  # a matrix-vector product
]


@pytest.mark.parametrize(("batch", "n", "k", "m", "t", "packed"), CASES)
def test_narrow_matmuls_match_the_reference(
    batch: tuple[int, ...], n: int, k: int, m: int, t: str, packed: bool
) -> None:
    text = matmul(batch, n, k, m, t)
    assert packed_copies(text) == int(packed)
    assert_compiles_like_reference(text, 3)


def test_transposed_lhs_is_not_packed() -> None:
    """`x.T @ dz`: the left operand does not run unit stride over k, so no dot form."""
    text = """
func.func @f(%x: tensor<64x24xf32>, %d: tensor<64x10xf32>) -> tensor<24x10xf32> {
  %t = tess.permute %x dims = [1, 0] : tensor<64x24xf32> -> tensor<24x64xf32>
  %m = tess.matmul %t, %d : tensor<24x64xf32>, tensor<64x10xf32> -> tensor<24x10xf32>
  func.return %m : tensor<24x10xf32>
}
"""
    assert_compiles_like_reference(text, 4)


TRANSPOSED = """
func.func @f(%p: {p}, %d: {d}, %w: {out}) -> ({out}, {hidden}) {{
  %h = tess.relu %p : {hidden}
  %t = tess.permute %h dims = {dims} : {hidden} -> {ht}
  %m = tess.matmul %t, %d : {ht}, {d} -> {out}
  %u = tess.sub %w, %m : {out}, {out} -> {out}
  %wt = tess.permute %w dims = {dims} : {out} -> {outt}
  %wt2 = tess.permute %w dims = {dims} : {out} -> {outt}
  %v = tess.matmul %d, %wt : {d}, {outt} -> {hidden}
  %v2 = tess.matmul %d, %wt2 : {d}, {outt} -> {hidden}
  %s = tess.add %v, %v2 : {hidden}, {hidden} -> {hidden}
  func.return %u, %s : {out}, {hidden}
}}
"""


@pytest.mark.parametrize(
    ("batch", "k", "n", "m", "t"),
    [((), 128, 128, 10, "f32"), ((), 40, 24, 3, "f64"), ((2,), 33, 17, 5, "f32")],
)
def test_transposed_narrow_products_match_the_reference(
    batch: tuple[int, ...], k: int, n: int, m: int, t: str
) -> None:
    """`relu(p).T @ d` (a last layer's weight gradient) runs transposed with no copy of
    `relu(p).T`; the twice-transposed `w` is one copy (`tess-cse-generics`)."""
    rank = len(batch) + 2
    dims = "[" + ", ".join(str(i) for i in [*range(rank - 2), rank - 1, rank - 2]) + "]"
    text = TRANSPOSED.format(
        p=tensor((*batch, k, n), t),
        hidden=tensor((*batch, k, n), t),
        ht=tensor((*batch, n, k), t),
        d=tensor((*batch, k, m), t),
        out=tensor((*batch, n, m), t),
        outt=tensor((*batch, m, n), t),
        dims=dims,
    )
    # Two transposing copies left: `w`'s (once) and the narrow product's, transposed back.
    assert packed_copies(text) == 2
    assert_compiles_like_reference(text, 7)


REDUCTIONS = """
func.func @f(%x: tensor<7x13xf64>, %y: tensor<7x13xf64>)
    -> (tensor<7x1xf64>, tensor<7xf64>, tensor<f64>) {
  %m = tess.reduce_max %x dims = [1] keepdim : tensor<7x13xf64> -> tensor<7x1xf64>
  %p = tess.mul %x, %y : tensor<7x13xf64>, tensor<7x13xf64> -> tensor<7x13xf64>
  %s = tess.sum %p dims = [1] : tensor<7x13xf64> -> tensor<7xf64>
  %t = tess.sum %x dims = [0, 1] : tensor<7x13xf64> -> tensor<f64>
  func.return %m, %s, %t : tensor<7x1xf64>, tensor<7xf64>, tensor<f64>
}
"""


def test_row_reductions_accumulate_in_registers() -> None:
    assert register_loops(REDUCTIONS) >= 3
    assert_compiles_like_reference(REDUCTIONS, 5)


def test_column_sums_are_left_in_memory() -> None:
    """`x.sum(dim=0)`: the element changes with the inner loop; nothing to keep."""
    text = """
func.func @f(%x: tensor<9x40xf32>) -> tensor<40xf32> {
  %s = tess.sum %x dims = [0] : tensor<9x40xf32> -> tensor<40xf32>
  func.return %s : tensor<40xf32>
}
"""
    assert register_loops(text) == 0
    assert_compiles_like_reference(text, 6)


# -- the call path: one argument plan per signature, donated arrays back in place ---------

LR = 0.01


def _loss(params, x, y):
    h = (x @ params["w1"] + params["b1"]).relu()
    z = h @ params["w2"] + params["b2"]
    return ((z - y) * (z - y)).sum() / x.shape[0]


def _mlp_step(params, x, y):
    loss, grads = ts.value_and_grad(_loss)(params, x, y)
    return {k: params[k] - LR * grads[k] for k in params}, loss


def _params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"w1": (8, 16), "b1": (16,), "w2": (16, 10), "b2": (10,)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def test_argument_plan_is_built_once_and_donated_arrays_come_back() -> None:
    step = ts.jit(_mlp_step, donate_argnums=0)
    reference = ts.jit(_mlp_step, target="reference")
    rng = np.random.default_rng(1)
    params = _params(0)
    expected = {k: v.copy() for k, v in params.items()}
    for _ in range(4):
        x = rng.standard_normal((12, 8)).astype(np.float32)
        y = rng.standard_normal((12, 10)).astype(np.float32)
        expected, expected_loss = reference(expected, x, y)
        before = dict(params)
        params, loss = step(params, x, y)
        for k in params:  # updated in place: the very arrays passed in
            assert params[k] is before[k]
            np.testing.assert_allclose(params[k], expected[k], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    assert step.trace_count == 1
    assert step.plan_builds == 1
    assert step._fast is not None and step._fast.call == step._fast.compiled.call_checked


def test_overlapping_donated_inputs_are_refused() -> None:
    """A donated array that another argument views is refused (issue 22), on the slow
    call and on the planned one alike (the plan sends it to the general path)."""

    def f(w, v):
        return w * 2.0, v + 1.0

    step = ts.jit(f, donate_argnums=0)
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(ValueError, match="argument `w` is donated to `f` but shares memory"):
        w = base.copy()
        step(w, w[:])  # a view of the donated array
    for _ in range(2):  # the slow call, then the planned one
        doubled, shifted = step(base.copy(), base + 0.0)
        np.testing.assert_array_equal(doubled, base * 2)
        np.testing.assert_array_equal(shifted, base + 1)
    assert step._fast is not None and step._fast.plan is not None
    w = base.copy()
    with pytest.raises(ValueError, match="shares memory"):
        step(w, w[1:])


TWO_PRODUCTS = """
func.func @f(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %v: tensor<64x48xf32>)
    -> (tensor<64x64xf32>, tensor<64x48xf32>) {
  %h = tess.matmul %x, %w : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %r = tess.relu %h : tensor<64x64xf32>
  %y = tess.matmul %x, %v : tensor<64x64xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  func.return %r, %y : tensor<64x64xf32>, tensor<64x48xf32>
}
"""


def test_packed_scratch_lives_in_the_workspace() -> None:
    """`tess-hoist-scratch`: the packed products' panels are workspace views (no
    allocation in the generated code), shared by both products, and calls that reuse the
    workspace still match the reference."""
    from tessc.compiler import numba_source

    module = parse_module(TWO_PRODUCTS)
    source = numba_source(module)
    assert "micro_mma" in source and "np.empty" not in source
    compiled = compile_module(module, "f")
    for seed in (8, 9):
        args = random_inputs(next(iter(module.ops)), seed)
        assert_results_match(compiled(*args), interpret(module, "f", args))


def test_call_plan_falls_back_on_any_other_call() -> None:
    """The planned call (`call_plan`): straight-line checks of the last signature; a call
    it does not cover (another structure, dtype, layout, an overlapping donation) runs
    the general path, with the same results as the reference."""
    step = ts.jit(_mlp_step, donate_argnums=0)
    reference = ts.jit(_mlp_step, target="reference")
    rng = np.random.default_rng(3)
    params = _params(1)
    x = rng.standard_normal((12, 8)).astype(np.float32)
    y = rng.standard_normal((12, 10)).astype(np.float32)
    params, _ = step(params, x, y)
    assert step._fast is not None and step._fast.plan is not None
    variants = [
        ("planned", lambda p: (p, x, y)),
        ("strided x", lambda p: (p, np.asfortranarray(x), y)),
        ("f64 y", lambda p: (p, x, y.astype(np.float64))),
        ("extra key", lambda p: ({**p, "extra": np.ones(3, np.float32)}, x, y)),
        ("list", lambda p: ([p], x, y)),
    ]
    for name, make in variants:
        args = make({k: v.copy() for k, v in params.items()})
        try:
            expected = reference(*args)
        except Exception:  # the function rejects this structure: so must the jit
            with pytest.raises(Exception):  # noqa: B017
                step(*args)
            continue
        got = step(*args)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-4, err_msg=name)
        for k in expected[0]:
            np.testing.assert_allclose(got[0][k], expected[0][k], rtol=1e-4, atol=1e-5)
    # Donated arrays that overlap (b1 a view of w1's first row): refused (issue 22).
    params, _ = step(params, x, y)  # the plan is this signature again
    shared = {k: v.copy() for k, v in params.items()}
    shared["b1"] = shared["w1"][0]
    with pytest.raises(ValueError, match="shares memory"):
        step(shared, x, y)
    # A read-only donated array (copied, the caller's keeps its values) and one that is a
    # view of a larger buffer: the runner's checks send both to the exact path.
    for name in ("read-only", "view"):
        odd = {k: v.copy() for k, v in params.items()}
        if name == "read-only":
            odd["w2"].flags.writeable = False
        else:
            odd["w2"] = np.concatenate([odd["w2"], odd["w2"]])[: len(odd["w2"])]
        before = odd["w2"].copy()
        expected = reference({k: v.copy() for k, v in odd.items()}, x, y)
        got = step(odd, x, y)
        if name == "read-only":
            assert got[0]["w2"] is not odd["w2"]
            np.testing.assert_array_equal(odd["w2"], before)
        for k in expected[0]:
            np.testing.assert_allclose(
                got[0][k], expected[0][k], rtol=1e-4, atol=1e-5, err_msg=f"{name} {k}"
            )
    # Arrays that own their memory: updated in place through the plan.
    own = {k: v.copy() for k, v in params.items()}
    got = step(own, x, y)
    assert all(got[0][k] is own[k] for k in own)


@pytest.mark.parametrize(
    "text",
    [
        # A one-hot operand (its body reads its loop indices) of a narrow product: not a
        # transposing copy (found by `python -m tessc.fuzz programs`, seed 12000064).
        """
func.func @f(%a: tensor<1xi32>, %b: tensor<5x5xf32>) -> tensor<1x5xf32> {
  %o = tess.one_hot %a : tensor<1xi32> -> tensor<1x5xf32>
  %s = tess.mul %o, %o : tensor<1x5xf32>, tensor<1x5xf32> -> tensor<1x5xf32>
  %m = tess.matmul %s, %b : tensor<1x5xf32>, tensor<5x5xf32> -> tensor<1x5xf32>
  func.return %m : tensor<1x5xf32>
}
""",
        # A column broadcast (read at (d0) in a 2-d copy) is no transpose either.
        """
func.func @f(%a: tensor<6x1xf32>, %x: tensor<6x7xf32>, %b: tensor<7x3xf32>) -> tensor<6x3xf32> {
  %e = tess.exp %a : tensor<6x1xf32>
  %w = tess.add %x, %e : tensor<6x7xf32>, tensor<6x1xf32> -> tensor<6x7xf32>
  %m = tess.matmul %w, %b : tensor<6x7xf32>, tensor<7x3xf32> -> tensor<6x3xf32>
  func.return %m : tensor<6x3xf32>
}
""",
    ],
)
def test_narrow_products_of_other_operands_match_the_reference(text: str) -> None:
    assert_compiles_like_reference(text, 11)


@pytest.mark.parametrize("batch", [16, 17])
def test_edge_tiles_do_not_make_a_small_step_parallel(batch: int) -> None:
    """A batch that is no multiple of the row tile leaves edge tiles whose remainder loops
    have runtime bounds (`rows // 8`); counted as unbounded work they made the 17-row
    digits MLP step's kernels parfors, a thread launch per call (10-60x the step at 16 or
    32 rows). Below the parallel threshold both batches compile serial."""
    rng = np.random.default_rng(3)
    shapes = {"w1": (64, 128), "b1": (128,), "w2": (128, 10), "b2": (10,)}
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    x = rng.standard_normal((batch, 64)).astype(np.float32)
    y = rng.standard_normal((batch, 10)).astype(np.float32)
    source = ts.jit(_mlp_step).ir(params, x, y, stage="numba")
    assert "prange" not in source
