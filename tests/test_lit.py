"""Run the lit/FileCheck suite (tests/filecheck) as one pytest test, so `pytest` runs all."""

from __future__ import annotations

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
