"""
A compile worker forked from this process (`tessc.runtime.external`'s), with the part of
`subprocess.Popen` that the worker's owner uses.

Forked only on Linux from a process running one thread (a lock another thread held would
stay locked in the child): it then starts with everything this process imported, Numba
included (~0.7 s of a new interpreter's start-up saved). The child keeps no file descriptor
but its pipes, runs `child_main(requests, answers)` on them, writes nothing to this
process's output, and leaves with `os._exit` (no `atexit` handler, no buffered output of
this process written twice).
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO


class ForkedWorker:
    """A forked worker process (module docstring)."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str]):
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None

    @staticmethod
    def start(child_main: Callable[[IO[str], IO[str]], None]) -> ForkedWorker | None:
        """The worker running `child_main` on its pipes, or None where none can fork."""
        if not sys.platform.startswith("linux") or threading.active_count() != 1:
            return None
        requests_in, requests_out = os.pipe()
        answers_in, answers_out = os.pipe()
        # This process's objects frozen for the fork: the worker's garbage collections
        # then leave their memory shared (copy-on-write) rather than touching all of it.
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            for fd in (requests_in, requests_out, answers_in, answers_out):
                os.close(fd)
            return None
        if pid == 0:  # the worker
            status = 1
            try:
                # Only its own pipes open: a pipe of this process's other children held by
                # the worker would never reach end-of-file.
                low, high = sorted((requests_in, answers_out))
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # Numba's warnings: nowhere
                with open(requests_in) as requests, open(answers_out, "w") as answers:
                    child_main(requests, answers)
                status = 0
            finally:
                os._exit(status)
        gc.unfreeze()
        os.close(requests_in)
        os.close(answers_out)
        return ForkedWorker(pid, open(requests_out, "w"), open(answers_in))

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


__all__ = ["ForkedWorker"]
