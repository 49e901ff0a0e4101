"""
Snapshot what `tessc-opt` prints for every lit input and example, to compare a compiler
change against its parent byte for byte (a performance change must not change output).

For each `.mlir`/`.tess` file under tests/filecheck and examples, it runs every `tessc-opt`
RUN line of the file (without its FileCheck), the fused IR (`tess-to-linalg,tess-fuse`
with its report) and the `cpu` pipeline to Numba source; also on the 1,000-op program of
`bench_compile.py` and on 250/1,000-op pure elementwise chains. Each output (stdout,
stderr, status) goes to one file in OUT; compare two snapshots with `diff -r`.

    python bench/snapshot_outputs.py OUT
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import tempfile
from pathlib import Path

from bench_compile import thousand_op_program

from tessc.cli.opt import main as tessc_opt
from tessc.fuzz.programs import chain_program
from tessc.pipelines import get_pipeline

ROOT = Path(__file__).resolve().parent.parent


def elementwise_chain(n: int) -> str:
    """`n` elementwise ops in one dependence chain (all fuse into one generic)."""
    return chain_program(n, 64)


def run_lines(path: Path) -> list[list[str]]:
    """The arguments of each `tessc-opt` RUN line of a lit file, up to its first pipe."""
    commands = []
    for line in path.read_text().splitlines():
        _, marker, run = line.partition("RUN:")
        if not marker:
            continue
        words = shlex.split(run.split("|")[0].replace("2>&1", ""))
        if words and words[0] == "not":
            words = words[1:]
        if words and words[0] == "tessc-opt":
            words = [w for w in words[1:] if not w.startswith(">")]  # redirections
            commands.append([str(path) if w == "%s" else w for w in words])
    return commands


def capture(args: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = tessc_opt(args)
        except (Exception, SystemExit) as error:  # a crash is an output too
            status = f"exception {type(error).__name__}: {error}"
    return f"status {status}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("out", type=Path, help="the directory to write the snapshot to")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    cpu = get_pipeline("cpu").passes_to("loops")
    generated = Path(tempfile.mkdtemp())
    for name, text in (
        ("program1000.mlir", thousand_op_program()),
        ("chain250.mlir", elementwise_chain(250)),
        ("chain1000.mlir", elementwise_chain(1000)),
    ):
        (generated / name).write_text(text)
    files = sorted(ROOT.glob("tests/filecheck/**/*.mlir")) + sorted(ROOT.glob("examples/*.tess"))
    files += sorted(generated.iterdir())
    for path in files:
        stem = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name)
        stem = stem.replace("/", "__")
        commands = run_lines(path) + [
            [str(path), "-p", "tess-to-linalg,tess-fuse{report=true}"],
            [str(path), "-p", cpu, "-t", "numba"],
        ]
        for k, args in enumerate(commands):
            text = capture(args).replace(str(path), "<input>")
            text = re.sub(r"tessc-reproducer-\w+", "tessc-reproducer", text)
            (out / f"{stem}.{k}.txt").write_text(" ".join(args[1:]) + "\n" + text)
    print(f"{len(files)} inputs -> {out}")


if __name__ == "__main__":
    main()
