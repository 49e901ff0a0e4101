"""The fused SGD step's member form (issue 24 §3, `codegen.numba_members`): gradients that
are separate arrays are read where they lie, through a table of addresses the runtime
fills in the compiled call that reads them (`array_fields.member_table`), instead of
being packed into an arena every call. Its results are the packed call's, bit for bit,
whatever the gradients' owners and layouts; a gradient overlapping the donated parameter
arena is still packed (it must be read as it was before the step writes). The same for a
step above the parallel threshold (2^18 elements), a Python host launching threaded kernels:
its member form launches a member kernel over the same shares."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tessc
from tessc.compiler import compile_module
from tessc.runtime import array_fields, threads
from tessc.runtime.executor import Executable, arena_of

LR = 0.01
SIZES = [37, 0, 300, 1, 64, 0, 129, 5, 2048, 17, 3, 250, 90, 8, 1000, 33, 12, 400]
"""18 parameters (past the bulk read's 16), two of zero size."""
THREADED_SIZES = [70001, 0, 16383, 1, 98305, 0, 77777, 5]
"""262,472 elements, just past the parallel threshold (2^18): a threaded step. Two members
of zero size; odd sizes, so members straddle the 16,384-element chunks and the threads'
shares of them."""


def sgd_update(params: list, grads: list) -> list:
    return [p - LR * g for p, g in zip(params, grads, strict=True)]


def _compile(sizes: Sequence[int] = SIZES) -> Executable:
    shapes = [np.zeros(n, np.float32) for n in sizes]
    module = tessc.jit(sgd_update, donate_argnums=(0,)).trace(shapes, shapes).module
    return compile_module(module, "sgd_update")


@pytest.fixture(scope="module")
def programs() -> tuple[Executable, Executable]:
    """The program, and the same program without its member form (packing as before)."""
    program, packed = _compile(), _compile()
    assert program.member_function is not None
    packed.member_function = None
    return program, packed


def _params(seed: int, sizes: Sequence[int] = SIZES) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for n in sizes]


