"""The fuzzers (`python -m tessc.fuzz`): their parts, and the fixed small budget CI runs
(random programs at every pipeline against the reference, with gradients; mutated
tessc-opt inputs, none of which may end in a traceback, hang, crash or unlocated
diagnostic)."""

from __future__ import annotations

import os
import random
import signal
from collections import Counter

import pytest

from tessc.fuzz.check import Failure, check, check_text, register_forced_pipelines, shrink
from tessc.fuzz.mutate import classify, mutate, run_campaign, seeds
from tessc.fuzz.programs import generate
from tessc.fuzz.rows import generate_rows
from tessc.reference import parse_module


def test_generated_programs_verify_and_depend_on_the_seed_only() -> None:
    for index in range(60):
        smooth = index % 2 == 1
        program = generate(random.Random(index), ops=12, smooth=smooth)
        parse_module(program.text())
        assert program.text() == generate(random.Random(index), ops=12, smooth=smooth).text()


def test_the_generator_covers_every_op_kind() -> None:
    kinds = {op.kind for i in range(300) for op in generate(random.Random(i), ops=12).ops}
    expected = {"matmul", "sum", "mean", "reduce_max", "reshape", "permute", "select"}
    assert expected | {"broadcast_to", "fill", "add", "max", "tanh", "exp", "pow"} <= kinds
    assert {"take", "one_hot", "cast", "argmax", "argmin", "slice", "concat"} <= kinds


def test_the_generator_makes_convolutions_pools_and_pads_that_verify() -> None:
    programs = [generate(random.Random(i), ops=12) for i in range(300)]
    windowed = [p for p in programs if any(op.kind in ("conv", "pool", "pad") for op in p.ops)]
    ops = [op for p in windowed for op in p.ops]
    convs = [op for op in ops if op.kind == "conv"]
    assert {len(op.shape) - 2 for op in convs} == {1, 2}  # 1-D and 2-D
    assert any(2 in op.attr("strides") for op in convs)
    assert any(2 in op.attr("dilations") for op in convs)
    assert any(op.attr("low") != op.attr("high") for op in convs)  # padding, asymmetric too
    assert any(op.attr("groups") > 1 for op in convs)
    assert {op.attr("pool") for op in ops if op.kind == "pool"} == {"max", "avg", "argmax"}
    pads = [op for op in ops if op.kind == "pad"]
    assert any(op.dtype for op in pads) and any(not op.dtype for op in pads)  # int and float
    for program in windowed:
        parse_module(program.text()).verify()
    smooth = [generate(random.Random(i), ops=12, dtype="f64", smooth=True) for i in range(200)]
    pools = {op.attr("pool") for p in smooth for op in p.ops if op.kind == "pool"}
    assert pools == {"avg"}  # max pooling has kinks, argmax no gradient
    assert {"conv", "pad"} <= {op.kind for p in smooth for op in p.ops}
    for program in smooth:
        parse_module(program.text()).verify()


def test_the_generator_makes_integer_values_that_parse() -> None:
    programs = [generate(random.Random(i), ops=12) for i in range(600)]
    integer = [p for p in programs if p.arg_types or any(op.dtype for op in p.ops)]
    assert len(integer) > 20
    for program in integer:
        parse_module(program.text()).verify()
    smooth = [generate(random.Random(i), ops=12, dtype="f64", smooth=True) for i in range(100)]
    assert all(not any(op.dtype for op in p.ops) for p in smooth)  # gradients: floats only


def _shape_of(program, value: str) -> tuple[int, ...]:
    args = dict(program.args)
    return args[value] if value in args else next(o.shape for o in program.ops if o.result == value)


def test_the_generator_makes_zero_size_shapes() -> None:
    programs = [generate(random.Random(i), ops=12) for i in range(600)]
    empty = [p for p in programs if any(0 in op.shape for op in p.ops)]
    assert len(empty) > 10
    kinds = {op.kind for p in empty for op in p.ops if 0 in op.shape}
    assert {"matmul", "reshape", "add", "concat"} & kinds and len(kinds) >= 6, kinds
    over_empty = [
        op.kind
        for p in empty
        for op in p.ops
        if op.kind in ("sum", "mean", "reduce_max")
        and any(_shape_of(p, op.operands[0])[d] == 0 for d in op.attr("dims"))
    ]
    assert over_empty and set(over_empty) == {"sum"}  # 0; NaN or -inf would not be tame
    for program in empty:
        parse_module(program.text()).verify()


EMPTY_MEAN = """\
func.func @f(%a0: tensor<4x0xf64>, %a1: tensor<3xf64>) -> (tensor<1x1xf64>, tensor<3xf64>) {
  %v0 = tess.mean %a0 dims = [0, 1] keepdim : tensor<4x0xf64> -> tensor<1x1xf64>
  %v1 = tess.tanh %a1 : tensor<3xf64>
  func.return %v0, %v1 : tensor<1x1xf64>, tensor<3xf64>
}
"""


def test_a_nan_output_is_no_gradient_mismatch() -> None:
    # The empty mean is NaN whatever the inputs: central differences of a loss holding it
    # were NaN (seed 5052 with zero-size shapes), a false alarm.
    assert check_text(EMPTY_MEAN, grad=True, pipelines=("cpu-basic",)) is None


