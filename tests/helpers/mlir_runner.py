"""
Upstream MLIR as a second oracle: a fused-level tessc module (tensors, `linalg.generic`,
`kernel.group` inlined), lowered by upstream `mlir-opt` passes only and run by
`mlir-runner`, with an entry function that holds the inputs as constants, calls the program
and prints every output.

Outputs are printed exactly: a float result is bitcast to the integer of its width
(`printMemrefI32`/`printMemrefI64` print integers in full) and read back as floats, so the
comparison's tolerance is the reference tests' own, not the printer's six digits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, ModuleOp, TensorType
from xdsl.rewriter import InsertPoint, Rewriter

from tessc.dialects.kernel import GroupOp

LLVM_BIN = Path("/usr/lib/llvm-22/bin")
LLVM_LIB = Path("/usr/lib/llvm-22/lib")
INSTALL_HINT = "apt-get install mlir-22-tools"

UPSTREAM_LOWERING = (
    "builtin.module(convert-elementwise-to-linalg,"
    "one-shot-bufferize{bufferize-function-boundaries},"
    "convert-linalg-to-loops,expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,reconcile-unrealized-casts)"
)
"""MLIR's own lowering of a fused-level module to the LLVM dialect."""


def find_tool(name: str) -> str | None:
    """The path of upstream MLIR tool `name` (`mlir-opt`, `mlir-runner`): on PATH or in
    LLVM 22's folder, where Debian's `mlir-22-tools` puts it."""
    found = shutil.which(name)
    if found is not None:
        return found
    candidate = LLVM_BIN / name
    return str(candidate) if os.access(candidate, os.X_OK) else None


def runner_libraries() -> list[str]:
    """MLIR's runtime libraries `mlir-runner` loads (`printMemref*`); missing ones left out."""
    found = []
    for name in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"):
        # mlir-22-tools ships only the versioned file (`.so.22.1`); the -dev package links it.
        paths = sorted(LLVM_LIB.glob(f"{name}*"), key=lambda p: len(p.name))
        if paths:
            found.append(str(paths[0]))
    return found


def inline_kernel_groups(module: ModuleOp) -> None:
    """Replace every `kernel.group` by its body (a group only says which ops share a
    kernel; its results are what its `kernel.yield` yields)."""
    for group in [op for op in module.walk() if isinstance(op, GroupOp)]:
        block = group.body.block
        terminator = block.last_op
        assert terminator is not None
        yielded = list(terminator.operands)
        Rewriter.erase_op(terminator)
        Rewriter.inline_block(block, InsertPoint.before(group))
        Rewriter.replace_op(group, [], yielded)


def dense(array: np.ndarray, typ: TensorType) -> str:
    """`dense<...> : typ` holding `array` exactly (raw bytes in hex; booleans as lists)."""
    if array.dtype == np.bool_:
        return f"dense<{json.dumps(array.tolist())}> : {typ}"
    return f'dense<"0x{array.tobytes().hex().upper()}"> : {typ}'


PRINTERS = {32: ("i32", "printMemrefI32"), 64: ("i64", "printMemrefI64")}
"""The integer type each result is printed as, by bit width, and its MLIR runtime printer."""


def print_result(k: int, value: str, typ: TensorType) -> list[str]:
    """Lines printing result `value` of type `typ` as integers: a float bitcast to the
    integer of its width, a boolean widened to i32."""
    element = typ.element_type
    dims = "".join(f"{d}x" for d in typ.get_shape())
    convert = "arith.bitcast"
    if isinstance(element, IntegerType):
        width, convert = element.width.data, ""
        if width == 1:
            width, convert = 32, "arith.extui"
    else:
        width = element.bitwidth  # type: ignore[attr-defined]
    int_type, printer = PRINTERS[width]
    lines = []
    if convert:
        lines.append(f"  %p{k} = {convert} {value} : {typ} to tensor<{dims}{int_type}>")
        value = f"%p{k}"
    memref = f"memref<{dims}{int_type}>"
    lines += [
        f"  %m{k} = bufferization.to_buffer {value} : tensor<{dims}{int_type}> to {memref}",
        f"  %u{k} = memref.cast %m{k} : {memref} to memref<*x{int_type}>",
        f"  func.call @{printer}(%u{k}) : (memref<*x{int_type}>) -> ()",
    ]
    return lines


