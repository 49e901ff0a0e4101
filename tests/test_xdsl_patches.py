"""
Every patch of xDSL (`tessc.xdsl_patches`) against stock xDSL's code on the same inputs: a
fix shows stock xDSL's bug and the patched answer; a speedup gives stock xDSL's answers
(the functions compared directly, and filecheck inputs compiled both ways). Then the
registry, the version guard (another xDSL: nothing patched, one warning) and `apply()`
being idempotent.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects import arith, builtin, func, memref, scf
from xdsl.dialects.builtin import FloatAttr, ModuleOp, f32, f64, i32, i64
from xdsl.ir import Block, Operation, Region
from xdsl.ir.core import OpTraits
from xdsl.irdl.operations import VarIRConstruct
from xdsl.parser import Parser
from xdsl.traits import (
    ConstantLike,
    HasCanonicalizationPatternsTrait,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    NoMemoryEffect,
    Pure,
    RecursiveMemoryEffect,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import ParseError, VerifyException

from tessc import xdsl_patches
from tessc.compiler import print_module, verify_module
from tessc.context import make_context
from tessc.fuzz.programs import chain_program
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import parse_module
from tessc.xdsl_patches import PATCHES, SCOPED_PATCHES, Patch, XdslPatchSkipped, registry
from tessc.xdsl_patches.failing_ops import (
    FAILING_OP_ON_EXCEPTIONS,
    recorded_failing_op,
    recorded_message,
    recording_failing_ops,
)
from tessc.xdsl_patches.fixes import (
    EQUIVALENCE_COMPARES_RESULT_TYPES,
    LINEAR_TIME_STRING_LITERALS,
    PARENTHESISED_GENERIC_RESULTS,
)
from tessc.xdsl_patches.speedups_construction import (
    OPERATIONS_BUILT_WITHOUT_SETTERS,
    PLAIN_OP_CONSTRUCTION_AT_ONCE,
)
from tessc.xdsl_patches.speedups_effects import PATCHES as EFFECT_PATCHES
from tessc.xdsl_patches.speedups_traits import PATCHES as TRAIT_PATCHES
from tessc.xdsl_patches.speedups_verify import (
    FIXED_CONSTRUCT_COUNTS_AT_ONCE,
    ISOLATED_FROM_ABOVE_BY_SET_LOOKUP,
    OP_CONSTRAINTS_ONCE_PER_SIGNATURE,
)

make_context()  # applies the patches, as every tool does

FILECHECK = Path(__file__).resolve().parent / "filecheck"
INPUTS = (
    "fusion/optim-steps.mlir",
    "fusion/tess-cse-generics-types.mlir",
    "fusion/mlp-step-kernels.mlir",
    "loops/tess-register-accumulate.mlir",
)
"""Filecheck inputs, each compiled by its first RUN line's passes."""

SPEEDUPS = [patch for patch in PATCHES if patch.kind == "speedup"]


def first_run_passes(text: str) -> str:
    match = re.search(r"RUN: tessc-opt %s -p '([^']+)'", text)
    assert match, "no RUN line with a pass pipeline"
    return match.group(1)


def compile_text(text: str, spec: str) -> str:
    module = parse_module(text)
    run_passes(module, spec)
    verify_module(module)
    return print_module(module)


def round_trip(text: str) -> str:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return print_module(module)


def stock(*patches: Patch) -> ExitStack:
    """Stock xDSL's code in place of `patches` for a `with` block."""
    stack = ExitStack()
    for patch in patches:
        stack.enter_context(patch.stock())
    return stack


def programs() -> Iterator[tuple[str, str]]:
    """(text, pass pipeline): the filecheck inputs and a generated chain to the loop level."""
    for name in INPUTS:
        text = (FILECHECK / name).read_text()
        yield text, first_run_passes(text)
    yield chain_program(40, 8, matmul_every=20), get_pipeline("cpu").passes_to("loops")


