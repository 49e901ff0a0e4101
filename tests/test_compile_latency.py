"""Compile latency (issue 12): the work passes do grows linearly with the program.

Not timed: each test counts work (effect queries, trait scans, pattern applications) on
programs of two sizes or depths, so that a quadratic creeping back fails here on any
machine, however loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from typing import Any

import pytest
import xdsl.irdl.operations as irdl_operations
from xdsl.dialects import arith, func, memref, scf, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    TensorType,
    f32,
    f64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Block, Operation, Region
from xdsl.ir.affine import AffineMap
from xdsl.ir.core import OpTraits, _IRNode
from xdsl.parser import Parser
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.printer import Printer
from xdsl.traits import MemoryWriteEffect, NoMemoryEffect, Pure
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import ParseError, VerifyException

from tessc.compiler import print_module
from tessc.context import make_context
from tessc.diagnostics import LocatingParser, verify_located
from tessc.dialects import dominance
from tessc.fuzz.programs import chain_program
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import parse_module
from tessc.xdsl_patches.speedups_construction import (
    OPERATIONS_BUILT_WITHOUT_SETTERS,
    PLAIN_OP_CONSTRUCTION_AT_ONCE,
)


def loop_nest(depth: int, ops: int) -> str:
    """A kernel: `depth` nested scf.for loops around `ops` additions and one store."""
    lines = ["func.func @k(%m: memref<8xf32>, %x: f32) {"]
    lines += ["  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index"]
    lines += ["  %c8 = arith.constant 8 : index"]
    for d in range(depth):
        lines.append(f"  scf.for %i{d} = %c0 to %c8 step %c1 {{")
    previous = "%x"
    for k in range(ops):
        lines.append(f"    %v{k} = arith.addf {previous}, %x : f32")
        previous = f"%v{k}"
    lines.append(f"    memref.store {previous}, %m[%i{depth - 1}] : memref<8xf32>")
    lines += ["  }"] * depth
    lines += ["  func.return", "}"]
    return "\n".join(lines) + "\n"


@contextmanager
def counting_effect_queries() -> Iterator[list[int]]:
    """Count the effect queries answered by the traits of pure ops and stores."""
    count = [0]
    originals = {cls: vars(cls)["get_effects"] for cls in (NoMemoryEffect, MemoryWriteEffect)}

    def counted(original: classmethod) -> classmethod:  # type: ignore[type-arg]
        def get_effects(cls, op):  # type: ignore[no-untyped-def]
            count[0] += 1
            return original.__func__(cls, op)

        return classmethod(get_effects)

    try:
        for cls, original in originals.items():
            cls.get_effects = counted(original)  # type: ignore[method-assign, assignment]
        yield count
    finally:
        for cls, original in originals.items():
            cls.get_effects = original  # type: ignore[method-assign]


def effect_queries(depth: int, ops: int) -> int:
    module = parse_module(loop_nest(depth, ops))
    ctx = make_context()
    with counting_effect_queries() as count:
        region_dce(module.body)
        CanonicalizePass().apply(ctx, module)
    assert isinstance(module, ModuleOp)
    return count[0]


def test_dead_code_queries_do_not_grow_with_loop_depth() -> None:
    # xDSL asks every loop of a nest for the effects of its whole body (a set built from
    # every nested op): O(ops * depth) per sweep. The early exit stops at the store.
    shallow, deep = effect_queries(1, 300), effect_queries(5, 300)
    assert deep < 1.5 * shallow, (shallow, deep)


def test_dead_code_queries_are_linear_in_body_size() -> None:
    small, large = effect_queries(3, 200), effect_queries(3, 800)
    assert large < 4.5 * small, (small, large)


def test_dead_code_answers_are_unchanged() -> None:
    # Dead pure ops inside a loop go; the loop, which stores, stays; a loop whose body
    # only computes is dead as a whole.
    text = loop_nest(2, 3).replace(
        "    memref.store", "    %dead = arith.mulf %x, %x : f32\n    memref.store"
    )
    module = parse_module(text)
    region_dce(module.body)
    names = [op.name for op in module.walk()]
    assert "arith.mulf" not in names and names.count("scf.for") == 2
    assert names.count("arith.addf") == 3
    pure_loop = parse_module(
        loop_nest(2, 3).replace("    memref.store %v2, %m[%i1] : memref<8xf32>\n", "")
    )
    region_dce(pure_loop.body)
    assert "scf.for" not in [op.name for op in pure_loop.walk()]


def test_trait_lookups_are_cached_and_follow_added_traits() -> None:
    make_context()  # applies tessc's xDSL fixes
    assert arith.AddfOp.has_trait(Pure)
    assert arith.AddfOp.get_trait(Pure) is not None
    assert "_tessc_traits_by_type" in vars(arith.AddfOp.traits)

    class _Marker(NoMemoryEffect):
        pass

    traits = memref.DeallocOp.traits
    saved = traits.traits
    try:
        assert not memref.DeallocOp.has_trait(_Marker)
        traits.add_trait(_Marker())
        assert memref.DeallocOp.has_trait(_Marker)
        assert len(memref.DeallocOp.get_traits_of_type(_Marker)) == 1
    finally:
        traits._traits = saved
        vars(traits).pop("_tessc_traits_by_type", None)
    assert not memref.DeallocOp.has_trait(_Marker)
    assert isinstance(traits, OpTraits)


# -- the cpu pipeline on a generated program ------------------------------------------


def big_program(n: int) -> str:
    """`bench/bench_compile.py`'s program with `n` ops: elementwise chains (exp and tanh
    expand into polynomials in loop nests) with a matmul every 50 ops, on 16x16 f32."""
    return chain_program(n, 16, matmul_every=50, name="big")


def before_cleanup(n: int) -> ModuleOp:
    """The program through the `cpu` pipeline up to (not including) its cleanup passes
    (`tess-hoist-constants` and what follows it)."""
    spec = get_pipeline("cpu").passes_to("loops")
    head, cleanup, _ = spec.partition(",tess-hoist-constants,")
    assert cleanup and spec.endswith(",canonicalize,cse,tess-sink-aliasing-views")
    module = parse_module(big_program(n))
    run_passes(module, head)
    return module


@contextmanager
def counting_sweeps() -> Iterator[list[int]]:
    """Count the greedy driver's sweeps (worklists processed) and the op visits in them."""
    counts = [0, 0]
    process, apply = (
        PatternRewriteWalker._process_worklist,
        GreedyRewritePatternApplier.match_and_rewrite,
    )

    def counted_process(self, listener):  # type: ignore[no-untyped-def]
        counts[0] += 1
        return process(self, listener)

    def counted_apply(self, op, rewriter):  # type: ignore[no-untyped-def]
        counts[1] += 1
        return apply(self, op, rewriter)

    PatternRewriteWalker._process_worklist = counted_process  # type: ignore[method-assign]
    GreedyRewritePatternApplier.match_and_rewrite = counted_apply  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        PatternRewriteWalker._process_worklist = process  # type: ignore[method-assign]
        GreedyRewritePatternApplier.match_and_rewrite = apply  # type: ignore[method-assign]


