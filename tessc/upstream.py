"""
IR as upstream MLIR reads it: `tessc-opt --emit-upstream` (the `upstream` target).

tessc's IR uses upstream dialects (`func`, `linalg`, `memref`, `scf`, `arith`, `math`,
`gpu`) plus three of its own (`tess`, `kernel`, `micro`) that upstream MLIR does not know.
This printer writes tessc's own ops in MLIR's generic form (`"tess.add"(%a, %b) : (...) ->
...`), which `mlir-opt --allow-unregistered-dialect` parses as unregistered ops, and every
other op as xDSL prints it, which is MLIR's own spelling. So every stage's output, from the
`tess` level down to the `gpu` level, parses and verifies with upstream `mlir-opt`:
`tests/test_upstream_mlir.py` checks that on the whole lit corpus and on jitted programs,
and runs MLIR's own lowering of the programs free of tessc's ops through `mlir-runner` as a
second oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer
from xdsl.utils.target import Target

TESSC_DIALECTS = frozenset({"tess", "kernel", "micro"})
"""tessc's own dialects: unknown to upstream MLIR, printed in the generic form."""


def is_tessc_op(op: Operation) -> bool:
    """Whether `op` belongs to one of tessc's own dialects."""
    return op.name.split(".", 1)[0] in TESSC_DIALECTS


class UpstreamPrinter(Printer):
    """xDSL's printer, with tessc's own ops (not their nested ops) in the generic form."""

    def print_op(self, op: Operation) -> None:
        generic = self.print_generic_format
        self.print_generic_format = is_tessc_op(op)
        try:
            super().print_op(op)
        finally:
            self.print_generic_format = generic


def print_upstream(module: Operation, stream: IO[str]) -> None:
    """Print `module` as upstream `mlir-opt --allow-unregistered-dialect` reads it."""
    UpstreamPrinter(stream=stream).print_op(module)
    stream.write("\n")


@dataclass(frozen=True)
class UpstreamTarget(Target):
    """`-t upstream` (`--emit-upstream`): the module as upstream MLIR reads it."""

    name = "upstream"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        print_upstream(module, output)


__all__ = ["TESSC_DIALECTS", "UpstreamPrinter", "UpstreamTarget", "is_tessc_op", "print_upstream"]
