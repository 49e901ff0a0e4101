"""
Errors located in the user's code: a `TessError` raised while tracing becomes a
`TraceError` that names the line of the user's program that built the op and the
expression's text ("cannot broadcast (3,4,1) with (3,5) in `x + y` at mlp.py:12").

`located` wraps every traced operation. The user's line is the innermost frame whose file is
outside tessc; the expression is cut from that line by the code object's column table
(`co_positions`), so it is exactly what the user wrote, even when it spans lines.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from tessc.dialects.builder_types import TessError

_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, os.path.dirname(os.path.abspath(__file__)))
)


@dataclass(frozen=True)
class UserLocation:
    """Where in the user's code an op was built: the file, line and expression text."""

    filename: str
    lineno: int
    source: str | None = None

    def __str__(self) -> str:
        path = os.path.abspath(self.filename)
        shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else self.filename
        return f"{shown}:{self.lineno}"


class TraceError(TessError):
    """A `TessError` located in the user's code (`location`), raised while tracing."""

    def __init__(self, message: str, location: UserLocation | None):
        self.message = message
        self.location = location
        text = message
        if location is not None:
            if location.source:
                text += f" in `{location.source}`"
            text += f" at {location}"
        super().__init__(text)


def user_location() -> UserLocation | None:
    """The innermost frame outside tessc: the user's code that called into the tracer."""
    frame: FrameType | None = inspect.currentframe()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _INTERNAL_DIRS
    ):
        frame = frame.f_back
    if frame is None:
        return None
    return UserLocation(frame.f_code.co_filename, frame.f_lineno, _expression_source(frame))


def _expression_source(frame: FrameType) -> str | None:
    """The text of the expression `frame` is executing (from the code's column table)."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    start_line, end_line, start_col, end_col = positions[index]
    if None in (start_line, end_line, start_col, end_col):
        return None
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if not lines or end_line > len(lines):
        return None
    # Columns count UTF-8 bytes.
    chunk = [line.rstrip("\n").encode() for line in lines[start_line - 1 : end_line]]
    chunk[-1] = chunk[-1][:end_col]
    chunk[0] = chunk[0][start_col:]
    text = " ".join(part.decode(errors="replace").strip() for part in chunk)
    return re.sub(r"\s+", " ", text) or None


def located(method: Callable) -> Callable:
    """Re-raise a `TessError` from `method` as a `TraceError` at the user's line."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TraceError:
            raise
        except TessError as error:
            raise TraceError(str(error), user_location()) from None

    return wrapper
