"""
`tess-fuse-horizontal`: kernel counts, optimizer steps against the reference interpreter,
a NumPy reimplementation of torch.optim.Adagrad and (when installed) torch itself, the
runtime's zero-copy and packing paths, donation in place, chunked loops, and refusals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, UnitAttr
from xdsl.dialects.linalg.ops import GenericOp

import tessc
from tessc.compiler import compile_module, lower_module
from tessc.context import make_context
from tessc.dialects import contract
from tessc.dialects.kernel import GroupOp
from tessc.lowering.fusion.fuse_horizontal import TessFuseHorizontalPass
from tessc.lowering.fusion.fuse_horizontal_groups import elementwise_refusal
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret, parse_module
from tessc.runtime.executor import arena_of

LR, LR_DECAY, WEIGHT_DECAY, EPS = 0.05, 0.1, 0.01, 1e-10
SHAPES = [(6,), (3, 4), (2, 3, 2), (17,), (4, 5)]


def sgd(lr: Any, params: list, grads: list) -> list:
    return [p - lr * g for p, g in zip(params, grads, strict=True)]


ADAGRAD = tessc.optim.Adagrad(lr=LR, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS)


def adagrad(step: Any, params: list, grads: list, states: list) -> tuple[list, list]:
    """torch.optim.Adagrad's step with weight decay and lr decay: `tessc.optim.Adagrad`'s,
    traced with the step count `step` (1 on the first step) and the sums `states`."""
    new_params, state = ADAGRAD.step(params, grads, {"step": step - 1.0, "sum": states})
    return new_params, state["sum"]


def numpy_adagrad(step: int, params, grads, states) -> tuple[list, list]:
    """torch.optim.Adagrad (`_single_tensor_adagrad`) in NumPy, out of place."""
    clr = LR / (1 + (step - 1) * LR_DECAY)
    new_params, new_states = [], []
    for p, g, s in zip(params, grads, states, strict=True):
        g = g + WEIGHT_DECAY * p
        s = s + g * g
        new_params.append(p - clr * (g / (np.sqrt(s) + EPS)))
        new_states.append(s)
    return new_params, new_states


def arrays(shapes: Sequence[tuple[int, ...]], seed: int, low: float = -1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, 1.0, s).astype(np.float32) for s in shapes]


def scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def donate(module: ModuleOp, prefixes: Sequence[str]) -> ModuleOp:
    """`module` with its entry's arguments named `<prefix>...` marked `{tess.donated}`."""
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    function.properties["arg_attrs"] = ArrayAttr(
        [
            DictionaryAttr(
                {"tess.donated": UnitAttr()}
                if (arg.name_hint or "").startswith(tuple(prefixes))
                else {}
            )
            for arg in function.body.block.args
        ]
    )
    return module


def kernels(module: ModuleOp, pipeline: str = "cpu") -> list[func.FuncOp]:
    lowered = lower_module(module, "loops", pipeline=pipeline)
    return [
        op for op in lowered.ops if isinstance(op, func.FuncOp) and "tess.kernel" in op.attributes
    ]


@pytest.fixture(scope="module")
def adagrad_module() -> ModuleOp:
    module = tessc.trace(
        adagrad, scalar(1.0), arrays(SHAPES, 0), arrays(SHAPES, 1), arrays(SHAPES, 2)
    ).module
    return donate(module, ("params", "states"))


@pytest.fixture(scope="module")
def adagrad_program(adagrad_module: ModuleOp) -> Any:
    return compile_module(adagrad_module, "adagrad")


def initial_state() -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    return arrays(SHAPES, 0), arrays(SHAPES, 1), arrays(SHAPES, 2, low=0.0)


# ---------------------------------------------------------------------------------------
# kernel counts
# ---------------------------------------------------------------------------------------


