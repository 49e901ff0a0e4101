"""An optimizer step's steady-state call (issue 24 §3): the parameters and state it returns
are views of its arenas, and passed back they are taken without flattening the pytree on
the general path, without a packing copy and without a new array: the step updates them
in place. Separately allocated parameters are packed once (the first call); gradients
that are views of one buffer (what a jitted function returns) are never packed, and
separate gradient arrays neither: the step's member form reads each where it lies. A
view of a returned arena passed where it would overlap a donated argument still takes
the general path, which refuses it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tessc as ts
import tessc.frontend.jit as jit_module
import tessc.optim as optim_module
from tessc.frontend.call_plan import BULK_LEAVES

COUNT = 40  # parameters: past BULK_LEAVES leaves, the planned call checks them in bulk
LR, MOMENTUM = 0.05, 0.9


SIZES = [int(n) for n in np.random.default_rng(0).integers(1, 300, COUNT)]


def _params(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for n in SIZES]


@pytest.fixture
def general_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a call flattened its pytree: jit's general path, and `opt.step`'s own."""
    counts = {"jit": 0, "optim": 0}
    flatten, leaves = jit_module.flatten_arguments, optim_module._leaves

    def counted_flatten(*args: Any, **kwargs: Any) -> Any:
        counts["jit"] += 1
        return flatten(*args, **kwargs)

    def counted_leaves(*args: Any, **kwargs: Any) -> Any:
        counts["optim"] += 1
        return leaves(*args, **kwargs)

    monkeypatch.setattr(jit_module, "flatten_arguments", counted_flatten)
    monkeypatch.setattr(optim_module, "_leaves", counted_leaves)
    return counts


def _executable(opt: ts.optim.Optimizer) -> Any:
    return next(iter(opt._compiled["cpu"]._compiled.values()))


def _reference(params: list[np.ndarray], grads: list[np.ndarray], steps: int) -> list:
    """`torch.optim.SGD(lr, momentum)` in NumPy, f32."""
    params = [p.copy() for p in params]
    buffers = [np.zeros_like(p) for p in params]
    for _ in range(steps):
        for p, g, b in zip(params, grads, buffers, strict=True):
            b *= np.float32(MOMENTUM)
            b += g
            p -= np.float32(LR) * b
    return params


