"""A fork server for `tessc-opt`, `tessc-run` and `filecheck` in lit's RUN lines: import
once, fork per command.

Most of a `tessc-opt` run on a lit test is its start: importing xDSL and tessc's dialects
costs ~0.27 s of CPU, the compile itself a few ms. Over the suite's ~170 invocations that
is most of the lit run. `lit.cfg` starts `serve` once (the import done), and RUN lines call
`client`, a stdlib-only script started with `python -S`. The client passes its own stdin,
stdout and stderr (SCM_RIGHTS), argv, working directory and environment over a unix
socket; the server forks a runner, the runner forks the command from the pristine imported
state and reports its exit status (or `128 + signal`), which the client exits with. So a
command sees what `tessc-opt` started afresh would see, and nothing leaks between them.

Without `TESSC_TOOL_SERVER` in the environment, or when the server cannot be reached, the
client execs the real tool: the suite does not depend on the server to be right.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import socket
import struct
import sys

SOCKET_VARIABLE = "TESSC_TOOL_SERVER"
TOOLS = {
    "tessc-opt": ("tessc.cli.opt", "main"),
    "tessc-run": ("tessc.cli.run", "main"),
    # The Python `filecheck` package (~0.09 s of CPU a start, ~170 RUN lines); lit.cfg sends
    # it here only where that package, not LLVM's FileCheck, is the one on PATH.
    "filecheck": ("filecheck.main", "main"),
}
# Imported lazily by `tessc-run` when it compiles: imported here once instead of per run
# (no thread is started by importing them, so the forked commands may use threads).
PRELOAD = ("tessc.compiler", "tessc.runtime", "numba")
MAX_REQUEST = 1 << 20


def client(tool: str, args: list[str]) -> int:
    """Run `tool args` in the server, or exec it here when there is none."""
    path = os.environ.get(SOCKET_VARIABLE)
    if path and tool in TOOLS:
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
        except OSError:
            connection = None
        if connection is not None:
            request = json.dumps(
                {"tool": tool, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
            ).encode()
            socket.send_fds(connection, [struct.pack("!I", len(request)) + request], [0, 1, 2])
            reply = b""
            while chunk := connection.recv(64):
                reply += chunk
            if reply:
                return int(reply)
    os.execvp(tool, [tool, *args])  # no server: the tool itself


def _receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST, 3)
    (size,) = struct.unpack("!I", data[:4])
    body = data[4:]
    while len(body) < size:
        body += connection.recv(size - len(body))
    return json.loads(body), fds


def _fresh_standard_streams() -> None:
    """`sys.stdin`, `stdout` and `stderr` made anew over descriptors 0-2, as Python makes
    them at start-up: the server's own were made for its descriptors, and a text stream
    that began on a regular file believes it can seek (filecheck's `reconfigure` then
    failed with "Illegal seek" on the client's pipe whenever lit's stderr was a file)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        stream = open(  # noqa: SIM115  (closefd=False: the descriptor stays the command's)
            fd,
            "r" if fd == 0 else "w",
            encoding=old.encoding,
            errors=old.errors,
            buffering=1 if fd == 2 or (fd == 1 and os.isatty(1)) else -1,  # 1: by line
            closefd=False,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run(request: dict, fds: list[int]) -> None:
    """In the forked command: become `tool args` in the client's place, then exit."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    status: object = 0
    try:  # a failure here too is the command's (status 1 and a traceback), never status 0
        _fresh_standard_streams()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        module_name, function = TOOLS[request["tool"]]
        sys.argv = [request["tool"], *request["args"]]
        status = getattr(importlib.import_module(module_name), function)()
    except SystemExit as exit:
        status = exit.code
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    if isinstance(status, str):
        print(status, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(int(status or 0) & 0xFF)


def _serve_one(connection: socket.socket) -> None:
    """In the runner: fork the command, wait for it, send its status."""
    request, fds = _receive(connection)
    pid = os.fork()
    if pid == 0:
        connection.close()
        _run(request, fds)
    for fd in fds:
        os.close(fd)
    _, wait_status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(wait_status)
    connection.sendall(str(code if code >= 0 else 128 - code).encode())
    connection.close()


def serve(path: str) -> None:
    """Import the tools, listen at `path`, say `ready` on stdout, serve until killed."""
    for module_name in (*(name for name, _ in TOOLS.values()), *PRELOAD):
        if importlib.util.find_spec(module_name.partition(".")[0]) is not None:
            importlib.import_module(module_name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runners are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(2.0)
    parent = os.getppid()
    print("ready", flush=True)
    while os.getppid() == parent:  # lit gone without stopping us: stop too
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        connection.settimeout(None)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the runner waits for its command
            try:
                _serve_one(connection)
            finally:
                os._exit(0)
        connection.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["client"]:
        sys.exit(client(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(f"usage: {sys.argv[0]} serve SOCKET | client TOOL ARGS...")