def entry_function(function: func.FuncOp, inputs: Sequence[np.ndarray]) -> str:
    """`@tessc_entry`: the inputs as constants, a call of `function`, each result printed
    (`print_result`), and the printers' declarations."""
    arg_types = list(function.function_type.inputs)
    result_types = list(function.function_type.outputs)
    lines = ["func.func @tessc_entry() {"]
    for k, (array, typ) in enumerate(zip(inputs, arg_types, strict=True)):
        assert isinstance(typ, TensorType)
        lines.append(f"  %in{k} = arith.constant {dense(array, typ)}")
    args = ", ".join(f"%in{k}" for k in range(len(inputs)))
    signature = f"({', '.join(map(str, arg_types))}) -> ({', '.join(map(str, result_types))})"
    count = len(result_types)
    lines.append(
        f"  %out{f':{count}' if count > 1 else ''} = "
        f"func.call @{function.sym_name.data}({args}) : {signature}"
    )
    for k, typ in enumerate(result_types):
        assert isinstance(typ, TensorType)
        lines += print_result(k, f"%out#{k}" if count > 1 else "%out", typ)
    lines += ["  func.return", "}"]
    for int_type, printer in PRINTERS.values():
        lines.append(
            f"func.func private @{printer}(memref<*x{int_type}>) "
            "attributes {llvm.emit_c_interface}"
        )
    return "\n".join(lines)


def with_entry(module_text: str, entry: str) -> str:
    """The printed module with the entry function added at the end of its body."""
    body_end = module_text.rstrip().rfind("}")
    return module_text[:body_end] + entry + "\n}\n"


MEMREF_DATA = re.compile(r"data =\s*(.*?)(?=Unranked Memref|\Z)", re.S)


def parse_printed(stdout: str, function: func.FuncOp) -> list[np.ndarray]:
    """The results `entry_function`'s prints, as arrays of the result types."""
    from tessc.reference import shape_and_dtype

    chunks = MEMREF_DATA.findall(stdout)
    types = list(function.function_type.outputs)
    if len(chunks) != len(types):
        raise AssertionError(f"{len(chunks)} printed results, expected {len(types)}:\n{stdout}")
    results = []
    for chunk, typ in zip(chunks, types, strict=True):
        shape, dtype = shape_and_dtype(typ)
        if 0 in shape:  # printMemref prints no elements (and its brackets hold no data)
            results.append(np.zeros(shape, dtype))
            continue
        ints = [int(v) for v in re.findall(r"-?\d+", chunk)]
        if dtype == np.bool_:
            results.append(np.array(ints, dtype=np.int32).astype(np.bool_).reshape(shape))
            continue
        carrier = np.int32 if dtype.itemsize == 4 else np.int64
        results.append(np.array(ints, dtype=carrier).view(dtype).reshape(shape))
    return results


def run_upstream(mlir_opt: str, mlir_runner: str, text: str) -> str:
    """Lower `text` (a module with `@tessc_entry`) with `UPSTREAM_LOWERING` and run it; the
    printed output."""
    lowered = subprocess.run(
        [mlir_opt, "--allow-unregistered-dialect", f"--pass-pipeline={UPSTREAM_LOWERING}"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    if lowered.returncode != 0:
        raise AssertionError(f"mlir-opt failed:\n{lowered.stderr}\n--- input\n{text}")
    libs = ",".join(runner_libraries())
    ran = subprocess.run(
        [mlir_runner, "-e", "tessc_entry", "-entry-point-result=void", f"-shared-libs={libs}"],
        input=lowered.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    if ran.returncode != 0:
        raise AssertionError(f"mlir-runner failed:\n{ran.stderr}\n--- input\n{text}")
    return ran.stdout