@pytest.fixture(scope="module")
def compiled() -> list[tuple[str, str, str]]:
    """(input, passes, output) of every program, compiled with every patch applied."""
    return [(text, spec, compile_text(text, spec)) for text, spec in programs()]


@pytest.fixture(scope="module")
def modules(compiled: list[tuple[str, str, str]]) -> list[ModuleOp]:
    """Each program at its input (tess) and output (fused, buffers or loops) level."""
    return [parse_module(text) for text, _, output in compiled for text in (text, output)]


def all_ops(modules: list[ModuleOp]) -> list[Operation]:
    return [op for module in modules for op in module.walk()]


# -- speedups: whole programs ----------------------------------------------------------


def test_every_speedup_compiles_programs_as_stock_xdsl(
    compiled: list[tuple[str, str, str]],
) -> None:
    with stock(*SPEEDUPS):
        for text, spec, output in compiled:
            assert compile_text(text, spec) == output
            assert round_trip(output) == output


@pytest.mark.parametrize("patch", SPEEDUPS, ids=lambda patch: patch.name)
def test_each_speedup_alone_compiles_as_stock_xdsl(
    patch: Patch, compiled: list[tuple[str, str, str]]
) -> None:
    text, spec, output = compiled[-1]  # the generated chain, through the cpu pipeline
    with patch.stock():
        assert compile_text(text, spec) == output


# -- speedups: the functions compared on every op --------------------------------------


def effect_query_calls(patch: Patch, ops: list[Operation]) -> Iterator[tuple[Any, ...]]:
    """The arguments to call `patch`'s effect query with: every op (and every effect kind),
    or for the in-between query, every op and each of the next four in its block."""
    if patch.attribute == "has_other_side_effecting_op_in_between":
        for op in ops:
            later = op.next_op
            for _ in range(4):
                if later is None:
                    break
                yield op, later
                later = later.next_op
    elif patch.attribute == "only_has_effect":
        yield from ((op, kind) for op in ops for kind in MemoryEffectKind)
    else:
        yield from ((op,) for op in ops)


@pytest.mark.parametrize("patch", EFFECT_PATCHES, ids=lambda patch: patch.name)
def test_effect_queries_answer_as_stock_xdsl(patch: Patch, modules: list[ModuleOp]) -> None:
    answers = []
    for args in effect_query_calls(patch, all_ops(modules)):
        expected = patch.original(*args)
        assert patch.replacement(*args) == expected, (patch.name, args)
        answers.append(expected)
    assert len(set(answers)) == 2, "inputs with both answers"


TRAIT_TYPES = (
    ConstantLike,
    HasCanonicalizationPatternsTrait,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    NoMemoryEffect,
    Pure,
    RecursiveMemoryEffect,
    SymbolOpInterface,
)


@pytest.mark.parametrize(
    "patch", [p for p in TRAIT_PATCHES if p.owner is Operation], ids=lambda p: p.name
)
def test_trait_lookups_answer_as_stock_xdsl(patch: Patch, modules: list[ModuleOp]) -> None:
    classes = {type(op) for op in all_ops(modules)}
    queries: list[tuple[type[Operation], Any]] = [
        (cls, trait) for cls in classes for trait in (*TRAIT_TYPES, *cls.traits)
    ]
    if patch.attribute == "get_traits_of_type":
        queries = [(cls, trait) for cls, trait in queries if isinstance(trait, type)]
    for _ in range(2):  # the second time from the cache
        for cls, trait in queries:
            expected = patch.original.__func__(cls, trait)
            assert patch.replacement.__func__(cls, trait) == expected, (cls, trait)


