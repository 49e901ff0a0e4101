"""The CUDA step's member form (issue 24 §3, `codegen.cuda_members`): separate device
gradients are read where they lie, through a device table of their addresses, instead of
being copied into a pooled device arena every call (one copy per member). Its results are
the packed call's, bit for bit, whatever the gradients' dtype (split-bf16's bf16 ones are
their uint16 bits) and layout; a gradient overlapping the donated parameter arena is still
packed (it must be read as it was before the step writes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

import tessc as ts
from tessc.runtime import cuda_launch
from tessc.runtime.cuda import CudaExecutable
from tessc.runtime.cuda_launch import DeviceLimits

BF16 = np.dtype(ml_dtypes.bfloat16)
SIZES = [37, 0, 300, 1, 64, 5, 129]
"""536 elements, one member of zero size; odd sizes, so members start anywhere in the grid
stride."""


@pytest.fixture(autouse=True, params=["one block", "every block"])
def grid(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """One resident block of 256 threads: the grid stride (256) is shorter than the arena,
    so threads run several indices, some members cut by the stride; or a grid as large
    as the arena."""
    if request.param == "one block":
        monkeypatch.setattr(cuda_launch.LAUNCH, "limits", DeviceLimits(1, 256, 1))


def sgd(params: list, grads: list) -> list:
    return [p - 0.01 * g for p, g in zip(params, grads, strict=True)]


def _values(seed: int, dtype: Any = np.float32) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32).astype(dtype) for n in SIZES]


def _layouts() -> dict[str, Callable[[list[np.ndarray]], list[Any]]]:
    """The same gradient values as device arrays held in different ways (none one arena)."""

    def separate(values: list[np.ndarray]) -> list[Any]:
        return [cuda.to_device(v) for v in values]

    def one_buffer_out_of_order(values: list[np.ndarray]) -> list[Any]:
        host = np.concatenate([np.zeros(3, values[0].dtype), *reversed(values)])
        buffer, out, end = cuda.to_device(host), [], len(host)
        for v in values:
            out.append(buffer[end - v.size : end])
            end -= v.size
        return out

    def strided(values: list[np.ndarray]) -> list[Any]:  # copied contiguous, then tabled
        out = []
        for v in values:
            wide = np.zeros(2 * v.size, v.dtype)
            wide[::2] = v
            out.append(cuda.to_device(wide)[::2])
        return out

    return {
        "separate": separate,
        "one buffer, out of order": one_buffer_out_of_order,
        "strided": strided,
    }


def _programs(fn: Callable[..., Any], *example: Any) -> tuple[CudaExecutable, CudaExecutable]:
    """`fn`'s step compiled for cuda twice, the second without its member form."""
    from tessc.compiler import compile_module

    traced = ts.jit(fn, target="cuda", donate_argnums=(0,)).trace(*example)
    program, packed = (compile_module(traced.module, fn.__name__, "cuda") for _ in range(2))
    assert isinstance(program, CudaExecutable) and program.member_function is not None
    packed.member_function = None
    return program, packed


def _bits(array: Any) -> np.ndarray:
    host = array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)
    return host.reshape(-1).view(np.uint8)


@pytest.mark.parametrize("layout", list(_layouts()))
def test_separate_device_gradients_give_the_packed_result_bit_for_bit(layout: str) -> None:
    program, packed = _programs(sgd, _values(0), _values(0))
    got = list(program(*[cuda.to_device(v) for v in _values(0)], *_layouts()[layout](_values(1))))
    want = list(packed(*[cuda.to_device(v) for v in _values(0)], *_layouts()[layout](_values(1))))
    copies = program.packing_copies, packed.packing_copies
    for step in range(2):  # the parameters fed back: their arena is passed as it is
        grads = _layouts()[layout](_values(2 + step))
        got = list(program(*got, *grads))
        want = list(packed(*want, *grads))
    assert program.packing_copies == copies[0]  # the gradients read where they lie
    assert packed.packing_copies == copies[1] + 2  # (the packed call copies every step)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(_bits(g), _bits(w))
    expected = _values(0)
    for seed in (1, 2, 3):  # every element updated three times, by its own gradient
        expected = [p - np.float32(0.01) * g for p, g in zip(expected, _values(seed), strict=True)]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.copy_to_host(), e, rtol=1e-5, atol=1e-6)


def test_member_form_launches_a_member_kernel_reading_the_table() -> None:
    source = ts.jit(sgd, target="cuda", donate_argnums=(0,)).ir(
        _values(0), _values(0), stage="numba"
    )
    assert '"member_tables": ("sgd_members", (1,))' in source
    assert "def sgd_kernel_0_members(params_arena, grads_arena_table, out0):" in source
    assert "carray(member_pointer(grads_arena_table[member0])" in source
    assert "sgd_kernel_0_members[" in source


def test_a_gradient_overlapping_the_donated_arena_is_packed() -> None:
    program, packed = _programs(sgd, _values(0), _values(0))
    results = []
    for executable in (program, packed):
        params = list(
            executable(
                *[cuda.to_device(v) for v in _values(0)], *_layouts()["separate"](_values(1))
            )
        )
        grads = _layouts()["separate"](_values(2))
        grads[2] = params[2]  # a parameter's own view, in the donated arena
        copies = executable.packing_copies
        params = list(executable(*params, *grads))
        assert executable.packing_copies == copies + 1
        results.append(params)
    for g, w in zip(*results, strict=True):
        np.testing.assert_array_equal(_bits(g), _bits(w))


def test_split_bf16_sgd_reads_separate_bf16_device_gradients() -> None:
    """Split-bf16 SGD on the device: bf16 gradients tabled as their uint16 bits; the tops,
    trails and momenta are the packed call's, bit for bit, and nothing is packed."""
    opt = ts.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, master_weights="split")
    states = []
    for member_form in (True, False):
        params, trail = ts.optim.split_params({f"p{k}": v for k, v in enumerate(_values(0))})
        state = opt.init(params, trail=trail)
        params = {k: cuda.to_device(v) for k, v in params.items()}
        state = {
            k: {n: cuda.to_device(a) for n, a in v.items()} if isinstance(v, dict) else v
            for k, v in state.items()
        }
        for step in range(3):
            grads = {f"p{k}": cuda.to_device(v) for k, v in enumerate(_values(5 + step, BF16))}
            compiled = opt._compiled.get("cuda")
            if compiled is not None:
                (executable,) = compiled._compiled.values()
                if not member_form:
                    executable.member_function = None
                copies = executable.packing_copies
            params, state = opt.step(params, grads, state)
            if compiled is not None and step == 2:
                assert (executable.packing_copies == copies) is member_form
        assert "carray(member_pointer(" in compiled.ir(params, grads, state, stage="numba")
        states.append((params, state))
        opt._compiled.clear()
    (got, got_state), (want, want_state) = states
    for key in got:
        np.testing.assert_array_equal(_bits(got[key]), _bits(want[key]))
        assert got[key].dtype == BF16
        for slot in ("master_trail", "momentum_buffer"):
            np.testing.assert_array_equal(_bits(got_state[slot][key]), _bits(want_state[slot][key]))