def test_hoisting_leaves_canonicalize_one_sweep_and_the_same_module() -> None:
    ctx = make_context()
    plain = before_cleanup(60)
    hoisted = plain.clone()
    CanonicalizePass().apply(ctx, plain)
    CommonSubexpressionElimination().apply(ctx, plain)
    with counting_sweeps() as counts:
        run_passes(hoisted, "tess-hoist-constants,canonicalize")
    assert counts[0] == 1, counts  # nothing to do: one sweep finds that out
    CommonSubexpressionElimination().apply(ctx, hoisted)
    assert print_module(hoisted) == print_module(plain)


def test_cpu_pipeline_work_is_linear_in_program_size() -> None:
    spec = get_pipeline("cpu").passes_to("loops")
    visits = []
    for n in (100, 400):
        module = parse_module(big_program(n))
        with counting_sweeps() as counts:
            run_passes(module, spec)
        visits.append(counts[1])
    assert visits[1] < 4.4 * visits[0], visits


def test_fixed_operand_counts_verify_at_once_and_still_fail() -> None:
    make_context()  # applies tessc's xDSL fixes
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    arith.AddfOp(x.result, x.result).verify()
    assert "_tessc_fixed_counts" in vars(arith.AddfOp.get_irdl_definition())
    bad = arith.AddfOp.create(operands=[x.result], result_types=[f32])
    with pytest.raises(VerifyException, match="Expected 2 operands, but got 1"):
        bad.verify()
    # Variadic operands (scf.for's iter_args) still go through xDSL's full check.
    c = arith.ConstantOp(IntegerAttr.from_index_int_value(0))
    loop = scf.ForOp(c.result, c.result, c.result, [], Block(arg_types=[IndexType()]))
    loop.body.block.add_op(scf.YieldOp())
    loop.verify()