def test_adding_a_trait_gives_stock_xdsl_traits_and_drops_the_cache() -> None:
    (add_trait,) = [p for p in TRAIT_PATCHES if p.owner is OpTraits]

    class Marker(NoMemoryEffect):
        pass

    class TestOp(arith.AddfOp):
        traits = OpTraits(lambda: tuple(arith.AddfOp.traits))

    assert not TestOp.has_trait(Marker)  # fills the cache
    marker = Marker()
    stock_traits = OpTraits(lambda: tuple(arith.AddfOp.traits))
    add_trait.original(stock_traits, marker)
    add_trait.replacement(TestOp.traits, marker)
    assert set(TestOp.traits) == set(stock_traits)
    assert TestOp.has_trait(Marker) and TestOp.get_trait(Marker) is marker


def test_construct_counts_verify_as_stock_xdsl(modules: list[ModuleOp]) -> None:
    patch = FIXED_CONSTRUCT_COUNTS_AT_ONCE
    for op in all_ops(modules):
        op_def = type(op).get_irdl_definition()
        for construct in VarIRConstruct:
            assert patch.original(op, op_def, construct) is None
            assert patch.replacement(op, op_def, construct) is None
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    bad = arith.AddfOp.create(operands=[x.result], result_types=[f32])
    bad_def = arith.AddfOp.get_irdl_definition()
    messages = []
    for verify in (patch.original, patch.replacement):
        with pytest.raises(VerifyException) as error:
            verify(bad, bad_def, VarIRConstruct.OPERAND)
        messages.append(str(error.value))
    assert messages[0] == messages[1] and "operand" in messages[0]


def test_op_constraints_verify_as_stock_xdsl(modules: list[ModuleOp]) -> None:
    patch = OP_CONSTRAINTS_ONCE_PER_SIGNATURE
    for _ in range(2):  # the second time from the signatures remembered
        for op in all_ops(modules):
            op_def = type(op).get_irdl_definition()
            assert patch.original(op_def, op) is None
            assert patch.replacement(op_def, op) is None
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    y = arith.ConstantOp(FloatAttr(1.0, f64))
    bad = arith.AddfOp.create(operands=[x.result, y.result], result_types=[f32])
    messages = []
    for verify in (patch.original, patch.replacement, patch.replacement):
        with pytest.raises(VerifyException) as error:
            verify(arith.AddfOp.get_irdl_definition(), bad)
        messages.append(str(error.value))
    assert len(set(messages)) == 1


def test_isolated_from_above_verifies_as_stock_xdsl(modules: list[ModuleOp]) -> None:
    patch = ISOLATED_FROM_ABOVE_BY_SET_LOOKUP
    isolated = [op for op in all_ops(modules) if op.has_trait(IsolatedFromAbove)]
    assert len(isolated) > len(modules)  # modules and functions (and kernels)
    for op in isolated:
        trait = op.get_trait(IsolatedFromAbove)
        assert patch.original(trait, op) is None
        assert patch.replacement(trait, op) is None
    outside = arith.ConstantOp(FloatAttr(1.0, f32))
    body = Block()
    body.add_ops([arith.AddfOp(outside.result, outside.result), func.ReturnOp()])
    function = func.FuncOp("f", ((), ()), Region(body))
    builtin.ModuleOp([outside, function])
    messages = []
    for verify in (patch.original, patch.replacement):
        with pytest.raises(VerifyException) as error:
            verify(IsolatedFromAbove(), function)
        messages.append(str(error.value))
    assert messages[0] == messages[1] and "IsolatedFromAbove" in messages[0]


def built_ops() -> list[Operation]:
    """Ops built as passes build them (the plain path) and otherwise (xDSL's own path)."""
    c = arith.ConstantOp(FloatAttr(1.0, f32))
    body = Block(arg_types=[builtin.IndexType(), f32])
    body.add_op(scf.YieldOp(body.args[1]))
    index = arith.ConstantOp.from_int_and_width(0, builtin.IndexType())
    return [
        c,
        arith.AddfOp(c.result, c.result),
        arith.AddfOp(c, c),  # ops for their results
        arith.FPToSIOp(c.result, i32),
        memref.AllocOp.get(f32, shape=[4]),
        func.CallOp("g", [c.result, c.result], [f32]),
        scf.ForOp(index.result, index.result, index.result, [c.result], body),
    ]


