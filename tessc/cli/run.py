"""
`tessc-run`: compile a `tess` program and run one of its functions, like `xdsl-run`.

    tessc-run prog.mlir --entry f                      # random inputs (seed 0), cpu pipeline
    tessc-run prog.mlir --entry f --seed 3 --pipeline reference
    tessc-run prog.tess --entry f --inputs x.npy w.npy
    tessc-run prog.mlir --out result.npz               # outputs as arrays, not text

Inputs are the `.npy` files given to `--inputs` (one per argument, in order) or, without
them, arrays of the declared shapes and dtypes drawn uniformly from [-2, 2) with
`--seed`. Each output is printed as

    output 0 (3,4) float32
    [[...]]

with `np.array2string` under fixed print options (`--precision` digits), so the text is
stable and FileCheck can match it; `--out result.npz` writes them as arrays `output_0`,
`output_1`, ... instead. A closed pipe (`tessc-run ... | head`) ends the run quietly. Every
error — bad file, failing verifier or pass, wrong input shapes — is one diagnostic
(`file:line:col: error: ...` when the error has an op with a location, else `file: error:
...`) on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError

from tessc.context import make_context
from tessc.diagnostics import (
    InternalCompilerError,
    LocatingParser,
    SourceChunk,
    SourceFileError,
    decode_source,
    decode_utf8,
    describe_op_error,
    describe_parse_error,
    error_message,
    failing_op,
    read_source_file,
    recording_failing_ops,
    verify_located,
)
from tessc.dialects.functions import lookup_function, module_functions
from tessc.pipelines import PIPELINES


class RunError(Exception):
    """An error to report as `file: error: message`."""


def parse_file(path: Path, text: str) -> ModuleOp:
    if path.suffix == ".tess":
        from tessc.frontend.tess_lang import parse_tess

        try:
            return parse_tess(text, str(path))
        except (ParseError, DiagnosticException):
            raise
        except Exception as error:  # lark's errors: report, never a traceback
            raise RunError(str(error).strip().split("\n")[0] or type(error).__name__) from None
    return LocatingParser(make_context(), text, str(path)).parse_module()


def entry_function(module: ModuleOp, entry: str | None) -> func.FuncOp:
    functions = module_functions(module)
    names = ", ".join(f"@{f.sym_name.data}" for f in functions) or "none"
    if entry is None:
        if len(functions) != 1:
            raise RunError(f"choose the function to run with --entry (the module defines {names})")
        return functions[0]
    found = lookup_function(module, entry)
    if found is not None:
        return found
    raise RunError(f"no function '@{entry}' to run (the module defines {names})")


def make_inputs(function: func.FuncOp, files: Sequence[str] | None, seed: int) -> list[np.ndarray]:
    from tessc.reference import shape_and_dtype

    specs = [shape_and_dtype(t) for t in function.function_type.inputs.data]
    if files is None:
        rng = np.random.default_rng(seed)
        return [rng.uniform(-2.0, 2.0, size=shape).astype(dtype) for shape, dtype in specs]
    if len(files) != len(specs):
        raise RunError(
            f"@{function.sym_name.data} takes {len(specs)} inputs, {len(files)} files given"
        )
    arrays: list[np.ndarray] = []
    for name in files:
        try:
            arrays.append(np.load(name, allow_pickle=False))
        except (OSError, ValueError) as error:
            raise RunError(f"cannot read input '{name}': {error}") from None
    return arrays


def format_output(index: int, array: np.ndarray, precision: int) -> str:
    shape = "(" + ",".join(str(d) for d in array.shape) + ")"
    body = np.array2string(
        array,
        precision=precision,
        suppress_small=True,
        separator=", ",
        threshold=10_000,
        max_line_width=100,
        floatmode="fixed",
    )
    return f"output {index} {shape} {array.dtype.name}\n{body}"


def run(args: argparse.Namespace) -> int:
    from tessc.compiler import compile_module

    path = Path(args.file)
    content = read_source(path)
    source = SourceChunk(str(path), decode_source(content))
    try:
        with recording_failing_ops():
            module = parse_file(path, decode_utf8(content, str(path)))
            verify_located(module)
            function = entry_function(module, args.entry)
            inputs = make_inputs(function, args.inputs, args.seed)
            program = compile_module(module, function.sym_name.data, args.pipeline)
            outputs = program(*inputs)
    except ParseError as error:
        print(describe_parse_error(error), file=sys.stderr)
        return 1
    except DiagnosticException as error:
        print(describe_op_error(error_message(error), failing_op(error), source), file=sys.stderr)
        return 1
    except (RunError, ValueError, InternalCompilerError) as error:
        print(f"{path}: error: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        # Not in a pass (those are InternalCompilerError, with a reproducer): the input
        # file itself reproduces it.
        message = " ".join(str(error).split())[:500]
        print(
            f"{path}: error: internal compiler error: {type(error).__name__}: {message}; "
            f"this is a bug in tessc (rerun: tessc-run {path})",
            file=sys.stderr,
        )
        return 1
    if args.out is not None:
        write_outputs(Path(args.out), outputs)
        return 0
    for index, array in enumerate(outputs):
        print(format_output(index, array, args.precision))
    return 0


def write_outputs(path: Path, outputs: Sequence[np.ndarray]) -> None:
    """The outputs as arrays `output_0`, `output_1`, ... of one `.npz` file."""
    if path.suffix != ".npz":
        raise RunError(f"--out {path}: expected a .npz file name")
    try:
        np.savez(path, **{f"output_{k}": np.asarray(a) for k, a in enumerate(outputs)})
    except OSError as error:
        raise RunError(f"cannot write {path}: {error.strerror or error}") from None


def read_source(path: Path) -> bytes:
    try:
        return read_source_file(path)
    except SourceFileError as error:
        raise RunError(str(error)) from None


def _bounded_int(low: int, high: int | None, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tessc-run", description="Compile a tess program and run one of its functions."
    )
    parser.add_argument("file", help="a .mlir (tess level) or .tess file")
    parser.add_argument("--entry", help="the function to run (default: the only one)")
    parser.add_argument("--pipeline", default="cpu", choices=sorted(PIPELINES), help="default: cpu")
    inputs = parser.add_mutually_exclusive_group()
    inputs.add_argument("--inputs", nargs="+", metavar="NPY", help="one .npy file per input")
    inputs.add_argument(
        "--seed",
        type=_bounded_int(0, 2**63 - 1, "a non-negative integer"),
        default=0,
        help="seed of the random inputs in [-2, 2) (default 0)",
    )
    parser.add_argument(
        "--out",
        metavar="NPZ",
        help="write the outputs as arrays output_0, output_1, ... of this .npz file "
        "instead of printing them",
    )
    parser.add_argument(
        "--precision",
        type=_bounded_int(0, 20, "a number of digits from 0 to 20"),
        default=4,
        help="digits printed after the point (default 4)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `tessc-run` console script; returns (and exits with) the status."""
    args = argument_parser().parse_args(argv)
    try:
        try:
            status = run(args)
        except RunError as error:
            print(f"{args.file}: error: {error}", file=sys.stderr)
            status = 1
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`tessc-run ... | head`): stop quietly, as `cat` does; point
        # stdout at /dev/null so that the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by the pipe
    if argv is None:
        sys.exit(status)
    return status


if __name__ == "__main__":
    main()
