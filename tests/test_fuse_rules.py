"""
`tess-fuse`'s rules table (`FUSION_RULES`): every row is named once and can refuse.

For each rule a small program has an edge that this rule refuses first; the test finds
that edge after `tess-fuse{report=true}` and checks the report prints the rule's reason
for it. A row added to the table without a program here fails `test_every_rule_has_a_case`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import OpResult
from xdsl.parser import Parser

from tessc.context import make_context
from tessc.lowering.fusion.fuse import TessFusePass
from tessc.lowering.fusion.fuse_plan import (
    FUSION_RULES,
    FusionCandidate,
    FusionPolicy,
    FusionRule,
    first_refusal,
)
from tessc.lowering.linalg.generic_analysis import labels
from tessc.lowering.linalg.to_linalg import TessToLinalgPass
from tessc.reference import parse_module

CTX = make_context()


@dataclass(frozen=True)
class Case:
    text: str
    """A func of `tess` ops (lowered to linalg first) or of linalg ops."""
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    """`tess-fuse` options."""
    first: str | None = None
    """The rule that refuses the edge first, if not the one tested (a guard rule)."""
    verified: bool = True
    """False for IR the verifier rejects, which a guard rule is for."""


def generic(result: str, ins: str, out: str, maps: list[str], body: str) -> str:
    """`result = linalg.generic` reading `ins` into `out` ('%v : type'), all loops parallel."""
    affine = ", ".join(f"affine_map<{m}>" for m in maps)
    num_loops = maps[0].split("->")[0].count("d")  # "(d0, d1) -> ...": 2
    loops = ", ".join(['"parallel"'] * num_loops)
    value, type_ = ins.split(" : ")
    init, out_type = out.split(" : ")
    return (
        f"{result} = linalg.generic {{indexing_maps = [{affine}], iterator_types = [{loops}]}}"
        f" ins({value} : {type_}) outs({init} : {out_type}) {{\n{body}\n}} -> {out_type}"
    )


def body(*ops: str) -> str:
    """A generic's body over one input `%a`, yielding `%m`."""
    return "\n".join(["^bb0(%a: f32, %o: f32):", *ops, "linalg.yield %m : f32"])


def func(signature: str, *ops: str) -> str:
    return "\n".join([f"func.func {signature} {{", *ops, "}"])


NEG = body("%m = arith.negf %a : f32")
ABS = body("%m = math.absf %a : f32")
EXP = body("%m = math.exp %a : f32")
ID1, ID2 = "(d0) -> (d0)", "(d0, d1) -> (d0, d1)"
T4, T33 = "tensor<4xf32>", "tensor<3x3xf32>"