def described(op: Operation) -> tuple[Any, ...]:
    return (
        op.name,
        [operand.type for operand in op.operands],
        op.result_types,
        list(op.properties.items()),
        list(op.attributes.items()),
        op.location,
        len(op.regions),
        sorted(vars(op)),
    )


@pytest.mark.parametrize(
    "patch",
    [OPERATIONS_BUILT_WITHOUT_SETTERS, PLAIN_OP_CONSTRUCTION_AT_ONCE],
    ids=lambda patch: patch.name,
)
def test_ops_are_built_as_stock_xdsl_builds_them(patch: Patch) -> None:
    patched = [described(op) for op in built_ops()]
    with patch.stock():
        assert [described(op) for op in built_ops()] == patched
    c = arith.ConstantOp(FloatAttr(1.0, f32))
    with pytest.raises(ValueError) as patched_error:
        arith.AddfOp.build(operands=[c.result], result_types=[f32])
    with patch.stock(), pytest.raises(ValueError) as stock_error:
        arith.AddfOp.build(operands=[c.result], result_types=[f32])
    assert str(patched_error.value) == str(stock_error.value)


# -- fixes: stock xDSL's bug, and the patched answer -----------------------------------


def test_stock_xdsl_cannot_read_back_a_two_result_generic() -> None:
    fused = compile_text((FILECHECK / "fusion/tess-fuse.mlir").read_text(), "tess-fuse")
    assert re.search(r"^\s*\} -> \(tensor", fused, re.MULTILINE), "a multi-result generic"
    with PARENTHESISED_GENERIC_RESULTS.stock(), pytest.raises(ParseError):
        round_trip(fused)
    assert round_trip(fused) == fused


def test_stock_string_regex_hangs_on_an_unterminated_string() -> None:
    patched, original = (
        LINEAR_TIME_STRING_LITERALS.replacement,
        LINEAR_TIME_STRING_LITERALS.original,
    )
    unterminated = '"' + "ab" * 20
    with pytest.raises(subprocess.TimeoutExpired):  # 2^40 ways to split 40 characters
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import re; re.compile({original.pattern!r}).match({unterminated!r})",
            ],
            timeout=2,
        )
    assert patched.match('"' + "ab" * 50_000) is None
    rng = random.Random(0)
    alphabet = ['"', "\\", "n", "t", "a", "0", "F", "\n", "\v", " ", "é", "g"]
    for _ in range(5_000):
        text = '"' + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        expected, got = original.match(text), patched.match(text)
        assert (expected and expected.group()) == (got and got.group()), text


def test_stock_equivalence_ignores_result_types() -> None:
    patch = EQUIVALENCE_COMPARES_RESULT_TYPES
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    to_i32, to_i64, also_i32 = (arith.FPToSIOp(x.result, t) for t in (i32, i64, i32))
    assert patch.original(to_i32, to_i64)  # stock xDSL's bug
    assert not patch.replacement(to_i32, to_i64)
    assert patch.original(to_i32, also_i32) and patch.replacement(to_i32, also_i32)


def test_stock_op_errors_do_not_keep_the_failing_op() -> None:
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    y = arith.ConstantOp(FloatAttr(1.0, f64))
    bad = arith.AddfOp.create(operands=[x.result, y.result], result_types=[f32])
    builtin.ModuleOp([x, y, bad])

    def failure() -> BaseException:
        with pytest.raises(VerifyException) as error:
            bad.emit_error("not the same types", VerifyException("not the same types"))
        return error.value

    stock_error = failure()
    assert recorded_failing_op(stock_error) is None
    assert not FAILING_OP_ON_EXCEPTIONS.is_applied()
    with recording_failing_ops():
        assert FAILING_OP_ON_EXCEPTIONS.is_applied()
        error = failure()
    assert not FAILING_OP_ON_EXCEPTIONS.is_applied()
    assert recorded_failing_op(error) is bad
    assert recorded_message(error) == "not the same types"
    assert str(error) == str(stock_error)


