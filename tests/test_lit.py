"""Run the lit/FileCheck suite (tests/filecheck) as one pytest test, so `pytest` runs all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LIT_SUITE = Path(__file__).parent / "filecheck"
RUN_LIT = "import sys; from lit.main import main; sys.exit(main())"


def test_filecheck_suite() -> None:
    # lit runs with this interpreter, so lit.cfg finds the tools next to it (the venv's bin/).
    result = subprocess.run(
        [sys.executable, "-c", RUN_LIT, "-v", str(LIT_SUITE)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"lit failed (exit status {result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


def test_tool_server_runs_commands_as_the_tool_would(tmp_path: Path) -> None:
    # lit.cfg sends RUN lines' tessc-opt through this server: exit status, stdin, stdout,
    # stderr and the working directory must be the tool's own.
    server_script = LIT_SUITE / "tool_server.py"
    socket_path = str(tmp_path / "socket")
    server = subprocess.Popen(
        [sys.executable, str(server_script), "serve", socket_path], stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        # No tessc-opt on PATH: a client that ran the tool itself instead would fail.
        env = {**os.environ, "TESSC_TOOL_SERVER": socket_path, "PATH": str(tmp_path)}
        client = [sys.executable, "-S", str(server_script), "client", "tessc-opt"]
        (tmp_path / "bad.mlir").write_text('%x = "tess.relu"() : () -> tensor<2xf32>\n')
        ok = subprocess.run(
            [*client, "-"], input="builtin.module {}\n", capture_output=True, text=True,
            env=env, cwd=tmp_path,
        )  # fmt: skip
        bad = subprocess.run(
            [*client, "bad.mlir"], capture_output=True, text=True, env=env, cwd=tmp_path
        )
    finally:
        server.terminate()
        server.wait()
    assert (ok.returncode, ok.stdout.strip(), ok.stderr) == (0, "builtin.module {\n}", "")
    assert bad.returncode == 1 and bad.stderr.startswith("bad.mlir:1:"), bad.stderr
    assert "Traceback" not in bad.stderr


def test_tool_server_gives_commands_streams_of_their_own(tmp_path: Path) -> None:
    # The server's stderr a regular file (lit's, as in `lit ... 2>log`), the command's a
    # pipe: filecheck reconfigures its streams, which failed with "Illegal seek" while the
    # command inherited the server's text streams, made for a seekable file.
    server_script = LIT_SUITE / "tool_server.py"
    socket_path = str(tmp_path / "socket")
    with open(tmp_path / "server-stderr", "w") as server_stderr:
        server = subprocess.Popen(
            [sys.executable, str(server_script), "serve", socket_path],
            stdout=subprocess.PIPE,
            stderr=server_stderr,
        )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        (tmp_path / "check.txt").write_text("// CHECK: hello\n")
        env = {**os.environ, "TESSC_TOOL_SERVER": socket_path, "PATH": str(tmp_path)}
        checked = subprocess.run(
            [sys.executable, "-S", str(server_script), "client", "filecheck", "check.txt"],
            input="hello world\n", capture_output=True, text=True, env=env, cwd=tmp_path,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait()
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
