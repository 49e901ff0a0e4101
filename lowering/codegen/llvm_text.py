"""
LLVM function text as the LLVM emitters write it (`to_llvm.py`, `llvm_micro.py`): fresh
value and block names, lines, index arithmetic folded where its operands are constants, and
counted loops with phis. Conventions: lowering/codegen/README.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from xdsl.ir import SSAValue

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name hint usable in an LLVM value name."""
INTEGER = re.compile(r"-?\d+")
"""An operand that is an integer literal."""


class FunctionText:
    """LLVM function text being written: fresh names, blocks, lines, folded index
    arithmetic and counted loops."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.block = "entry"
        self.values: dict[SSAValue, str] = {}  # IR values and their LLVM operands

    # -- text ---------------------------------------------------------------------------

    def fresh(self, value: SSAValue | None = None) -> str:
        self.counter += 1
        hint = value.name_hint if value is not None else None
        if hint and IDENTIFIER.fullmatch(hint):
            return f"%{hint}.{self.counter}"
        return f"%v{self.counter}"

    def label(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def line(self, text: str) -> None:
        self.lines.append("  " + text)

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label

    def assign(self, text: str, value: SSAValue | None = None) -> str:
        name = self.fresh(value)
        self.line(f"{name} = {text}")
        if value is not None:
            self.values[value] = name
        return name

    def add(self, a: str, b: str) -> str:
        if INTEGER.fullmatch(a) and INTEGER.fullmatch(b):
            return str(int(a) + int(b))
        if b == "0":
            return a
        if a == "0":
            return b
        return self.assign(f"add nsw i64 {a}, {b}")

    def mul(self, a: str, b: str) -> str:
        if INTEGER.fullmatch(a) and INTEGER.fullmatch(b):
            return str(int(a) * int(b))
        if "0" in (a, b):
            return "0"
        if b == "1":
            return a
        if a == "1":
            return b
        return self.assign(f"mul nsw i64 {a}, {b}")

    def element_address(self, element: str, pointer: str, offset: str) -> str:
        if offset == "0":
            return pointer
        return self.assign(f"getelementptr inbounds {element}, ptr {pointer}, i64 {offset}")

    # -- loops -------------------------------------------------------------------

    def loop(
        self,
        lower: str,
        upper: str,
        step: str,
        carried: Sequence[tuple[str, str]],
        body: Callable[[str, list[str]], list[str]],
        hint: SSAValue | None = None,
    ) -> list[str]:
        """A counted loop `for iv = lower; iv < upper; iv += step` carrying `carried`
        ((type, initial value) pairs): `body(iv, carried values)` emits the body and
        returns the values carried on; the loop's results are the carried values after
        it."""
        before = self.block
        head, inside, after = self.label("loop"), self.label("body"), self.label("exit")
        self.line(f"br label %{head}")
        self.start(head)
        iv = self.fresh(hint)
        phis = [self.fresh() for _ in carried]
        slots = len(self.lines)
        self.lines += [""] * (1 + len(carried))  # the phis, once the latch is known
        test = self.assign(f"icmp slt i64 {iv}, {upper}")
        self.line(f"br i1 {test}, label %{inside}, label %{after}")
        self.start(inside)
        carried_on = body(iv, phis)
        following = self.assign(f"add nsw i64 {iv}, {step}")
        latch = self.block
        self.line(f"br label %{head}")
        self.lines[slots] = f"  {iv} = phi i64 [ {lower}, %{before} ], [ {following}, %{latch} ]"
        for k, ((typ, initial), phi, value) in enumerate(
            zip(carried, phis, carried_on, strict=True)
        ):
            incoming = f"[ {initial}, %{before} ], [ {value}, %{latch} ]"
            self.lines[slots + 1 + k] = f"  {phi} = phi {typ} {incoming}"
        self.start(after)
        return phis


__all__ = ["IDENTIFIER", "INTEGER", "FunctionText"]