# -- the registry, the version guard, apply() ------------------------------------------


def test_every_patch_is_registered_with_its_kind_version_and_upstream_change() -> None:
    every = (*PATCHES, *SCOPED_PATCHES)
    assert len(every) == 32 and len({patch.name for patch in every}) == 32
    assert [p.kind for p in PATCHES].count("fix") == 16 and len(SPEEDUPS) == 15
    assert [p.kind for p in SCOPED_PATCHES] == ["fix"]
    for patch in every:
        assert patch.name.startswith("xdsl.")
        assert patch.xdsl_versions == ("0.74",)
        assert len(patch.upstream) > 100, patch.name
        assert patch.original is not patch.replacement
        original = getattr(patch.original, "__func__", patch.original)
        if callable(original):  # stock xDSL's code, not tessc's (read before patching)
            assert original.__module__.startswith("xdsl."), patch.name
    assert all(patch.is_applied() for patch in PATCHES)


@pytest.mark.parametrize(
    ("version", "written_for"),
    [("0.74.0", True), ("0.74.3", True), ("0.75.0", False), ("0.740.1", False), ("0.7", False)],
)
def test_a_patch_is_written_for_its_releases_only(version: str, written_for: bool) -> None:
    assert PATCHES[0].written_for(version) is written_for


def reapply_after(test: Callable[[], None]) -> None:
    try:
        test()
    finally:
        xdsl_patches.revert()
        xdsl_patches.apply()
        assert all(patch.is_applied() for patch in PATCHES)


def test_another_xdsl_is_left_stock_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def under_xdsl_0_75() -> None:
        monkeypatch.setattr(registry, "installed_xdsl_version", lambda: "0.75.0")
        xdsl_patches.revert()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            xdsl_patches.apply()
            xdsl_patches.apply()
            make_context()
            with recording_failing_ops():
                assert not FAILING_OP_ON_EXCEPTIONS.is_applied()
        assert [type(w.message) for w in caught] == [XdslPatchSkipped]
        message = str(caught[0].message)
        assert "xDSL 0.75.0" in message and "0.74.x" in message and "32 patches" in message
        assert "xdsl.ir.core.Operation.__init__" in message
        assert not any(patch.is_applied() for patch in PATCHES)
        monkeypatch.undo()

    reapply_after(under_xdsl_0_75)


def test_only_the_patches_written_for_another_xdsl_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Target:
        def method(self) -> str:
            return "stock"

    newer = Patch(Target, "method", lambda self: "patched", "fix", "x", xdsl_versions=("9.9",))

    def with_a_patch_for_xdsl_9_9() -> None:
        monkeypatch.setattr(xdsl_patches, "PATCHES", (*PATCHES, newer))
        xdsl_patches.revert()
        with pytest.warns(
            XdslPatchSkipped, match=r"without 1 patch \(.*Target\.method\)"
        ) as caught:
            xdsl_patches.apply()
        assert len(caught) == 1 and Target().method() == "stock"
        assert all(patch.is_applied() for patch in PATCHES)
        monkeypatch.undo()

    reapply_after(with_a_patch_for_xdsl_9_9)


def test_apply_is_idempotent_and_silent() -> None:
    def twice() -> None:
        xdsl_patches.revert()
        assert not xdsl_patches.is_applied()
        assert not any(patch.is_applied() for patch in PATCHES)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                xdsl_patches.apply()
                assert xdsl_patches.is_applied()
                assert all(patch.is_applied() for patch in PATCHES)
        assert all(vars(p.owner)[p.attribute] is p.replacement for p in PATCHES)
        assert Operation.__init__ is OPERATIONS_BUILT_WITHOUT_SETTERS.replacement

    reapply_after(twice)
