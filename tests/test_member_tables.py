"""The fused SGD step's member form (issue 24 §3, `codegen.numba_members`): gradients that
are separate arrays are read where they lie, through a table of addresses the runtime
fills in the compiled call that reads them (`array_fields.member_table`), instead of
being packed into an arena every call. Its results are the packed call's, bit for bit,
whatever the gradients' owners and layouts; a gradient overlapping the donated parameter
arena is still packed (it must be read as it was before the step writes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tessc
from tessc.compiler import compile_module
from tessc.runtime import array_fields
from tessc.runtime.executor import Executable, arena_of

LR = 0.01
SIZES = [37, 0, 300, 1, 64, 0, 129, 5, 2048, 17, 3, 250, 90, 8, 1000, 33, 12, 400]
"""18 parameters (past the bulk read's 16), two of zero size."""


def sgd_update(params: list, grads: list) -> list:
    return [p - LR * g for p, g in zip(params, grads, strict=True)]


def _compile() -> Executable:
    shapes = [np.zeros(n, np.float32) for n in SIZES]
    module = tessc.jit(sgd_update, donate_argnums=(0,)).trace(shapes, shapes).module
    return compile_module(module, "sgd_update")


@pytest.fixture(scope="module")
def programs() -> tuple[Executable, Executable]:
    """The program, and the same program without its member form (packing as before)."""
    program, packed = _compile(), _compile()
    assert program.member_function is not None
    packed.member_function = None
    return program, packed


def _params(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for n in SIZES]


def _gradient_layouts() -> dict[str, Callable[[list[np.ndarray]], list[np.ndarray]]]:
    """The same gradient values, held in different ways (none of them one arena)."""

    def separate(values: list[np.ndarray]) -> list[np.ndarray]:
        return [v.copy() for v in values]

    def one_buffer_out_of_order(values: list[np.ndarray]) -> list[np.ndarray]:
        buffer = np.empty(sum(SIZES) + 7, np.float32)
        out: list[np.ndarray] = [np.empty(0, np.float32)] * len(values)
        start = 7
        for k in reversed(range(len(values))):
            out[k] = buffer[start : start + values[k].size]
            out[k][...] = values[k]
            start += values[k].size
        return out

    def rows_of_matrices(values: list[np.ndarray]) -> list[np.ndarray]:
        rows = np.zeros((len(values), max(SIZES) + 3), np.float32)
        out = []
        for k, v in enumerate(values):
            rows[k, 3 : 3 + v.size] = v
            out.append(rows[k, 3 : 3 + v.size])
        return out

    def strided(values: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for v in values:  # not C-contiguous: the call checks each (a contiguous copy)
            wide = np.zeros(2 * v.size, np.float32)
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


def test_no_gradient_is_copied(
    programs: tuple[Executable, Executable], monkeypatch: pytest.MonkeyPatch
) -> None:
    program, packed = programs
    grads = _params(2)
    params = tessc.arena(_params(3))
    program(*params, *grads)
    packed(*params, *grads)
    copied = _copied_elements(monkeypatch)
    for _ in range(4):
        program(*params, *grads)
    assert copied == []
    for _ in range(4):
        packed(*params, *grads)
    assert copied == [sum(SIZES)] * 4  # what the packed call copies: 4 bytes each


def test_a_gradient_overlapping_the_donated_arena_is_packed(
    programs: tuple[Executable, Executable],
) -> None:
    """Gradient 2 is parameter 2's own view, gradient 4 a view across parameters 3-5:
    the step must read them as they were (a packed copy), as before the member form."""
    program, packed = programs
    start = _params(4)
    results = []
    for executable in (program, packed):
        params = tessc.arena(start)
        grads = [g.copy() for g in _params(5)]
        grads[2] = params[2]
        offsets = np.cumsum([0, *SIZES[:-1]]).tolist()
        arena = arena_of(params, offsets, sum(SIZES))
        assert arena is not None
        offset = offsets[4] - 10
        grads[4] = arena[offset : offset + SIZES[4]]
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