def _gradient_layouts() -> dict[str, Callable[[list[np.ndarray]], list[np.ndarray]]]:
    """The same gradient values (of any one dtype), held in different ways (none of them
    one arena)."""

    def separate(values: list[np.ndarray]) -> list[np.ndarray]:
        return [v.copy() for v in values]

    def one_buffer_out_of_order(values: list[np.ndarray]) -> list[np.ndarray]:
        buffer = np.empty(sum(v.size for v in values) + 7, values[0].dtype)
        out: list[np.ndarray] = [np.empty(0, values[0].dtype)] * len(values)
        start = 7
        for k in reversed(range(len(values))):
            out[k] = buffer[start : start + values[k].size]
            out[k][...] = values[k]
            start += values[k].size
        return out

    def rows_of_matrices(values: list[np.ndarray]) -> list[np.ndarray]:
        rows = np.zeros((len(values), max(v.size for v in values) + 3), values[0].dtype)
        out = []
        for k, v in enumerate(values):
            rows[k, 3 : 3 + v.size] = v
            out.append(rows[k, 3 : 3 + v.size])
        return out

    def strided(values: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for v in values:  # not C-contiguous: the call checks each (a contiguous copy)
            wide = np.zeros(2 * v.size, v.dtype)
            wide[::2] = v
            out.append(wide[::2])
        return out

    def mixed(values: list[np.ndarray]) -> list[np.ndarray]:
        first = one_buffer_out_of_order(values)
        return [first[k] if k % 3 else v.copy() for k, v in enumerate(values)]

    return {
        "separate": separate,
        "one buffer, out of order": one_buffer_out_of_order,
        "rows of a matrix": rows_of_matrices,
        "strided": strided,
        "mixed owners": mixed,
    }


@pytest.mark.parametrize("layout", list(_gradient_layouts()))
def test_separate_gradients_give_the_packed_result_bit_for_bit(
    programs: tuple[Executable, Executable], layout: str
) -> None:
    program, packed = programs
    values = _params(1)
    grads = _gradient_layouts()[layout](values)
    start = _params(0)
    got_params, want_params = tessc.arena(start), tessc.arena(start)
    copies = program.packing_copies
    for _ in range(3):
        got = program(*got_params, *grads)
        want = packed(*want_params, *grads)
        assert all(g is p for g, p in zip(got, got_params, strict=True))  # in place
        assert all(w is p for w, p in zip(want, want_params, strict=True))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert program.packing_copies == copies  # the gradients read where they lie
    expected = [p - 3 * (np.float32(LR) * v) for p, v in zip(start, values, strict=True)]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _copied_elements(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The elements each `np.concatenate` call copies (the packing copy's)."""
    copied: list[int] = []
    concatenate = np.concatenate

    def spy(arrays: Sequence[np.ndarray], *args: Any, **kwargs: Any) -> np.ndarray:
        copied.append(sum(np.asarray(a).size for a in arrays))
        return concatenate(arrays, *args, **kwargs)

    monkeypatch.setattr(np, "concatenate", spy)
    return copied


@pytest.fixture(scope="module")
def threaded_programs() -> tuple[Executable, Executable]:
    """`programs` for THREADED_SIZES: Python hosts launching threaded kernels."""
    program, packed = _compile(THREADED_SIZES), _compile(THREADED_SIZES)
    assert program.member_function is not None
    assert inspect.isfunction(program.member_function)  # plain Python: it launches threads
    assert program.module.parallel_for is threads.parallel_for
    packed.member_function = None
    return program, packed


CASES = {"one host": SIZES, "threaded": THREADED_SIZES}


def _case(request: pytest.FixtureRequest, case: str) -> tuple[Executable, Executable]:
    fixture = "threaded_programs" if case == "threaded" else "programs"
    return request.getfixturevalue(fixture)


def _straddled(sizes: Sequence[int], thread_count: int) -> int:
    """How many members of `sizes` the threads' shares of the 16,384-element chunks cut."""
    bounds = np.cumsum([0, *sizes]).tolist()
    chunks = -(-bounds[-1] // 16384)
    cuts = [lo * 16384 for lo, _ in threads.shares(chunks, thread_count)[1:]]
    return sum(any(a < c < b for c in cuts) for a, b in zip(bounds, bounds[1:], strict=False))


@pytest.mark.parametrize("thread_count", [1, 2, 3, 16])
@pytest.mark.parametrize("layout", list(_gradient_layouts()))
def test_threaded_member_form_gives_the_packed_result_bit_for_bit(
    threaded_programs: tuple[Executable, Executable],
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    thread_count: int,
) -> None:
    """The member kernel runs each share's part of each member: members cut by the
    shares (odd sizes), members of zero size, any number of threads."""
    assert _straddled(THREADED_SIZES, thread_count) >= min(thread_count - 1, 3)
    monkeypatch.setattr(threads, "thread_count", lambda: thread_count)
    program, packed = threaded_programs
    values = _params(1, THREADED_SIZES)
    grads = _gradient_layouts()[layout](values)
    start = _params(0, THREADED_SIZES)
    got_params, want_params = tessc.arena(start), tessc.arena(start)
    copies = program.packing_copies
    for _ in range(2):
        got = program(*got_params, *grads)
        want = packed(*want_params, *grads)
        assert all(g is p for g, p in zip(got, got_params, strict=True))  # in place
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert program.packing_copies == copies
    expected = [p - 2 * (np.float32(LR) * v) for p, v in zip(start, values, strict=True)]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_no_gradient_is_copied(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    program, packed = _case(request, case)
    sizes = CASES[case]
    grads = _params(2, sizes)
    params = tessc.arena(_params(3, sizes))
    program(*params, *grads)
    packed(*params, *grads)
    copied = _copied_elements(monkeypatch)
    for _ in range(4):
        program(*params, *grads)
    assert copied == []
    for _ in range(4):
        packed(*params, *grads)
    assert copied == [sum(sizes)] * 4  # what the packed call copies: 4 bytes each


@pytest.mark.parametrize("case", list(CASES))
def test_a_gradient_overlapping_the_donated_arena_is_packed(
    request: pytest.FixtureRequest, case: str
) -> None:
    """Gradient 2 is parameter 2's own view, gradient 4 a view across parameters 3-5:
    the step must read them as they were (a packed copy), as before the member form."""
    program, packed = _case(request, case)
    sizes = CASES[case]
    start = _params(4, sizes)
    results = []
    for executable in (program, packed):
        params = tessc.arena(start)
        grads = [g.copy() for g in _params(5, sizes)]
        grads[2] = params[2]
        offsets = np.cumsum([0, *sizes[:-1]]).tolist()
        arena = arena_of(params, offsets, sum(sizes))
        assert arena is not None
        offset = offsets[4] - 10
        grads[4] = arena[offset : offset + sizes[4]]
        copies = executable.packing_copies
        results.append([r.copy() for r in executable(*params, *grads)])
        assert executable.packing_copies == copies + 1
    for got, want in zip(*results, strict=True):
        np.testing.assert_array_equal(got, want)
    want2 = start[2] - np.float32(LR) * start[2]
    np.testing.assert_allclose(results[0][2], want2, rtol=1e-6)


def test_gradients_in_one_arena_take_the_plain_host(
    programs: tuple[Executable, Executable], monkeypatch: pytest.MonkeyPatch
) -> None:
    program, _ = programs
    calls: list[str] = []
    member, plain = program.member_function, program.function
    assert member is not None
    monkeypatch.setattr(program, "member_function", lambda *a: (calls.append("m"), member(*a)))
    monkeypatch.setattr(program, "function", lambda *a: (calls.append("p"), plain(*a)))
    params = tessc.arena(_params(6))
    program(*params, *tessc.arena(_params(7)))
    program(*params, *_params(7))
    assert calls == ["p", "m"]


def test_member_table_reads_addresses_in_one_call() -> None:
    assert array_fields.AVAILABLE
    buffer = np.zeros(100, np.float32)
    views = [buffer[0:10], buffer[10:10], buffer[10:30]]
    offsets = np.array([0, 40, 40], np.int64)
    table = np.zeros(3, np.int64)
    base = buffer.ctypes.data
    assert array_fields.member_table(views, offsets, 4, table) == 1  # one arena
    assert [table[0], table[2]] == [base, base]
    apart = [np.ones(10, np.float32), np.ones(0, np.float32), np.ones(20, np.float32)]
    assert array_fields.member_table(apart, offsets, 4, table) == 0
    assert table[0] == apart[0].ctypes.data
    assert table[2] == apart[2].ctypes.data - 40
    # A forbidden byte range that meets a non-empty array; the empty one meets nothing.
    end = apart[2].ctypes.data + 80
    forbidden = np.array([end - 4, end + 100], np.int64)
    assert array_fields.member_table(apart, offsets, 4, table, forbidden) == -1
    forbidden = np.array([end, end + 100], np.int64)
    assert array_fields.member_table(apart, offsets, 4, table, forbidden) == 0
    subclass = [apart[0], apart[1], apart[2].view(np.matrix)]
    assert array_fields.member_table(subclass, offsets, 4, table) is None
    assert array_fields.member_table(apart, offsets, 4, np.zeros(2, np.int64)) is None


def two_gradient_update(params: list, grads: list, more: list) -> list:
    return [p - LR * (g + m) for p, g, m in zip(params, grads, more, strict=True)]


def test_an_arena_already_one_buffer_does_not_pack_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two tabled arenas, the first recognized as one buffer by a call before (the
    runtime then passes it without looking at its arrays), the second separate arrays:
    the member form reads both, the first through its base address, nothing packed."""
    shapes = [np.zeros(n, np.float32) for n in SIZES]
    jitted = tessc.jit(two_gradient_update, donate_argnums=(0,))
    module = jitted.trace(shapes, shapes, shapes).module
    program, packed = (compile_module(module, "two_gradient_update") for _ in range(2))
    packed.member_function = None
    member = program.member_function
    assert member is not None
    calls: list[str] = []
    monkeypatch.setattr(program, "member_function", lambda *a: (calls.append("m"), member(*a)))
    start, grads, more = _params(8), tessc.arena(_params(9)), tessc.arena(_params(10))
    separate = _params(11)
    results = []
    for executable in (program, packed):
        params = tessc.arena(start)
        executable(*params, *grads, *more)  # both one buffer: the plain host
        copies = executable.packing_copies
        results.append([r.copy() for r in executable(*params, *grads, *separate)])
        assert executable.packing_copies == copies + (executable is packed)
    assert calls == ["m"]
    for got, want in zip(*results, strict=True):
        np.testing.assert_array_equal(got, want)


def adam_like_update(params: list, ms: list, vs: list, grads: list) -> tuple[list, list, list]:
    new_m = [0.9 * m + 0.1 * g for m, g in zip(ms, grads, strict=True)]
    new_v = [0.999 * v + 0.001 * g * g for v, g in zip(vs, grads, strict=True)]
    new_p = [
        p - LR * m / (tessc.sqrt(v) + 1e-8) for p, m, v in zip(params, new_m, new_v, strict=True)
    ]
    return new_p, new_m, new_v


def test_threaded_member_form_of_a_step_with_state() -> None:
    """Three donated arenas (parameters and two states) and the gradients read through
    their table, in a threaded kernel with more arguments and a square root."""
    shapes = [np.zeros(n, np.float32) for n in THREADED_SIZES]
    jitted = tessc.jit(adam_like_update, donate_argnums=(0, 1, 2))
    module = jitted.trace(shapes, shapes, shapes, shapes).module
    program, packed = (compile_module(module, "adam_like_update") for _ in range(2))
    assert inspect.isfunction(program.member_function)
    packed.member_function = None
    state = [_params(12, THREADED_SIZES), _params(13, THREADED_SIZES)]
    state.append([np.abs(v) for v in _params(14, THREADED_SIZES)])
    grads = _params(15, THREADED_SIZES)
    got_state, want_state = ([tessc.arena(s) for s in state] for _ in range(2))
    for _ in range(2):
        got = program(*[a for s in got_state for a in s], *grads)
        want = packed(*[a for s in want_state for a in s], *grads)
    assert program.packing_copies == 0 and packed.packing_copies == 2
    assert all(g is a for g, a in zip(got, [a for s in got_state for a in s], strict=True))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# -- optimizer steps with workspace and several kernels (Lamb: norms, then the update) --

OPTIMIZERS: dict[str, Callable[[], tessc.optim.Optimizer]] = {
    "lamb": lambda: tessc.optim.Lamb(lr=1e-2, weight_decay=0.01),
    "adam": lambda: tessc.optim.Adam(lr=1e-2),
    "adamw": lambda: tessc.optim.AdamW(lr=1e-2),
    "adagrad": lambda: tessc.optim.Adagrad(lr=1e-2),
}
"""The standalone steps whose host has a workspace (the step count's scalars), which had
no member form; Lamb's host also runs two kernels, its norms segmented loops."""
LARGE_SIZES = [70001, 0, 16383, 1, 98305, 0, 77777, 5]
"""Past the parallel threshold: a one-kernel step's member loop runs as a `prange`; Lamb's
two kernels are parallel functions the host calls, each with a member form of its own."""


def _step_programs(name: str, sizes: Sequence[int]) -> tuple[Executable, Executable]:
    """`name`'s standalone step compiled twice, the second without its member form."""
    optimizer = OPTIMIZERS[name]()
    params = [np.zeros(n, np.float32) for n in sizes]
    state = optimizer.init(params)
    jitted = tessc.jit(optimizer._standalone(), donate_argnums=(0, 2))
    module = jitted.trace(params, params, state).module
    entry = f"{type(optimizer).__name__.lower()}_step"
    program, packed = compile_module(module, entry), compile_module(module, entry)
    assert program.member_function is not None
    packed.member_function = None
    return program, packed


def _state_arrays(name: str, sizes: Sequence[int], seed: int) -> list[np.ndarray]:
    """The step's parameters and state, as its host takes them (slot arenas, the count)."""
    state = OPTIMIZERS[name]().init(_params(seed, sizes))
    arrays = tessc.arena(_params(seed, sizes))
    for key in sorted(state):  # (a pytree's order: its keys sorted)
        slot = state[key]
        arrays += [slot] if key == "step" else tessc.arena([np.abs(a) + 0.5 for a in slot])
    return arrays


@pytest.fixture(scope="module")
def step_programs() -> dict[tuple[str, str], tuple[Executable, Executable]]:
    return {}


def _step_case(
    cache: dict[tuple[str, str], tuple[Executable, Executable]], name: str, size: str
) -> tuple[Executable, Executable]:
    if (name, size) not in cache:
        cache[name, size] = _step_programs(name, SIZES if size == "small" else LARGE_SIZES)
    return cache[name, size]


@pytest.mark.parametrize("thread_count", [1, 2])
@pytest.mark.parametrize(
    ("name", "size"), [(n, "small") for n in OPTIMIZERS] + [("adam", "large"), ("lamb", "large")]
)
def test_optimizer_step_reads_separate_gradients_as_the_packed_call(
    step_programs: dict[tuple[str, str], tuple[Executable, Executable]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    size: str,
    thread_count: int,
) -> None:
    """Three steps on separate gradients (of sizes 0 and 1 among them): the member form's
    parameters and state are the packed call's, and nothing is copied. Lamb's loops over
    segments run the packed call's ranges: bit for bit. A member loop runs each member's
    range, so other elements fall in the vectorised body or the scalar tail than in the
    packed loop, and under `arcp` (fast-math) a division there is a multiplication by a
    reciprocal: the parameters may differ by an ulp (Adam, "rows of a matrix" layout with
    the slot arenas in one buffer, 1 element of 4,575; exact without `arcp`)."""
    import numba

    program, packed = _step_case(step_programs, name, size)
    sizes = SIZES if size == "small" else LARGE_SIZES
    layouts = _gradient_layouts()
    count = len(sizes)
    for executable in (program, packed):  # (a first call's bookkeeping concatenates)
        warm = _state_arrays(name, sizes, 19)
        executable(*warm[:count], *_params(19, sizes), *warm[count:])
    got, want = _state_arrays(name, sizes, 20), _state_arrays(name, sizes, 20)
    previous = numba.get_num_threads()
    numba.set_num_threads(min(thread_count, numba.config.NUMBA_NUM_THREADS))
    try:
        for step, layout in enumerate(["separate", "mixed owners", "rows of a matrix"]):
            grads = layouts[layout](_params(21 + step, sizes))
            copied = _copied_elements(monkeypatch)
            program(*got[:count], *grads, *got[count:])
            assert copied == []  # the gradients read where they lie
            packed(*want[:count], *grads, *want[count:])
            assert copied == [sum(sizes)]  # (the spy sees the packed call's copy)
            monkeypatch.undo()
    finally:
        numba.set_num_threads(previous)
    for g, w in zip(got, want, strict=True):
        if name == "lamb":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_array_max_ulp(g, w, maxulp=2)
    assert not np.array_equal(got[0], _params(20, sizes)[0])  # the step moved them


def test_lamb_gradient_aliasing_a_parameter_is_packed(
    step_programs: dict[tuple[str, str], tuple[Executable, Executable]],
) -> None:
    """A Lamb gradient that is a parameter's own view is read as it was before the step
    writes it: packed, as without the member form, with the same result."""
    program, packed = _step_case(step_programs, "lamb", "small")
    results = []
    for executable in (program, packed):
        arrays = _state_arrays("lamb", SIZES, 30)
        grads = [g.copy() for g in _params(31, SIZES)]
        grads[2] = arrays[2]
        copies = executable.packing_copies
        executable(*arrays[: len(SIZES)], *grads, *arrays[len(SIZES) :])
        assert executable.packing_copies == copies + 1
        results.append(arrays)
    for got, want in zip(*results, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("worker", [False, True])
def test_lamb_kernels_called_by_name_keep_their_member_forms(
    monkeypatch: pytest.MonkeyPatch, worker: bool
) -> None:
    """Every serial kernel called by name (`codegen.numba_external`, as a host of large
    kernels has them; compiled here or by the worker): the host's member form calls their
    member forms by name, with the table's address; the source, cached, is what later
    calls run, so the member form must be in it."""
    from tessc.lowering.codegen import numba_external
    from tessc.runtime import external

    monkeypatch.setattr(numba_external, "EXTERNAL_MIN_OPS", 0)
    monkeypatch.setattr(external, "WORKER_MIN_LINES", 0 if worker else 10**9)
    optimizer = OPTIMIZERS["lamb"]()
    shapes = [np.zeros(n, np.float32) for n in SIZES]
    jitted = tessc.jit(optimizer._standalone(), donate_argnums=(0, 2))
    module = jitted.trace(shapes, shapes, optimizer.init(shapes)).module
    program, packed = (compile_module(module, "lamb_step", warm_start=False) for _ in range(2))
    assert program.member_function is not None
    source = inspect.getsource(program.module)
    assert source.count("@external(") == 4  # both kernels, and the member form of each
    assert "lamb_step_kernel_0_members(" in inspect.getsource(
        program.module.lamb_step_members.py_func
    )
    packed.member_function = None
    count = len(SIZES)
    got, want = _state_arrays("lamb", SIZES, 40), _state_arrays("lamb", SIZES, 40)
    for step in range(2):
        grads = _gradient_layouts()["mixed owners"](_params(41 + step, SIZES))
        copies = program.packing_copies
        program(*got[:count], *grads, *got[count:])
        assert program.packing_copies == copies
        packed(*want[:count], *grads, *want[count:])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


SPLIT_OPTIMIZERS: dict[str, Callable[[], tessc.optim.Optimizer]] = {
    "sgd": lambda: tessc.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, master_weights="split"),
    "lamb": lambda: tessc.optim.Lamb(lr=1e-2, weight_decay=0.01, master_weights="split"),
    "adagrad": lambda: tessc.optim.Adagrad(lr=1e-2, master_weights="split"),
}
"""Split-bf16 steps: their bf16 gradients are tabled as their bits (a kernel holds a 16-bit
float as uint16, so the member `carray` is a uint16 one and the load converts as before)."""


def _split_arrays(name: str, sizes: Sequence[int], seed: int) -> list[np.ndarray]:
    """A split step's parameters (bf16 tops) and state (int16 trails, fp32 slots, the
    count), as its host takes them (slot arenas)."""
    params, trail = tessc.optim.split_params(_params(seed, sizes))
    state = SPLIT_OPTIMIZERS[name]().init(params, trail=trail)
    arrays = tessc.arena(params)
    for key in sorted(state):
        slot = state[key]
        if key == "step":
            arrays += [slot]
        else:
            arrays += tessc.arena([a if a.dtype == np.int16 else np.abs(a) + 0.5 for a in slot])
    return arrays


@pytest.mark.parametrize(
    ("name", "size"),
    [(n, "small") for n in SPLIT_OPTIMIZERS] + [("sgd", "large"), ("lamb", "large")],
)
def test_split_bf16_step_reads_separate_bf16_gradients_as_the_packed_call(
    monkeypatch: pytest.MonkeyPatch, name: str, size: str
) -> None:
    """Three split-bf16 steps on separate bf16 gradients: nothing is copied, and the bf16
    tops, int16 trails and fp32 state are the packed call's, bit for bit."""
    import ml_dtypes

    sizes = SIZES if size == "small" else LARGE_SIZES
    optimizer = SPLIT_OPTIMIZERS[name]()
    params, trail = tessc.optim.split_params([np.zeros(n, np.float32) for n in sizes])
    state = optimizer.init(params, trail=trail)
    module = tessc.jit(optimizer._standalone(), donate_argnums=(0, 2)).trace(params, params, state)
    entry = f"{type(optimizer).__name__.lower()}_step"
    program, packed = (compile_module(module.module, entry) for _ in range(2))
    assert program.member_function is not None
    carrays = [line for line in inspect.getsource(program.module).splitlines() if "carray(" in line]
    assert any("member_pointer(" in line and "np.uint16)" in line for line in carrays)
    packed.member_function = None
    count = len(sizes)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    for executable in (program, packed):  # (a first call's bookkeeping concatenates)
        warm = _split_arrays(name, sizes, 49)
        executable(*warm[:count], *[g.astype(bf16) for g in _params(49, sizes)], *warm[count:])
    got, want = _split_arrays(name, sizes, 50), _split_arrays(name, sizes, 50)
    layouts = _gradient_layouts()
    for step, layout in enumerate(["separate", "mixed owners", "rows of a matrix"]):
        grads = layouts[layout]([g.astype(bf16) for g in _params(51 + step, sizes)])
        copied = _copied_elements(monkeypatch)
        program(*got[:count], *grads, *got[count:])
        assert copied == []  # the bf16 gradients read where they lie
        packed(*want[:count], *grads, *want[count:])
        assert copied == [sum(sizes)]  # (the spy sees the packed call's copy)
        monkeypatch.undo()
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))
    assert got[0].dtype == bf16 and not np.array_equal(got[0], _split_arrays(name, sizes, 50)[0])
