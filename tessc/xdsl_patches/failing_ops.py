"""
The one scoped patch: while `recording_failing_ops()` is active, an exception raised by
`op.emit_error` keeps the failing op, so the drivers (`tessc-opt`, `tessc-run`, through
`tessc.diagnostics`) can print its source location as MLIR does. xDSL 0.74 puts the op into
the exception's text only. Outside the `with` block stock xDSL runs; under an xDSL the patch
was not written for, the block runs stock xDSL too (`tessc.xdsl_patches.apply` warned).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from xdsl.ir import IRNode, Operation
from xdsl.utils.diagnostic import Diagnostic

from tessc.xdsl_patches import registry
from tessc.xdsl_patches.registry import Patch

_FAILING_OP = "_tessc_failing_op"
_FAILING_MESSAGE = "_tessc_failing_message"
_original_raise_exception = Diagnostic.raise_exception


def raise_exception_recording_the_op(
    self: Diagnostic, ir: IRNode, underlying_error: Exception
) -> NoReturn:
    """`Diagnostic.raise_exception` (which every failing verifier reaches through
    `Operation.emit_error`), attaching the first op with a message, and that message, to
    the exception (an op already attached by a nested call is kept)."""
    if self.op_messages and not hasattr(underlying_error, _FAILING_OP):
        op, messages = next(iter(self.op_messages.items()))
        setattr(underlying_error, _FAILING_OP, op)
        setattr(underlying_error, _FAILING_MESSAGE, messages[0] if messages else "")
    _original_raise_exception(self, ir, underlying_error)


FAILING_OP_ON_EXCEPTIONS = Patch(
    Diagnostic,
    "raise_exception",
    raise_exception_recording_the_op,
    "fix",
    upstream=(
        "diagnostic: keep the failing op on the exception. Diagnostic.raise_exception "
        "renders the op and its messages into the exception's text only, so a driver "
        "cannot locate the error in its source (MLIR prints `file:line:col: error:`). "
        "Raise a DiagnosticException subclass carrying `op` and `message` attributes (the "
        "first op with a message), text unchanged."
    ),
)

SCOPED_PATCHES = (FAILING_OP_ON_EXCEPTIONS,)


@contextmanager
def recording_failing_ops() -> Iterator[None]:
    """While active, an exception raised by `op.emit_error` remembers `op`
    (`recorded_failing_op`) and the message given to `emit_error` (`recorded_message`)."""
    if not FAILING_OP_ON_EXCEPTIONS.written_for(registry.installed_xdsl_version()):
        yield
        return
    with FAILING_OP_ON_EXCEPTIONS.applied():
        yield


def recorded_failing_op(error: BaseException) -> Operation | None:
    """The op `recording_failing_ops` attached to `error`, if any."""
    return getattr(error, _FAILING_OP, None)


def recorded_message(error: BaseException) -> str:
    """The message given to `emit_error` that `recording_failing_ops` attached, or ""."""
    return getattr(error, _FAILING_MESSAGE, "")


__all__ = [
    "FAILING_OP_ON_EXCEPTIONS",
    "SCOPED_PATCHES",
    "raise_exception_recording_the_op",
    "recorded_failing_op",
    "recorded_message",
    "recording_failing_ops",
]