def test_sgd_updates_become_one_kernel() -> None:
    shapes = [(i % 5 + 1, 3) if i % 2 else (i + 2,) for i in range(12)]
    module = tessc.trace(sgd, scalar(0.1), arrays(shapes, 0), arrays(shapes, 1)).module
    assert len(kernels(module, "cpu-unfused")) == 2 * len(shapes)  # a mul and a sub each
    # The cpu pipeline packs only the updates of donated arguments (`donated-only`).
    assert len(kernels(module)) == len(shapes)
    donate(module, ("params",))
    (kernel,) = kernels(module)
    fused = lower_module(module, "fused")
    generics = [op for op in fused.walk() if isinstance(op, GenericOp)]
    assert len(generics) == 1 and generics[0].results[0].type.get_shape() == (
        sum(int(np.prod(s)) for s in shapes),
    )


def test_adagrad_is_one_kernel_over_the_arenas(adagrad_module: ModuleOp) -> None:
    # The learning rate's scalar chain is the arena kernel's scalar prologue.
    (found,) = kernels(adagrad_module)
    assert any(a.type.get_shape() == (67,) for a in found.args)  # 6 + 12 + 12 + 17 + 20
    assert len(kernels(adagrad_module, "cpu-unfused")) > 5 * len(SHAPES)


def test_kernel_count_with_a_given_learning_rate() -> None:
    def step(clr: Any, params: list, grads: list, states: list) -> tuple[list, list]:
        new_params, new_states = [], []
        for p, g, s in zip(params, grads, states, strict=True):
            s = s + g * g
            new_params.append(p - clr * g / (tessc.sqrt(s) + EPS))
            new_states.append(s)
        return new_params, new_states

    params, grads, states = initial_state()
    module = tessc.trace(step, scalar(0.1), params, grads, states).module
    assert len(kernels(donate(module, ("params", "states")))) == 1


# ---------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------