def test_returned_views_come_back_without_a_copy_or_the_general_path(
    general_calls: dict[str, int],
) -> None:
    assert 2 * COUNT + 1 >= BULK_LEAVES
    start = _params(0)
    gradient_fn = ts.jit(lambda gs: [g * 1.0 for g in gs])
    grads = gradient_fn(_params(1))  # views of one buffer, as a jitted function returns
    opt = ts.optim.SGD(lr=LR, momentum=MOMENTUM)
    params = [p.copy() for p in start]
    state = opt.init(params)
    params, state = opt.step(params, grads, state)  # packs the separate parameters once
    packed = _executable(opt).packing_copies
    assert packed == 1
    pointers = [p.__array_interface__["data"][0] for p in params]
    before = dict(general_calls)
    for _ in range(4):
        given, given_state = params, state
        params, state = opt.step(params, grads, state)
        # The very arrays, updated in place in the arena: no copy, no new array.
        assert all(a is b for a, b in zip(params, given, strict=True))
        momentum = state["momentum_buffer"]
        assert all(a is b for a, b in zip(momentum, given_state["momentum_buffer"], strict=True))
        assert [p.__array_interface__["data"][0] for p in params] == pointers
    assert general_calls == before  # every later call took the planned path
    assert _executable(opt).packing_copies == packed
    want = _reference(start, [np.asarray(g) for g in grads], 5)
    for got, expected in zip(params, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_separate_gradients_are_never_packed(general_calls: dict[str, int]) -> None:
    start, grads = _params(2), _params(3)
    opt = ts.optim.SGD(lr=LR, momentum=MOMENTUM)
    params = [p.copy() for p in start]
    state = opt.init(params)
    params, state = opt.step(params, grads, state)
    assert _executable(opt).member_function is not None
    assert _executable(opt).packing_copies == 1  # the separate parameters, once
    before = dict(general_calls)
    for _ in range(1, 4):
        given = params
        params, state = opt.step(params, grads, state)
        assert all(a is b for a, b in zip(params, given, strict=True))
        assert _executable(opt).packing_copies == 1  # the gradients read where they lie
    assert general_calls == before
    for got, expected in zip(params, _reference(start, grads, 4), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_a_returned_view_passed_beside_its_arena_is_refused() -> None:
    """Parameters passed as the gradients too: the donated arena would be overwritten
    while read. The planned path sends the call to the general path, which refuses it."""
    opt = ts.optim.SGD(lr=LR)
    params = _params(4)
    state = opt.init(params)
    params, state = opt.step(params, _params(5), state)
    params, state = opt.step(params, _params(5), state)  # planned from here on
    with pytest.raises(ValueError, match="shares memory"):
        opt.step(params, [p[...] for p in params], state)
    with pytest.raises(ValueError, match="shares memory"):
        opt.step(params, [p.reshape(p.shape) for p in params[::-1]][::-1], state)
    # The donated views themselves as the gradients (ids the bulk check excludes), and
    # one gradient a view of the arena among new ones: refused all the same.
    with pytest.raises(ValueError, match="shares memory"):
        opt.step(params, list(params), state)
    grads = _params(6)
    grads[COUNT // 2] = params[COUNT // 2][...]
    with pytest.raises(ValueError, match="shares memory"):
        opt.step(params, grads, state)


def test_views_of_a_foreign_buffer_are_checked_then_trusted_once_returned(
    general_calls: dict[str, int],
) -> None:
    """Donated views the step did not return (of the caller's own buffer) take the
    general path, which packs them; the views that call returns are then planned."""
    start = _params(6)
    opt = ts.optim.SGD(lr=LR, momentum=MOMENTUM)
    params = [p.copy() for p in start]
    state = opt.init(params)
    grads = _params(7)
    params, state = opt.step(params, grads, state)
    params, state = opt.step(params, grads, state)
    buffer = np.concatenate([p.ravel() for p in params])  # the caller's own copy
    views, offset = [], 0
    for p in params:
        views.append(buffer[offset : offset + p.size])
        offset += p.size
    before = dict(general_calls)
    params, state = opt.step(views, grads, state)
    assert general_calls["jit"] == before["jit"] + 1  # not returned by the step: checked
    before = dict(general_calls)
    params, state = opt.step(params, grads, state)
    assert general_calls == before
    for got, expected in zip(params, _reference(start, grads, 4), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_a_donated_array_passed_again_still_raises() -> None:
    opt = ts.optim.SGD(lr=LR)
    params = _params(8)
    state = opt.init(params)
    old = params
    params, state = opt.step(params, _params(9), state)
    params, state = opt.step(params, _params(9), state)
    with pytest.raises(ValueError, match="was donated"):
        opt.step(old, _params(9), state)


def test_many_leaves_without_donation_are_planned_and_checked(
    general_calls: dict[str, int],
) -> None:
    update = ts.jit(lambda ps, gs: [p - LR * g for p, g in zip(ps, gs, strict=True)])
    params, grads = _params(10), _params(11)
    update(params, grads)
    before = dict(general_calls)
    out = update(params, grads)
    assert general_calls == before
    for got, p, g in zip(out, params, grads, strict=True):
        np.testing.assert_allclose(got, p - np.float32(LR) * g, rtol=1e-6, atol=1e-6)
    # A leaf of another shape or dtype, or not contiguous: the general path decides.
    wrong = [*params[:-1], params[-1].astype(np.float64)]
    assert update(wrong, grads)[-1].dtype == np.float64
    strided = [*params[:-1], np.repeat(params[-1], 2)[::2]]
    np.testing.assert_allclose(update(strided, grads)[-1], out[-1], rtol=1e-6, atol=1e-6)


def test_arena_of_many_views_reads_their_addresses_exactly() -> None:
    """`arena_of` over many views (their addresses read through Numba): the buffer when
    they lie at their offsets, else None (two swapped, one shifted by an element)."""
    from tessc.runtime.executor import arena_of

    buffer = np.arange(1000, dtype=np.float32)
    sizes = [10 + k % 7 for k in range(40)] + [0]
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    views = [buffer[o : o + n] for o, n in zip(offsets, sizes, strict=True)]
    total = sum(sizes)
    arena = arena_of(views, offsets, total)
    assert arena is not None and arena.__array_interface__ == buffer[:total].__array_interface__
    swapped = [views[1], views[0], *views[2:]]
    assert arena_of(swapped, offsets, total) is None
    shifted = [*views[:-2], buffer[offsets[-2] + 1 : offsets[-2] + 1 + sizes[-2]], views[-1]]
    assert arena_of(shifted, offsets, total) is None
    assert arena_of(views[:-1], offsets[:-1], len(buffer) + 1) is None  # past its end


def _steady_step(count: int) -> tuple[Any, Any, list[list[np.ndarray]], Any]:
    """An SGD step over `count` parameters in its steady state, and gradient sets that are
    views of one buffer each (what a jitted backward returns), two of them alternating."""
    rng = np.random.default_rng(count)
    sizes = [int(n) for n in rng.integers(1, 300, count)]
    shapes = [(n,) if k % 3 else (1, n) for k, n in enumerate(sizes)]  # 1-D and 2-D
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    backward = ts.jit(lambda gs: [g * 1.0 for g in gs])
    grad_sets = [backward([rng.standard_normal(s).astype(np.float32) for s in shapes])]
    grad_sets.append(backward([g + 1.0 for g in grad_sets[0]]))
    opt = ts.optim.SGD(lr=LR)
    params = [p.copy() for p in start]
    state = opt.init(params)
    for k in range(3):  # the first call packs the parameters; planned from the second
        params, state = opt.step(params, grad_sets[k % 2], state)
    return opt, (params, state), grad_sets, start


def _traced_lines(call: Any) -> int:
    """Python lines `call()` executes (a loop body's line once per iteration)."""
    import sys

    lines = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return tracer

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return lines


def test_new_gradients_every_call_cost_no_python_per_parameter(
    general_calls: dict[str, int],
) -> None:
    """Issue 24 §3: new gradient arrays every call (views of one buffer, as a backward
    returns them) are checked and located in bulk: no packing copy, one run of the host
    function (its one kernel), and as many Python lines for 20 parameters as for 60."""
    from tessc.runtime import array_fields

    assert array_fields.AVAILABLE  # CPython with a GIL: the probe reads NumPy's struct
    lines = {}
    for count in (20, 60):
        opt, box, grad_sets, start = _steady_step(count)
        executable = _executable(opt)
        packed, host = executable.packing_copies, executable.function
        runs = []

        def counted(*args: Any, host: Any = host, runs: list = runs) -> Any:
            runs.append(1)
            return host(*args)

        executable.function = counted
        before = dict(general_calls)
        for k in range(4):
            given = box[0]
            box = opt.step(box[0], grad_sets[k % 2], box[1])
            assert all(a is b for a, b in zip(box[0], given, strict=True))  # in place
        assert general_calls == before and len(runs) == 4
        assert executable.packing_copies == packed  # the gradients were not packed

        def one_step(box: Any = box, opt: Any = opt, grads: Any = grad_sets[0]) -> None:
            opt.step(box[0], grads, box[1])

        lines[count] = _traced_lines(one_step)
        want = [p.copy() for p in start]
        for k in (0, 1, 0, 0, 1, 0, 1, 0):  # the gradient sets of the 8 steps, in order
            for p, g in zip(want, grad_sets[k], strict=True):
                p -= np.float32(LR) * g
        for got, expected in zip(box[0], want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert lines[20] == lines[60], lines


def _profiled_calls(call: Any) -> int:
    """Python and C function calls `call()` makes (cProfile's count)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(call)
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def test_function_calls_per_step_do_not_grow_with_the_parameters() -> None:
    """New gradient arrays every call: the step's Python and C function calls (NumPy's,
    Numba's dispatch, the builtins the checks map over) are as many for 20 parameters as
    for 60, as cProfile counts them; none is made per array."""
    calls = {}
    for count in (20, 60):
        opt, box, grad_sets, _ = _steady_step(count)
        results: list[Any] = []

        def one_step(
            box: Any = box, opt: Any = opt, grad_sets: Any = grad_sets, results: list = results
        ) -> None:
            results.append(opt.step(box[0], grad_sets[len(results) % 2], box[1]))

        one_step()
        calls[count] = _profiled_calls(one_step)
        for params, _ in results:  # planned: the very arrays, in place
            assert all(a is b for a, b in zip(params, box[0], strict=True))
    assert calls[20] == calls[60], calls


def test_bulk_layout_checks_refuse_what_numpy_would() -> None:
    """`array_fields.Layouts.match` against NumPy's own view of each array: a subclass,
    another shape, dtype or byte order, a strided view, a 0-d array."""
    from tessc.runtime.array_fields import Layouts, common_start

    f32 = np.dtype(np.float32)
    good = [np.zeros((2, 3), np.float32), np.zeros(0, np.float32), np.zeros((), np.float32)]
    layouts = Layouts([((2, 3), f32), ((0,), f32), ((), f32)])
    assert layouts.match(good)
    bad = [
        [good[0].view(np.matrix), *good[1:]],
        [np.zeros((3, 2), np.float32), *good[1:]],
        [np.zeros((2, 3), np.float64), *good[1:]],
        [np.zeros((2, 3), ">f4"), *good[1:]],
        [np.zeros((2, 6), np.float32)[:, ::2], *good[1:]],
        [good[0], good[1], np.zeros((1,), np.float32)],
        good[:2],
    ]
    for arrays in bad:
        assert not layouts.match(arrays)
    assert layouts.match(tuple(good))  # a tuple's items read where it holds them
    # Excluded ids (sorted): an array that is one, or a view of one, is not shown.
    owner = np.zeros(12, np.float32)
    viewed = [owner[:6].reshape(2, 3), *good[1:]]
    assert layouts.match(viewed, np.array(sorted([id(good[1]) + 8, 1]), np.int64))
    for excluded in (id(good[1]), id(owner)):
        ids = np.array(sorted([excluded, 1, id(good[1]) + 8]), np.int64)
        assert not layouts.match(viewed, ids)
    buffer = np.arange(10, dtype=np.float32)
    views = [buffer[:4], buffer[4:4], buffer[4:10].reshape(2, 3)]
    assert common_start(views, np.array([0, 100, 16])) == (buffer.ctypes.data, 0)
    assert common_start(views, np.array([0, 0, 20]))[1] == -1
    other = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert common_start([views[0], other], np.array([0, 16]))[1] == -1
    assert common_start([views[0], views[2].view(np.matrix)], np.array([0, 16])) is None
    assert common_start((views[0], 1.5), np.array([0, 16])) is None  # not an array


class _Tagged(np.ndarray):
    """A subclass: its struct extends NumPy's, so no bulk read shows it."""


def test_a_program_checks_many_separate_arrays_in_bulk_as_one_by_one() -> None:
    """The compiled step called directly with separate gradient arrays: from
    `BULK_ARRAYS` of them one compiled call shows them well formed (no `check_input`
    each); what it does not show is checked one by one, as before: a big-endian or a
    strided gradient is converted, a subclass taken as its array, a wrong shape refused."""
    from tessc.compiler import compile_module
    from tessc.runtime.executor import BULK_ARRAYS

    assert COUNT >= BULK_ARRAYS

    def sgd_update(params: list, grads: list) -> list:
        return [p - LR * g for p, g in zip(params, grads, strict=True)]

    start, grads = _params(12), _params(13)
    module = ts.jit(sgd_update, donate_argnums=(0,)).trace(start, grads).module
    program = compile_module(module, "sgd_update")
    checked: list[int] = []
    check_input = program.check_input

    def counted(k: int, arg: object) -> np.ndarray:
        checked.append(k)
        return check_input(k, arg)

    program.check_input = counted
    params = ts.arena(start)
    want = [p - np.float32(LR) * g for p, g in zip(start, grads, strict=True)]
    for got, expected in zip(program(*params, *grads), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert checked == []  # the parameters' arena as they came, the gradients in bulk
    odd = list(grads)
    odd[1] = grads[1].astype(">f4")
    odd[2] = np.repeat(grads[2], 2)[::2]
    odd[3] = grads[3].view(_Tagged)
    want = [p - np.float32(LR) * g for p, g in zip(want, grads, strict=True)]
    for got, expected in zip(program(*params, *odd), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert len(checked) == COUNT  # not shown in bulk: every gradient checked one by one
    wrong = [*grads[:-1], np.zeros(SIZES[-1] + 1, np.float32)]
    with pytest.raises(ValueError, match=rf"input {2 * COUNT - 1} .*has shape"):
        program(*params, *wrong)
