"""
Where compile time goes: a wall-clock report per phase and per pass, like `mlir-opt
-mlir-timing`.

`tessc-opt --timing` and `TESSC_TIMING=1` (for `jit`: every call that traces or compiles)
print to stderr

    ===-------------------------------------------------------------------------===
                             ... Execution time report ...
    ===-------------------------------------------------------------------------===
      Total Execution Time: 0.4210 seconds

      ---CPU Time---  ----Wall Time----  ----Name----
         0.0490       0.0493 ( 11.7%)  trace
         0.2380       0.2387 ( 56.7%)  passes
         0.0139       0.0140 (  3.3%)    tess-to-linalg
        ...

The CPU column is the process's CPU time (all its threads): on a machine other work keeps
busy, wall time inflates and CPU time does not. Phases nest (`with phase("passes"): ...
with phase(name): ...`); a phase entered again under the same parent adds to its time, as
MLIR merges repeated passes. The report also
lists every function Numba compiles while it is active ("numba compile <function>",
nested as Numba compiles callees inside their callers: Numba's `numba:compile` event), so
the time Numba spends in each generated function is visible, and each kernel the compile
worker process compiled, with the worker's time ("... (compile worker)": time spent in
parallel with this process's, so the children of a phase may add up to more than it);
loading a function from Numba's disk cache fires no event and counts in the phase around
it (the first call).

When no report is active, `phase` costs one global read: it stays in the compiler's code.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import IO, Any

ENVIRONMENT_VARIABLE = "TESSC_TIMING"


@dataclass
class _Phase:
    name: str
    seconds: float = 0.0
    cpu: float = 0.0  # process CPU time (all threads): what the phase cost on a busy machine
    children: dict[str, _Phase] = field(default_factory=dict)

    def child(self, name: str) -> _Phase:
        if name not in self.children:
            self.children[name] = _Phase(name)
        return self.children[name]


class TimingReport:
    """Wall time of nested, named phases."""

    def __init__(self, title: str = "Execution time report") -> None:
        self.title = title
        self.root = _Phase("Total")
        self._stack = [self.root]
        self._starts: list[tuple[float, float]] = []
        self._start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        node = self._stack[-1].child(name)
        self._stack.append(node)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            node.seconds += time.perf_counter() - start
            node.cpu += time.process_time() - cpu
            self._stack.pop()

    def start(self, name: str) -> None:
        """Enter phase `name` (for callbacks that cannot use `with`); `stop` leaves it."""
        self._stack.append(self._stack[-1].child(name))
        self._starts.append((time.perf_counter(), time.process_time()))

    def stop(self) -> None:
        node = self._stack.pop()
        start, cpu = self._starts.pop()
        node.seconds += time.perf_counter() - start
        node.cpu += time.process_time() - cpu

    def add(self, name: str, seconds: float, cpu: float = 0.0) -> None:
        """Account `seconds` (and `cpu`), measured elsewhere, to phase `name` of the current
        phase."""
        node = self._stack[-1].child(name)
        node.seconds += seconds
        node.cpu += cpu

    def total(self) -> float:
        return self.root.seconds or time.perf_counter() - self._start

    def format(self) -> str:
        total = self.total()
        rule = "===" + "-" * 73 + "==="
        lines = [
            rule,
            f"{'... ' + self.title + ' ...':^79}".rstrip(),
            rule,
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ---CPU Time---  ----Wall Time----  ----Name----",
        ]

        def walk(node: _Phase, depth: int) -> None:
            for child in node.children.values():
                share = 100.0 * child.seconds / total if total else 0.0
                lines.append(
                    f"  {child.cpu:9.4f}     {child.seconds:8.4f} ({share:5.1f}%)  "
                    f"{'  ' * depth}{child.name}"
                )
                walk(child, depth + 1)

        walk(self.root, 0)
        cpu = sum(c.cpu for c in self.root.children.values())
        lines.append(f"  {cpu:9.4f}     {total:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"


_active: TimingReport | None = None


def active() -> TimingReport | None:
    return _active


def phase(name: str) -> AbstractContextManager[Any]:
    """Time the enclosed code as phase `name` of the active report (if any)."""
    report = _active
    return nullcontext() if report is None else report.phase(name)


def enabled_by_environment() -> bool:
    return os.environ.get(ENVIRONMENT_VARIABLE, "") not in ("", "0")


@contextmanager
def reporting(
    title: str, stream: IO[str] | None = None, *, numba_events: bool = False
) -> Iterator[TimingReport]:
    """Make a new report active for the enclosed code, then print it to `stream` (stderr);
    with `numba_events`, Numba's compilations are phases too (this imports Numba). Nested
    inside an active report, it is a phase of that one instead."""
    global _active
    if _active is not None:
        with _active.phase(title):
            yield _active
        return
    report = TimingReport(title)
    _active = report
    try:
        with ExitStack() as stack:
            stack.enter_context(report.phase(title))
            if numba_events:
                stack.enter_context(_numba_compile_events(report))
            yield report
    finally:
        _active = None
        report.root.seconds = sum(c.seconds for c in report.root.children.values())
        print(report.format(), end="", file=stream or sys.stderr)


def report_if_enabled(title: str) -> AbstractContextManager[Any]:
    """`reporting(title)` when `TESSC_TIMING` is set (and no report is active yet)."""
    if _active is None and enabled_by_environment():
        return reporting(title, numba_events=True)
    return nullcontext()


@contextmanager
def _numba_compile_events(report: TimingReport) -> Iterator[None]:
    """Every Numba compilation as a phase `numba compile <function>`, and every kernel the
    compile worker compiled (`tessc.runtime.external`) as `numba compile <kernel> (compile
    worker)` with the worker's wall and CPU time, under the phase that waited for it; and
    every module of LLVM kernels (`tessc.runtime.llvm_kernels`) as `llvm compile <what>`."""
    from numba.core import event

    from tessc.runtime.external import WORKER_COMPILE_EVENT
    from tessc.runtime.llvm_kernels import LLVM_COMPILE_EVENT

    class Listener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            function = getattr(ev.data["dispatcher"], "py_func", None)
            report.start(f"numba compile {getattr(function, '__name__', '?')}")

        def on_end(self, ev: event.Event) -> None:
            report.stop()

    class WorkerListener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            pass

        def on_end(self, ev: event.Event) -> None:
            name, seconds, cpu = (ev.data[key] for key in ("name", "seconds", "cpu"))
            report.add(f"numba compile {name} (compile worker)", seconds, cpu)

    class LlvmListener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            report.start(f"llvm compile {ev.data['name']}")

        def on_end(self, ev: event.Event) -> None:
            report.stop()

    with (
        event.install_listener(LLVM_COMPILE_EVENT, LlvmListener()),
        event.install_listener("numba:compile", Listener()),
        event.install_listener(WORKER_COMPILE_EVENT, WorkerListener()),
    ):
        yield


__all__ = [
    "ENVIRONMENT_VARIABLE",
    "TimingReport",
    "active",
    "enabled_by_environment",
    "phase",
    "report_if_enabled",
    "reporting",
]