def test_sgd_matches_the_reference() -> None:
    shapes = [(3,), (2, 2), (5, 1), (1, 7)]
    params, grads = arrays(shapes, 3), arrays(shapes, 4)
    # Through tessc.jit (nothing donated: not packed) and donated (packed).
    expected = tessc.jit(sgd, target="reference")(scalar(0.3), params, grads)
    for got, want in zip(tessc.jit(sgd)(scalar(0.3), params, grads), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    module = donate(tessc.trace(sgd, scalar(0.3), params, grads).module, ("params",))
    program = compile_module(module, "sgd")
    assert program.input_slots  # packed
    outputs = program(scalar(0.3), *[p.copy() for p in params], *grads)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        assert got.shape == want.shape


def test_adagrad_matches_reference_and_numpy_over_steps(adagrad_module, adagrad_program) -> None:
    params, grads, states = initial_state()
    expected = ([p.copy() for p in params], [s.copy() for s in states])
    for step in range(1, 5):
        args = [scalar(step), *params, *grads, *states]
        reference = interpret(adagrad_module, "adagrad", args)
        outputs = adagrad_program(*args)
        for got, want in zip(outputs, reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        expected = numpy_adagrad(step, expected[0], grads, expected[1])
        params, states = list(outputs[: len(SHAPES)]), list(outputs[len(SHAPES) :])
        for got, want in zip([*params, *states], [*expected[0], *expected[1]], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        grads = arrays(SHAPES, 10 + step)


def test_adagrad_matches_torch(adagrad_program) -> None:
    torch = pytest.importorskip("torch")
    params, grads, states = initial_state()
    tensors = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params]
    optimizer = torch.optim.Adagrad(
        tensors, lr=LR, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS, foreach=False
    )
    for tensor, s in zip(tensors, states, strict=True):
        optimizer.state[tensor]["sum"].copy_(torch.from_numpy(s))
    for step in range(1, 5):
        grads = arrays(SHAPES, 20 + step)
        for tensor, g in zip(tensors, grads, strict=True):
            tensor.grad = torch.from_numpy(g)
        optimizer.step()
        outputs = adagrad_program(scalar(step), *params, *grads, *states)
        params, states = list(outputs[: len(SHAPES)]), list(outputs[len(SHAPES) :])
        for tensor, p, s in zip(tensors, params, states, strict=True):
            np.testing.assert_allclose(p, tensor.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(s, optimizer.state[tensor]["sum"].numpy(), rtol=1e-5)


# ---------------------------------------------------------------------------------------
# the runtime: zero copy, packing, donation
# ---------------------------------------------------------------------------------------


def test_arena_views_are_passed_without_a_copy_and_updated_in_place(adagrad_program) -> None:
    params0, grads0, states0 = initial_state()
    params, grads, states = (tessc.arena(a) for a in (params0, grads0, states0))
    buffers = [tessc.arena_buffer(a) for a in (params, grads, states)]
    args = [scalar(1.0), *params, *grads, *states]
    host_inputs, zero_copy = adagrad_program.pack_inputs(args)
    assert sorted(zero_copy) == [1, 2, 3]
    for host, buffer in zip(host_inputs[1:], buffers, strict=True):
        assert buffer is not None and host.ctypes.data == buffer.ctypes.data  # the same memory

    expected = numpy_adagrad(1, params0, grads0, states0)
    outputs = adagrad_program(*args)
    assert all(o is a for o, a in zip(outputs, [*params, *states], strict=True))
    for got, want in zip([*params, *states], [*expected[0], *expected[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(grads[1], grads0[1])  # not donated: unchanged

    # The same views again: the cached arena, still in place.
    again = adagrad_program(scalar(2.0), *params, *grads, *states)
    assert all(o is a for o, a in zip(again, [*params, *states], strict=True))


def test_separate_arrays_are_packed_and_left_unchanged(adagrad_program) -> None:
    params, grads, states = initial_state()
    originals = [a.copy() for a in (*params, *states)]
    args = [scalar(1.0), *params, *grads, *states]
    _, zero_copy = adagrad_program.pack_inputs(args)
    assert not zero_copy
    outputs = adagrad_program(*args)
    expected = numpy_adagrad(1, params, grads, states)
    for got, want in zip(outputs, [*expected[0], *expected[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for array, original in zip([*params, *states], originals, strict=True):
        np.testing.assert_array_equal(array, original)  # the packed copy was updated
    assert outputs[0].shape == SHAPES[0] and outputs[1].shape == SHAPES[1]


def test_outputs_fed_back_are_passed_without_a_copy(adagrad_program) -> None:
    params, grads, states = initial_state()
    outputs = adagrad_program(scalar(1.0), *params, *grads, *states)  # packed
    new_params, new_states = outputs[: len(SHAPES)], outputs[len(SHAPES) :]
    args = [scalar(2.0), *new_params, *grads, *new_states]
    assert sorted(adagrad_program.pack_inputs(args)[1]) == [1, 3]  # views of the arenas
    expected = numpy_adagrad(1, params, grads, states)
    expected = numpy_adagrad(2, expected[0], grads, expected[1])
    again = adagrad_program(*args)
    assert all(o is a for o, a in zip(again, [*new_params, *new_states], strict=True))
    for got, want in zip(again, [*expected[0], *expected[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_views_of_one_buffer_in_another_order_are_packed(adagrad_program) -> None:
    params, grads, states = initial_state()
    reversed_params = tessc.arena(params[::-1])[::-1]  # each at another offset
    args = [scalar(1.0), *reversed_params, *grads, *states]
    assert 1 not in adagrad_program.pack_inputs(args)[1]
    expected = numpy_adagrad(1, params, grads, states)
    for got, want in zip(adagrad_program(*args), [*expected[0], *expected[1]], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_arena_of_checks_offsets_and_buffer() -> None:
    a, b = tessc.arena([np.ones(3, np.float32), np.zeros((2, 2), np.float32)])
    whole = arena_of([a, b], [0, 3], 7)
    assert whole is not None and whole.shape == (7,) and np.shares_memory(whole, a)
    assert arena_of([a, b], [0, 4], 8) is None
    assert arena_of([b, a], [0, 4], 7) is None
    assert arena_of([np.ones(3, np.float32), np.ones(4, np.float32)], [0, 3], 7) is None
    assert tessc.arena_buffer([b, a]) is None


def test_wrong_inputs_are_reported_in_the_callers_terms(adagrad_program) -> None:
    params, grads, states = initial_state()
    params[1] = params[1].reshape(4, 3)
    with pytest.raises(
        ValueError, match=r"input 2 \('params_1'\) has shape \(4,3\), expected \(3,4\)"
    ):
        adagrad_program(scalar(1.0), *params, *grads, *states)
    with pytest.raises(ValueError, match="takes 16 inputs"):
        adagrad_program(scalar(1.0), *params)


# ---------------------------------------------------------------------------------------
# chunked loops
# ---------------------------------------------------------------------------------------


def test_chunked_arena_loop() -> None:
    from tessc.lowering.codegen.to_numba import emit_numba
    from tessc.runtime import Executable, load_source

    shapes = [(7,), (3, 5), (11,)]  # 33 elements: 4 chunks of 9, the last one short
    module = tessc.trace(sgd, scalar(0.5), arrays(shapes, 5), arrays(shapes, 6)).module
    spec = get_pipeline("cpu").spec.replace("donated-only=true", "chunk-size=9")
    assert "tess-fuse-horizontal{chunk-size=9}" in spec
    lowered = module.clone()
    run_passes(lowered, spec)
    args = [scalar(0.5), *arrays(shapes, 5), *arrays(shapes, 6)]
    for threaded, chunks in [(False, "in prange(4):"), (True, "sgd_kernel_0, 4, ")]:
        source = emit_numba(lowered, parallel_threshold=0, threaded_kernels=threaded)
        assert chunks in source and "np.uint64(9)" in source
        program = Executable(load_source(source), "sgd")
        for got, want in zip(program(*args), interpret(module, "sgd", args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# refusals and reports
# ---------------------------------------------------------------------------------------

DEPENDENT = """
func.func @f(%lr: tensor<f32>, %w0: tensor<4xf32>, %g0: tensor<4xf32>, %w1: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %u0 = tess.mul %lr, %g0 : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %n0 = tess.sub %w0, %u0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %u1 = tess.mul %lr, %n0 : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %n1 = tess.sub %w1, %u1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %n0, %n1 : tensor<4xf32>, tensor<4xf32>
}
"""


def horizontal(text: str, **options: Any) -> ModuleOp:
    module = parse_module(text)
    run_passes(module, "tess-to-linalg")
    TessFuseHorizontalPass(**options).apply(make_context(), module)
    module.verify()
    return module


def refusals(module: ModuleOp) -> list[str]:
    return [
        reason
        for op in module.walk()
        if isinstance(op, GenericOp) and (reason := contract.HORIZONTAL_REFUSED.get(op)) is not None
    ]


def test_a_dependency_is_refused_and_results_still_match() -> None:
    module = horizontal(DEPENDENT, report=True, merge_siblings=False)
    reasons = refusals(module)
    assert any("operand 1 is computed" in r and "must not depend" in r for r in reasons)
    (function,) = module.ops
    assert not contract.ARENA_LAYOUT.has(function)  # the other mul/sub pairs are not updates
    source = parse_module(DEPENDENT)
    args = [scalar(0.5), *arrays([(4,)] * 3, 7)]
    program = compile_module(source, "f")
    for got, want in zip(program(*args), interpret(source, "f", args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_mixed_dtypes_are_accepted() -> None:
    module = parse_module(
        """
func.func @f(%x: tensor<3xf32>, %y: tensor<3xf64>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x, %y : tensor<3xf32>, tensor<3xf64>) outs(%e : tensor<3xf32>) {
  ^bb0(%a: f32, %b: f64, %o: f32):
    %t = arith.truncf %b : f64 to f32
    %s = arith.addf %a, %t : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}
"""
    )
    (generic,) = [op for op in module.walk() if isinstance(op, GenericOp)]
    assert elementwise_refusal(generic) is None  # each operand position is its own arena


def test_groups_are_reported_and_the_pass_is_idempotent() -> None:
    shapes = [(3,), (2, 2), (5,)]
    module = tessc.trace(sgd, scalar(0.1), arrays(shapes, 0), arrays(shapes, 1)).module
    run_passes(module, "tess-to-linalg,tess-fuse")
    TessFuseHorizontalPass(report=True).apply(make_context(), module)
    (generic,) = [op for op in module.walk() if isinstance(op, GenericOp)]
    assert contract.HORIZONTAL_MEMBERS.get(generic) == 3
    text = str(module)
    TessFuseHorizontalPass(report=True).apply(make_context(), module)
    assert str(module) == text


def test_donated_only_leaves_undonated_updates_apart() -> None:
    shapes = [(3,), (2, 2)]
    module = tessc.trace(sgd, scalar(0.1), arrays(shapes, 0), arrays(shapes, 1)).module
    run_passes(module, "tess-to-linalg,tess-fuse")
    TessFuseHorizontalPass(report=True, donated_only=True).apply(make_context(), module)
    reasons = refusals(module)
    assert len(reasons) == 2 and all("donated-only" in r for r in reasons)
    donate(module, ("params",))
    TessFuseHorizontalPass(report=True, donated_only=True).apply(make_context(), module)
    (function,) = module.ops
    assert contract.ARENA_LAYOUT.has(function)


def test_scalar_prologue_joins_the_arena_kernel_only_when_nothing_else_reads_it() -> None:
    shapes = [(3,), (2, 2), (5,)]

    def step(lr: Any, params: list, grads: list) -> tuple:
        scaled = lr * 0.5  # rank-0, from an argument: the arena kernel's prologue
        return [p - scaled * g for p, g in zip(params, grads, strict=True)], scaled + 1.0

    def shared(lr: Any, params: list, grads: list, other: Any) -> tuple:
        # A pow, which tess-fuse does not recompute per element, also read by `other`'s
        # op: it stays a kernel of its own.
        scaled = 0.5**lr
        updated = [p - scaled * g for p, g in zip(params, grads, strict=True)]
        return updated, (other * scaled).exp()

    args = (scalar(0.2), arrays(shapes, 0), arrays(shapes, 1))
    module = donate(tessc.trace(step, *args).module, ("params",))
    (kernel,) = kernels(module)
    lowered = lower_module(module, "fused")
    (group,) = [op for op in lowered.walk() if isinstance(op, GroupOp)]
    ranks = sorted(len(op.iterator_types) for op in group.members() if isinstance(op, GenericOp))
    assert ranks[0] == 0 and ranks[-1] == 1  # the rank-0 prologue, then the 1-D arena loop
    program = compile_module(module, "step")
    for got, want in zip(
        program(*args[:1], *args[1], *args[2]),
        interpret(module, "step", [args[0], *args[1], *args[2]]),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6)

    other = arrays([(4,)], 2)[0]
    module = donate(tessc.trace(shared, *args, other).module, ("params",))
    assert len(kernels(module)) == 3  # the rank-0 chain, the arena, `other`'s map
    assert not [op for op in lower_module(module, "fused").walk() if isinstance(op, GroupOp)]


def test_a_one_element_epilogue_left_unpacked_stays_in_its_group() -> None:
    # tess-fuse-epilogue groups `p * |p|` after the norm of a one-element `p` (extent-1
    # loops are no loops); the segmented step takes the product out of the group to compare
    # parameters, and puts it back when no family packs it (one parameter is too few).
    def scale(p: Any) -> Any:
        return p * (p * p).sum().sqrt()

    module = donate(tessc.trace(scale, arrays([(1,)], 0)[0]).module, ("p",))
    before = module.clone()
    run_passes(before, "tess-to-linalg,tess-fuse,tess-fuse-epilogue")
    after = before.clone()
    run_passes(after, "tess-fuse-horizontal{donated-only=true}")
    (grouped,) = [op for op in before.walk() if isinstance(op, GroupOp)]
    assert [str(t) for t in grouped.res.types] == ["tensor<1xf32>"]  # the product is in it
    groups = [op for op in after.walk() if isinstance(op, GroupOp)]
    assert len(groups) == 1 and [str(t) for t in groups[0].res.types] == ["tensor<1xf32>"]
    assert [op.name for op in groups[0].walk()] == [op.name for op in grouped.walk()]
    x = arrays([(1,)], 3)[0]
    program = compile_module(module, "scale")
    np.testing.assert_allclose(program(x.copy())[0], interpret(module, "scale", [x])[0], rtol=1e-6)