def test_shrink_keeps_the_failure_and_drops_the_rest() -> None:
    program = next(
        p
        for i in range(100)
        if len((p := generate(random.Random(i), ops=12)).ops) >= 6
        and any(op.kind == "matmul" for op in p.ops)
    )

    def fails_with_a_matmul(candidate, **_) -> Failure | None:
        if any(op.kind == "matmul" for op in candidate.ops):
            return Failure("mismatch", "cpu", "has a matmul")
        return None

    failure = fails_with_a_matmul(program)
    assert failure is not None
    small = shrink(program, failure, grad=False, seed=0, checker=fails_with_a_matmul)
    assert [op.kind for op in small.ops] == ["matmul"]
    parse_module(small.text())


def test_check_catches_a_miscompile(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from tessc import compiler

    real = compiler.compile_module

    def off_by_one(module, entry, target="cpu", **options):
        program = real(module, entry, target, **options)
        return lambda *args: tuple(np.asarray(y) + 1 for y in program(*args))

    monkeypatch.setattr(compiler, "compile_module", off_by_one)
    failure = check(generate(random.Random(3), ops=4), pipelines=("cpu-basic",))
    assert failure is not None and failure.kind == "mismatch"


@pytest.mark.parametrize(
    "status, stderr, outcome",
    [
        (0, b"", "ok"),
        (1 << 8, b"f.mlir:3:7: error: bad\n", "located"),
        (1 << 8, b"f.mlir: error: bad\n", "unlocated"),
        (1 << 8, b"f.mlir: error: internal compiler error in pass 'x': ...\n", "ice"),
        (70 << 8, b"Traceback (most recent call last):\n", "traceback"),
        (71 << 8, b"", "memory"),
        (signal.SIGXCPU, b"", "hang"),
        (signal.SIGSEGV, b"", "signal"),
    ],
)
def test_outcomes_are_classified(status: int, stderr: bytes, outcome: str) -> None:
    assert classify(status, stderr) == outcome


def test_mutations_are_deterministic() -> None:
    corpus = seeds(random.Random(0), generated=2)
    assert any(s.suffix == ".tess" for s in corpus) and any(s.passes for s in corpus)
    first = [mutate(random.Random(k), corpus[k % len(corpus)]) for k in range(50)]
    again = [mutate(random.Random(k), corpus[k % len(corpus)]) for k in range(50)]
    assert first == again and any(m != corpus[k % len(corpus)].content for k, m in enumerate(first))


def test_ci_budget_of_random_programs(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tessc.fuzz.__main__ import main

    monkeypatch.setenv("TESSC_CACHE_DIR", os.environ.get("TESSC_CACHE_DIR", str(tmp_path)))
    argv = ["programs", "--count", "6", "--seed", "1", "--ops", "8", "--grad-every", "3"]
    assert main([*argv, "--save-dir", str(tmp_path / "regressions")]) == 0


def test_ci_budget_of_mutated_inputs() -> None:
    assert run_campaign(count=60, seed=1, cpu_seconds=20) == 0


def test_row_programs_verify_and_depend_on_the_seed_only() -> None:
    for index in range(60):
        smooth = index % 2 == 1
        dtype = "f64" if smooth else "f32"
        program = generate_rows(random.Random(index), dtype=dtype, smooth=smooth)
        parse_module(program.text())
        again = generate_rows(random.Random(index), dtype=dtype, smooth=smooth)
        assert program.text() == again.text()
        assert any(op.kind == "matmul" for op in program.ops)
        if smooth:  # gradients: floats only, no trip through f32 (central differences)
            assert not program.arg_types and not any(op.kind == "cast" for op in program.ops)


def test_row_programs_reach_the_loop_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows generator's programs are packed (operands in place, one-tile-tall products),
    interchanged and row-dotted at `cpu` and the forced pipelines."""
    from tessc.compiler import lower_module
    from tessc.lowering.loops import interchange_rows, pack_matmul_build, row_dots

    hits: Counter[tuple[str, str]] = Counter()
    pipeline = ["cpu"]

    def counting(cls: type, name: str, what) -> None:
        real = getattr(cls, name)

        def wrapper(self, *args):
            for label in what(self):
                hits[(pipeline[0], label)] += 1
            return real(self, *args)

        monkeypatch.setattr(cls, name, wrapper)

    counting(
        pack_matmul_build.Packer,
        "build",
        lambda p: (
            ["pack"]
            + ["A in place"] * (p.a_in_place is not None)
            + ["B in place"] * (p.b_in_place is not None)
            + ["tall tile"] * (p.tile[0] not in (4, 6, 8))
        ),
    )
    counting(interchange_rows.Fission, "interchanged", lambda _: ["interchange"])
    counting(row_dots.RowDotTiler, "rows", lambda _: ["row dots"])
    names = ("cpu", *register_forced_pipelines())
    for index in range(24):
        module = parse_module(generate_rows(random.Random(index)).text())
        for name in names:
            pipeline[0] = name
            lower_module(module, "loops", pipeline=name)
    for label in ("pack", "A in place", "B in place", "interchange", "row dots"):
        assert all(hits[(name, label)] for name in names), (label, hits)
    assert sum(hits[(name, "tall tile")] for name in names), hits


def test_a_regression_found_at_a_forced_pipeline_replays_there(tmp_path, monkeypatch) -> None:
    from tessc.fuzz.check import replay, save_text
    from tessc.pipelines import PIPELINES

    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(
        "tessc.fuzz.check.check_text", lambda *a, pipelines, **k: seen.append(pipelines)
    )
    text = generate_rows(random.Random(0)).text()
    path = save_text(text, Failure("mismatch", "fuzz-pack", "x"), tmp_path, grad=False, seed=5)
    assert "pipelines=fuzz-pack" in path.read_text()
    assert replay(path) is None and seen[-1][-1] == "fuzz-pack" and "fuzz-pack" in PIPELINES