# -- verification ------------------------------------------------------------------------


@contextmanager
def counting_verification_work() -> Iterator[dict[str, int]]:
    """Count IRDL constraint checks (operand and result lists), `is_ancestor` climbs and
    dominance decided the slow way."""
    counts = {"constraints": 0, "ancestors": 0, "dominance": 0}
    originals = (
        irdl_operations.irdl_op_verify_arg_list,
        _IRNode.is_ancestor,
        dominance._dominates,
    )

    def counter(key: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            counts[key] += 1
            return original(*args)

        return counted

    irdl_operations.irdl_op_verify_arg_list = counter("constraints", originals[0])
    _IRNode.is_ancestor = counter("ancestors", originals[1])  # type: ignore[method-assign]
    dominance._dominates = counter("dominance", originals[2])
    try:
        yield counts
    finally:
        irdl_operations.irdl_op_verify_arg_list = originals[0]
        _IRNode.is_ancestor = originals[1]  # type: ignore[method-assign]
        dominance._dominates = originals[2]


def verification_work(depth: int, ops: int) -> dict[str, int]:
    module = parse_module(loop_nest(depth, ops))
    for op in module.walk():  # forget the signatures parsing verified
        vars(type(op).get_irdl_definition()).pop("_tessc_verified_signatures", None)
    with counting_verification_work() as counts:
        verify_located(module)
    return counts


def test_verification_work_does_not_grow_with_repeated_ops_or_depth() -> None:
    # Constraints: once per distinct op signature (10 here, operands and results: 20), not
    # once per op; dominance and isolation: a set lookup per use, not a climb from the
    # definition per use.
    small, large = verification_work(1, 100), verification_work(5, 800)
    assert large["constraints"] == small["constraints"] == 20, (small, large)
    assert large["ancestors"] == small["ancestors"] == 0, (small, large)
    assert large["dominance"] == small["dominance"] == 0, (small, large)


def test_op_constraints_are_still_checked_per_signature_and_traits_per_op() -> None:
    make_context()  # applies tessc's xDSL fixes
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    y = arith.ConstantOp(FloatAttr(1.0, f64))
    arith.AddfOp(x.result, x.result).verify()
    arith.AddfOp(x.result, x.result).verify()  # the same signature: remembered
    assert "_tessc_verified_signatures" in vars(arith.AddfOp.get_irdl_definition())
    mixed = arith.AddfOp.create(operands=[x.result, y.result], result_types=[f32])
    with pytest.raises(VerifyException, match="expected from variable"):
        mixed.verify()
    # func.return passed inside a function; the same signature outside one still fails
    # its HasParent trait.
    function = func.FuncOp("f", ((), ()))
    function.body.block.add_op(func.ReturnOp())
    function.verify()
    stray = scf.ExecuteRegionOp([], Region(Block([func.ReturnOp()])))
    with pytest.raises(VerifyException, match="expects parent op"):
        stray.verify()
    # A large constant is verified but not remembered (it would outlive its module).
    big = TensorType(f32, [4096])
    arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(big, [1.0] * 4096)).verify()
    arith.ConstantOp(FloatAttr(2.0, f32)).verify()  # a small one is remembered
    remembered = vars(arith.ConstantOp.get_irdl_definition()).get("_tessc_verified_signatures", ())
    assert remembered and all(len(str(signature)) < 1000 for signature in remembered)


def test_a_function_using_a_value_from_outside_is_still_rejected() -> None:
    outside = arith.ConstantOp(FloatAttr(1.0, f32))
    function = func.FuncOp("f", ((), ()))
    loop_body = Block(arg_types=[IndexType()])
    loop_body.add_ops([arith.AddfOp(outside.result, outside.result), scf.YieldOp()])
    c = arith.ConstantOp(IntegerAttr.from_index_int_value(0))
    function.body.block.add_ops([c, scf.ForOp(c, c, c, [], loop_body), func.ReturnOp()])
    ModuleOp([outside, function])
    with pytest.raises(VerifyException, match="IsolatedFromAbove"):
        function.verify()