CASES: dict[str, Case] = {
    "view-producer": Case(
        func(
            "@f(%x: tensor<2x3xf32>) -> tensor<6xf32>",
            "%e0 = tensor.empty() : tensor<2x3xf32>",
            generic("%n", "%x : tensor<2x3xf32>", "%e0 : tensor<2x3xf32>", [ID2] * 2, NEG),
            "%v = tensor.collapse_shape %n [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>",
            "%e1 = tensor.empty() : tensor<6xf32>",
            generic("%r", "%v : tensor<6xf32>", "%e1 : tensor<6xf32>", [ID1] * 2, ABS),
            "func.return %r : tensor<6xf32>",
        )
    ),
    "reduction-producer": Case(
        func(
            "@f(%x: tensor<3x4xf32>) -> tensor<3xf32>",
            "%s = tess.sum %x dims = [1] : tensor<3x4xf32> -> tensor<3xf32>",
            "%n = tess.neg %s : tensor<3xf32>",
            "func.return %n : tensor<3xf32>",
        )
    ),
    # A constant that is not a splat stays a tensor: no fill, no scalar.
    "opaque-producer": Case(
        func(
            f"@f() -> {T4}",
            f"%c = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : {T4}",
            f"%e = tensor.empty() : {T4}",
            generic("%r", f"%c : {T4}", f"%e : {T4}", [ID1] * 2, NEG),
            f"func.return %r : {T4}",
        )
    ),
    "same-block": Case(
        func(
            f"@f(%x: {T4}, %p: i1) -> {T4}",
            f"%e0 = tensor.empty() : {T4}",
            generic("%n", f"%x : {T4}", f"%e0 : {T4}", [ID1] * 2, NEG),
            f"%r = scf.if %p -> ({T4}) {{",
            f"%e1 = tensor.empty() : {T4}",
            generic("%a", f"%n : {T4}", f"%e1 : {T4}", [ID1] * 2, ABS),
            f"scf.yield %a : {T4}",
            "} else {",
            f"scf.yield %x : {T4}",
            "}",
            f"func.return %r : {T4}",
        )
    ),
    # A result written through a projection (a row to one element) is opaque: this guard
    # refuses the edge too, but `opaque-producer` is asked first.
    "invertible-result-map": Case(
        func(
            f"@f(%x: tensor<4x3xf32>) -> {T4}",
            f"%e0 = tensor.empty() : {T4}",
            generic("%p", "%x : tensor<4x3xf32>", f"%e0 : {T4}", [ID2, "(d0, d1) -> (d0)"], NEG),
            f"%e1 = tensor.empty() : {T4}",
            generic("%r", f"%p : {T4}", f"%e1 : {T4}", [ID1] * 2, ABS),
            f"func.return %r : {T4}",
        ),
        first="opaque-producer",
    ),
    # The producer scales row i by i; the consumer reads it transposed.
    "index-reads-aligned": Case(
        func(
            f"@f(%x: {T33}) -> {T33}",
            f"%e0 = tensor.empty() : {T33}",
            generic(
                "%i",
                f"%x : {T33}",
                f"%e0 : {T33}",
                [ID2] * 2,
                body(
                    "%k = linalg.index 0 : index",
                    "%ki = arith.index_cast %k : index to i64",
                    "%kf = arith.sitofp %ki : i64 to f32",
                    "%m = arith.mulf %a, %kf : f32",
                ),
            ),
            f"%e1 = tensor.empty() : {T33}",
            generic("%r", f"%i : {T33}", f"%e1 : {T33}", ["(d0, d1) -> (d1, d0)", ID2], ABS),
            f"func.return %r : {T33}",
        )
    ),
    # The consumer's loop d1 is given by no operand: the verifier rejects it, this guard
    # is for unverified IR.
    "static-extents": Case(
        func(
            f"@f(%x: {T4}) -> {T4}",
            f"%e0 = tensor.empty() : {T4}",
            generic("%n", f"%x : {T4}", f"%e0 : {T4}", [ID1] * 2, NEG),
            f"%e1 = tensor.empty() : {T4}",
            generic("%r", f"%n : {T4}", f"%e1 : {T4}", ["(d0, d1) -> (d0)"] * 2, ABS),
            f"func.return %r : {T4}",
        ),
        verified=False,
    ),
    "transpose-into-contraction": Case(
        func(
            "@f(%a: tensor<2x3xf32>, %w: tensor<4x3xf32>) -> tensor<2x4xf32>",
            "%t = tess.permute %w dims = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>",
            "%m = tess.matmul %a, %t : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>",
            "func.return %m : tensor<2x4xf32>",
        )
    ),
    "recompute-in-reduction": Case(
        func(
            "@f(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32>",
            "%n = tess.neg %x : tensor<2x3xf32>",
            "%m = tess.matmul %n, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>",
            "func.return %m : tensor<2x4xf32>",
        )
    ),
    "recompute-expensive": Case(
        func(
            "@f(%x: tensor<3x1xf32>, %y: tensor<3x4xf32>) -> tensor<3x4xf32>",
            "%e = tess.exp %x : tensor<3x1xf32>",
            "%a = tess.add %e, %y : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>",
            "func.return %a : tensor<3x4xf32>",
        )
    ),
    "materialized-full-reads": Case(
        func(
            "@f(%g: tensor<4x5xf32>, %h: tensor<4x5xf32>, %x: tensor<3x4xf32>)"
            " -> (tensor<5xf32>, tensor<3x5xf32>)",
            "%dh = tess.mul %g, %h : tensor<4x5xf32>, tensor<4x5xf32> -> tensor<4x5xf32>",
            "%db = tess.sum %dh dims = [0] : tensor<4x5xf32> -> tensor<5xf32>",
            "%dw = tess.matmul %x, %dh : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>",
            "func.return %db, %dw : tensor<5xf32>, tensor<3x5xf32>",
        )
    ),
    "shared-needs-multi-output": Case(
        func(
            "@f(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)",
            "%e = tess.exp %x : tensor<3x4xf32>",
            "%s = tess.mul %e, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>",
            "func.return %s, %e : tensor<3x4xf32>, tensor<3x4xf32>",
        ),
        options={"multi_output": False},
    ),
    "multi-output-parallel-consumer": Case(
        func(
            "@f(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3x4xf32>)",
            "%e = tess.exp %x : tensor<3x4xf32>",
            "%r = tess.sum %e dims = [1] : tensor<3x4xf32> -> tensor<3xf32>",
            "func.return %r, %e : tensor<3xf32>, tensor<3x4xf32>",
        )
    ),
    # The consumer reads the producer's diagonal: one loop for the producer's two.
    "multi-output-same-space": Case(
        func(
            f"@f(%x: {T33}) -> (tensor<3xf32>, {T33})",
            f"%e0 = tensor.empty() : {T33}",
            generic("%ex", f"%x : {T33}", f"%e0 : {T33}", [ID2] * 2, EXP),
            "%e1 = tensor.empty() : tensor<3xf32>",
            generic("%r", f"%ex : {T33}", "%e1 : tensor<3xf32>", ["(d0) -> (d0, d0)", ID1], ABS),
            f"func.return %r, %ex : tensor<3xf32>, {T33}",
        )
    ),
    "multi-output-uses-after": Case(
        func(
            f"@f(%x: {T4}) -> ({T4}, tensor<2x2xf32>)",
            f"%e0 = tensor.empty() : {T4}",
            generic("%ex", f"%x : {T4}", f"%e0 : {T4}", [ID1] * 2, EXP),
            "%v = tensor.expand_shape %ex [[0, 1]] output_shape [2, 2]"
            f" : {T4} into tensor<2x2xf32>",
            f"%e1 = tensor.empty() : {T4}",
            generic("%r", f"%ex : {T4}", f"%e1 : {T4}", [ID1] * 2, ABS),
            f"func.return %r, %v : {T4}, tensor<2x2xf32>",
        )
    ),
    # A sum over a broadcast: the broadcast's input does not span the reduced loop.
    "loop-extents-kept": Case(
        func(
            "@f(%x: tensor<3x1xf32>) -> tensor<3xf32>",
            "%b = tess.broadcast_to %x : tensor<3x1xf32> -> tensor<3x4xf32>",
            "%s = tess.sum %b dims = [1] : tensor<3x4xf32> -> tensor<3xf32>",
            "func.return %s : tensor<3xf32>",
        )
    ),
}


