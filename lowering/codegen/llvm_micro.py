"""
Codegen of `micro.mma` as LLVM IR, for the kernels `to_llvm.py` writes: one function per
tile, layout and element type, the loop `numba_micro.py` writes through Numba (why explicit
vectors: that module's docstring). Conventions: lowering/codegen/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from tessc.lowering.codegen import llvm_ops
from tessc.lowering.codegen.llvm_text import FunctionText


def mma_function(
    rows: int, cols: int, lanes: int, layout: Sequence[int], element: str
) -> tuple[str, list[str]]:
    """The name, and declarations and definition, of `micro.mma`'s micro-kernel for one tile, as
    `numba_micro` writes it through Numba: `rows x cols / lanes` vector accumulators as
    phis over `kc` steps, one `llvm.fmuladd` each per step, the tile of `c` (rows `row`
    elements apart) prefetched while the loop runs and added to (or stored) once after."""
    sr, sk, skb = (str(v) for v in layout)
    name = f"tessc.mma.{rows}x{cols}x{lanes}.{'_'.join(map(str, layout))}.{element}"
    text = FunctionText()
    size = llvm_ops.SIZES[element]
    vector = f"<{lanes} x {element}>"
    fmuladd = f"llvm.fmuladd.v{lanes}{llvm_ops.TYPE_SUFFIX[element]}"
    tile: list[str] = []
    for r in range(rows):
        row = text.element_address(element, "%c", text.mul(str(r), "%row"))
        for line in range(0, cols * size, 64):
            address = text.element_address("i8", row, str(line))
            text.line(f"call void @llvm.prefetch.p0(ptr {address}, i32 1, i32 3, i32 1)")
        for v in range(cols // lanes):
            tile.append(text.element_address(element, row, str(v * lanes)))

    def body(k: str, accumulators: list[str]) -> list[str]:
        b_row = text.mul(k, skb)
        b_vectors = []
        for v in range(cols // lanes):
            address = text.element_address(element, "%b", text.add(b_row, str(v * lanes)))
            b_vectors.append(text.assign(f"load {vector}, ptr {address}, align {size}"))
        a_row = text.mul(k, sk)
        updated = []
        for r in range(rows):
            address = text.element_address(element, "%a", text.add(a_row, text.mul(str(r), sr)))
            scalar = text.assign(f"load {element}, ptr {address}, align {size}")
            single = text.assign(f"insertelement {vector} poison, {element} {scalar}, i32 0")
            splat = text.assign(
                f"shufflevector {vector} {single}, {vector} poison, <{lanes} x i32> zeroinitializer"
            )
            for v, b_vector in enumerate(b_vectors):
                accumulator = accumulators[r * len(b_vectors) + v]
                args = f"{vector} {splat}, {vector} {b_vector}, {vector} {accumulator}"
                updated.append(text.assign(f"call {vector} @{fmuladd}({args})"))
        return updated

    finals = text.loop("0", "%kc", "1", [(vector, "zeroinitializer")] * len(tile), body)
    text.line("br i1 %accumulate, label %add, label %store")
    text.start("add")
    for final, address in zip(finals, tile, strict=True):
        old = text.assign(f"load {vector}, ptr {address}, align {size}")
        total = text.assign(f"fadd {vector} {old}, {final}")
        text.line(f"store {vector} {total}, ptr {address}, align {size}")
    text.line("ret void")
    text.start("store")
    for final, address in zip(finals, tile, strict=True):
        text.line(f"store {vector} {final}, ptr {address}, align {size}")
    text.line("ret void")
    params = "ptr %a, ptr %b, i64 %kc, ptr %c, i64 %row, i1 %accumulate"
    definition = "\n".join(
        [
            f'define internal void @"{name}"({params}) noinline nounwind {{',
            "entry:",
            *text.lines,
            "}",
        ]
    )
    declarations = [
        f"declare {vector} @{fmuladd}({vector}, {vector}, {vector})",
        "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
    ]
    return f'"{name}"', [*declarations, definition]


__all__ = ["mma_function"]