def test_each_plain_shaped_type_is_parsed_once() -> None:
    parsed: list[str] = []
    original = Parser._parse_optional_builtin_parametrized_type

    def counted(self: Parser) -> Any:
        parsed.append(self._current_token.text)
        return original(self)

    text = chain_program(200, 8) + (
        "func.func @g(%m: memref<8xf32, strided<[1]>>, %n: memref<8xf32>) -> tensor<8xf32> {\n"
        "  %t = tess.fill 1.0 : tensor<8xf32>\n"
        "  func.return %t : tensor<8xf32>\n}\n"
    )
    Parser._parse_optional_builtin_parametrized_type = counted  # type: ignore[method-assign]
    try:
        module = LocatingParser(make_context(), text, "chain.mlir").parse_module()
    finally:
        Parser._parse_optional_builtin_parametrized_type = original  # type: ignore[method-assign]
    # tensor<8x8xf32>, memref<8xf32, strided<[1]>> (not plain: its own parse, which asks
    # about `strided` too), memref<8xf32>, tensor<8xf32>: one parse each.
    assert parsed == ["tensor", "memref", "strided", "memref", "tensor"], parsed
    types = {str(t) for op in module.walk() for t in (*op.operand_types, *op.result_types)}
    assert types >= {"tensor<8x8xf32>", "tensor<8xf32>"}
    printed = print_module(module)
    assert "strided<[1]>" in printed and printed.count("tensor<8x8xf32>") > 400


def test_a_bad_plain_type_is_still_a_parse_error() -> None:
    with pytest.raises(ParseError):
        LocatingParser(
            make_context(), "func.func @f(%a: tensor<8xf32>, %b: tensor<8xi3x>) {\n}\n", "x"
        ).parse_module()


def _generic_text(op: Operation) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(op)
    return out.getvalue()


def test_ops_are_built_at_once_as_xdsl_builds_them() -> None:
    make_context()  # applies tessc's xDSL fixes
    x = Block(arg_types=[f32, IndexType()]).args[0]
    c = arith.ConstantOp(IntegerAttr.from_index_int_value(0))
    t = TensorType(f32, [4, 4])
    empty = tensor.EmptyOp([], t)

    def generic() -> Operation:
        body = Block(arg_types=[f32, f32])
        body.add_op(LinalgYieldOp(body.args[0]))
        maps = [AffineMapAttr(AffineMap.identity(2))] * 2
        return GenericOp([empty.tensor], [empty.tensor], Region(body), maps,
                                [IteratorTypeAttr.parallel()] * 2, [t])  # fmt: skip

    def loop() -> Operation:
        body = Block(arg_types=[IndexType(), f32])
        body.add_op(scf.YieldOp(body.args[1]))
        return scf.ForOp(c.result, c.result, c.result, [x], body)

    builds: list[Callable[[], Operation]] = [
        lambda: arith.AddfOp(x, x),
        lambda: arith.ConstantOp(FloatAttr(1.0, f32)),
        lambda: tensor.EmptyOp([], t),
        lambda: memref.AllocOp.get(f32, shape=[4]),
        lambda: func.CallOp("g", [x, x], [f32]),
        lambda: arith.AddfOp(c, c),  # ops for their results: xDSL's path
        generic,
        loop,
    ]
    fast = [build() for build in builds]
    with PLAIN_OP_CONSTRUCTION_AT_ONCE.stock(), OPERATIONS_BUILT_WITHOUT_SETTERS.stock():
        slow = [build() for build in builds]
    for a, b in zip(fast, slow, strict=True):
        assert _generic_text(a) == _generic_text(b)
        assert list(a.properties) == list(b.properties) and a.attributes == b.attributes
        assert sorted(vars(a)) == sorted(vars(b)) and a.location == b.location
        uses = a._operand_uses  # each operand's use list holds the op's use of it
        assert [u.index for u in uses] == list(range(len(a.operands)))
        assert all(any(u is use for u in v.uses) for v, use in zip(a.operands, uses, strict=True))

    with counting_arg_lists() as count:
        for build in builds[:5] + builds[6:]:
            build()
    assert count[0] == 0
    with pytest.raises(ValueError, match="Expected 2 operand, but got 1"):
        arith.AddfOp.build(operands=[x], result_types=[f32])


@contextmanager
def counting_arg_lists() -> Iterator[list[int]]:
    """Count argument lists xDSL's `irdl_op_init` builds (four per op)."""
    count = [0]
    original = irdl_operations.irdl_build_arg_list

    def counted(*args: Any) -> Any:
        count[0] += 1
        return original(*args)

    irdl_operations.irdl_build_arg_list = counted
    try:
        yield count
    finally:
        irdl_operations.irdl_build_arg_list = original