def fused_with_report(case: Case) -> ModuleOp:
    module = parse_module(case.text) if case.verified else Parser(CTX, case.text).parse_module()
    if "tess." in case.text:
        TessToLinalgPass().apply(CTX, module)
    TessFusePass(report=True, **case.options).apply(CTX, module)
    if case.verified:
        module.verify()
    return module


def test_rule_names_are_unique() -> None:
    names = [rule.name for rule in FUSION_RULES]
    assert len(set(names)) == len(names), names
    assert len({rule.check for rule in FUSION_RULES}) == len(FUSION_RULES)


def test_every_rule_has_a_case() -> None:
    assert list(CASES) == [rule.name for rule in FUSION_RULES]  # in table order, too


@pytest.mark.parametrize("rule", FUSION_RULES, ids=[rule.name for rule in FUSION_RULES])
def test_each_rule_refuses_an_edge_and_the_report_says_why(rule: FusionRule) -> None:
    case = CASES[rule.name]
    module = fused_with_report(case)
    policy = FusionPolicy(**case.options)
    refused = 0
    for op in module.walk():
        if not isinstance(op, GenericOp):
            continue
        for index, value in enumerate(op.inputs):
            candidate = FusionCandidate.of(op, index, policy, None)
            refusal = first_refusal(candidate) if candidate is not None else None
            if candidate is None or refusal is None:
                continue
            first, reason = refusal
            if first.name != (case.first or rule.name) or rule.check(candidate) is None:
                continue
            assert case.first is not None or rule.check(candidate) == reason
            report = op.attributes["tess.fusion_refused"]
            assert isinstance(report, StringAttr) and isinstance(value, OpResult)
            assert f"operand {index} ({','.join(labels(value.op))}): {reason}" in report.data
            refused += 1
    assert refused, f"no edge of the case is refused by {rule.name} first"
