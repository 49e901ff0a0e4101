"""
`tessc-opt`'s extensions of xdsl-opt that live outside the driver: the `numba` target
(`-t numba`) and the `.tess` frontend, its errors as located parse errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.lexer import Input, Span
from xdsl.utils.target import Target

from tessc.diagnostics import decode_utf8


@dataclass(frozen=True)
class NumbaTarget(Target):
    """`-t numba`: the module as the Python source of Numba kernels: CPU kernels from the
    loops level, CUDA kernels (`tessc.lowering.codegen.to_cuda`) from the gpu level (a module
    holding a `gpu.module`)."""

    name = "numba"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        gpu_level = any(op.name == "gpu.module" for op in module.ops)
        try:
            if gpu_level:
                from tessc.lowering.codegen.to_cuda import emit_cuda as emit
            else:
                from tessc.lowering.codegen.to_numba import emit_numba as emit
        except ImportError as error:
            raise DiagnosticException(f"the numba target is not available: {error}") from None
        output.write(emit(module))


def as_parse_error(error: Exception, text: str, filename: str) -> Exception:
    """A located `ParseError` if `error` has a `line` and `column`, else an unlocated one."""
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    message = str(error).strip().split("\n")[0] or type(error).__name__
    if not (isinstance(line, int) and isinstance(column, int) and line >= 1 and column >= 1):
        return DiagnosticException(message)
    lines = text.split("\n")
    position = min(sum(len(s) + 1 for s in lines[: line - 1]) + column - 1, len(text))
    return ParseError(Span(position, min(position + 1, len(text)), Input(text, filename)), message)


def parse_tess_source(content: bytes, filename: str) -> ModuleOp:
    """The `.tess` frontend (`tessc.frontend.tess_lang`, loaded when a `.tess` file is read):
    a source error is a located `ParseError`, a bug in the frontend keeps its traceback."""
    from tessc.frontend.tess_lang import parse_tess

    text = decode_utf8(content, filename)
    try:
        return parse_tess(text, filename)
    except (ParseError, DiagnosticException):
        raise
    except Exception as error:
        # A source error that is not an xDSL ParseError: a ValueError (the builders'
        # shape errors) or anything that says where it is (lark's `line`/`column`).
        # Anything else is a bug in the frontend and keeps its traceback.
        if isinstance(error, ValueError) or hasattr(error, "line"):
            raise as_parse_error(error, text, filename) from None
        raise


__all__ = ["NumbaTarget", "as_parse_error", "parse_tess_source"]
