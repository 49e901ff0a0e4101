"""
Differential checks of one random program, and the shrinker.

`check(program)` runs the program's `.mlir` through the NumPy reference interpreter and
through every compiling pipeline (`tessc.pipelines.PIPELINES`) on the same random inputs
and compares the outputs; with `grad=True` (a float64, differentiable program) it also
applies `tess-autodiff`, runs `@f_grad` compiled and interpreted, and compares both with
float64 central differences of the reference. The first disagreement or exception is a
`Failure`.

`shrink(program, failure)` removes ops greedily (each removed op's result becomes a new
argument, or an earlier value becomes the result), keeping every removal that still fails
the same way at the same pipeline:
the minimal program is what `save` writes to `tests/regressions/`, which the test suite
replays.
"""

from __future__ import annotations

import hashlib
import os
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tessc.fuzz.programs import Program

COMPILED_PIPELINES = ("cpu", "cpu-unfused", "cpu-basic")

FORCED_LOOPS = {
    "fuzz-pack": "tess-conv-tiles{min-depth=1 max-taps=4096},tess-pack-matmul{min-work=1},"
    "tess-interchange-rows{min-rows=1},tess-row-dots{min-cols=1}",
    "fuzz-pack-rows": "tess-conv-tiles{min-depth=1 max-taps=1},"
    "tess-pack-matmul{min-work=1 min-rows=1 in-place-bytes=131072},"
    "tess-interchange-rows{min-rows=1 max-trip=40},tess-row-dots{min-cols=1}",
}
"""`cpu` with the loop passes' size gates forced open, so small programs reach them:
`fuzz-pack` tiles every conv of unit column stride and one group (`fuzz-pack-rows`: with
the last tap as depth where there are two taps or more), packs every product
(one tile as tall as a product under 16 rows when B is read in place), `fuzz-pack-rows`
every product as MR-row tiles (A in place where its rows are a multiple of MR) with
operands up to 128 KiB in place; both interchange any row loop and tile every row dot.
`register_forced_pipelines` adds them to `tessc.pipelines.PIPELINES` (the fuzzer's
process only: they are not pipelines a user picks)."""


def register_forced_pipelines() -> tuple[str, ...]:
    """Add `FORCED_LOOPS`' pipelines to `PIPELINES`; their names."""
    from tessc.pipelines import PIPELINES, Pipeline

    cpu = PIPELINES["cpu"]
    default = "tess-pack-matmul,tess-interchange-rows,tess-row-dots"  # as in `cpu`'s loop passes
    for name, forced in FORCED_LOOPS.items():
        if name in PIPELINES:
            continue
        fuse, buffers, loops = cpu.passes
        if default not in loops:
            raise RuntimeError(f"cpu's loop passes no longer hold '{default}'")
        passes = (fuse, buffers, loops.replace(default, forced))
        PIPELINES[name] = Pipeline(name, passes, "numba", f"cpu, forced: {forced}")
    return tuple(FORCED_LOOPS)


@dataclass(frozen=True)
class Failure:
    kind: str  # "crash", "mismatch", "grad-crash", "grad-mismatch", "reference"
    pipeline: str
    detail: str

    def same(self, other: Failure | None) -> bool:
        return other is not None and (other.kind, other.pipeline) == (self.kind, self.pipeline)


def _signature(
    module, entry: str
) -> tuple[list[tuple[tuple[int, ...], np.dtype]], list[tuple[int, ...]], str]:
    """The argument shapes and dtypes, the result shapes, and the program's float type
    (`f32`/`f64`: its first float argument's, for the tolerances)."""
    from tessc.reference import find_func, shape_and_dtype

    function = find_func(module, entry)
    ins = [shape_and_dtype(t) for t in function.function_type.inputs.data]
    outs = [shape_and_dtype(t)[0] for t in function.function_type.outputs.data]
    floats = [np.dtype(d) for _, d in ins if np.dtype(d).kind == "f"]
    dtype = "f64" if floats and floats[0] == np.float64 else "f32"
    return [(shape, np.dtype(d)) for shape, d in ins], outs, dtype


def _inputs(arguments: list[tuple[tuple[int, ...], np.dtype]], seed: int) -> list[np.ndarray]:
    """Floats in [-2, 2]; integers in [-6, 6] (indices out of range or negative too)."""
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(-2.0, 2.0, size=shape).astype(dtype)
        if dtype.kind == "f"
        else rng.integers(-6, 7, size=shape).astype(dtype)
        for shape, dtype in arguments
    ]


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> bool:
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "biu":  # integers (argmax, casts, integer arithmetic) are exact
        return got.dtype == want.dtype and bool(np.array_equal(got, want))
    finite = np.isfinite(want)
    if not np.array_equal(finite, np.isfinite(got)):
        return False
    scale = 1.0 + float(np.max(np.abs(want[finite]), initial=0.0))
    tolerance = 1e-3 if dtype == "f32" else 1e-8
    return bool(np.allclose(got[finite], want[finite], rtol=tolerance, atol=tolerance * scale))


def _error(error: BaseException) -> str:
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {Path(last[0].filename).name}:{last[0].lineno})" if last else ""
    message = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {message}{where}"


def _compare(
    outputs: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...], dtype: str
) -> str | None:
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for k, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        if not _close(np.asarray(got), want, dtype):
            error = np.nanmax(np.abs(np.asarray(got, np.float64) - want), initial=0.0)
            return f"output {k} differs: max abs error {error:.3g}"
    return None


def check(
    program: Program,
    *,
    pipelines: tuple[str, ...] = COMPILED_PIPELINES,
    grad: bool = False,
    seed: int = 0,
) -> Failure | None:
    """The first way `program` fails (None: every pipeline agrees with the reference)."""
    return check_text(program.text(), program.name, pipelines=pipelines, grad=grad, seed=seed)


def check_text(
    text: str,
    entry: str = "f",
    *,
    pipelines: tuple[str, ...] = COMPILED_PIPELINES,
    grad: bool = False,
    seed: int = 0,
) -> Failure | None:
    """`check` of the `tess` module `text`, function `@entry`."""
    from tessc.compiler import compile_module
    from tessc.reference import interpret, parse_module

    # Invalid IR between passes is an internal error here, not a miscompile to find later.
    os.environ["TESSC_VERIFY_PASSES"] = "1"
    try:
        module = parse_module(text)
        arguments, out_shapes, dtype = _signature(module, entry)
        inputs = _inputs(arguments, seed)
        expected = interpret(module, entry, inputs)
    except Exception as error:
        return Failure("reference", "reference", _error(error))
    for pipeline in pipelines:
        try:
            outputs = compile_module(module, entry, pipeline)(*inputs)
        except Exception as error:
            return Failure("crash", pipeline, _error(error))
        difference = _compare(outputs, expected, dtype)
        if difference is not None:
            return Failure("mismatch", pipeline, difference)
    if grad:
        # The gradient at `cpu` and the forced pipelines (their backward products are what
        # the forced gates are for), not again at every pipeline.
        at = tuple(p for p in pipelines if p == "cpu" or p in FORCED_LOOPS) or pipelines[:1]
        return check_gradients(module, entry, inputs, out_shapes, dtype, at, seed)
    return None


def check_gradients(
    module,
    entry: str,
    inputs: list[np.ndarray],
    out_shapes: list[tuple[int, ...]],
    dtype: str,
    pipelines: tuple[str, ...],
    seed: int,
) -> Failure | None:
    """`@<entry>_grad` (by `tess-autodiff`) compiled and interpreted, against central
    differences of the reference in float64."""
    from tessc.compiler import compile_module
    from tessc.pipelines import run_passes
    from tessc.reference import interpret

    floats = [k for k, x in enumerate(inputs) if x.dtype.kind == "f"]
    if not floats:
        return None  # integer arguments only: nothing to differentiate
    wrt = ",".join(str(k) for k in floats)
    differentiated = module.clone()
    try:
        run_passes(differentiated, f"tess-autodiff{{func={entry} wrt={wrt}}}")
        differentiated.verify()
    except Exception as error:
        return Failure("grad-crash", "tess-autodiff", _error(error))
    rng = np.random.default_rng(seed + 1)
    seeds = [rng.uniform(-1.0, 1.0, size=s) for s in out_shapes if int(np.prod(s)) != 1]
    seeds = [s.astype(inputs[floats[0]].dtype) for s in seeds]
    grad_name = f"{entry}_grad"
    try:
        reference = interpret(differentiated, grad_name, [*inputs, *seeds])
    except Exception as error:
        return Failure("grad-crash", "reference", _error(error))
    gradients = reference[len(out_shapes) :]
    if dtype == "f64":
        numeric = _central_differences(module, entry, inputs, floats, out_shapes, seeds, rng)
        for k, (got, (index, want)) in enumerate(zip(gradients, numeric, strict=True)):
            if not np.allclose(got.reshape(-1)[index], want, rtol=1e-5, atol=1e-6):
                error = np.max(np.abs(got.reshape(-1)[index] - want))
                return Failure("grad-mismatch", "tess-autodiff", f"gradient {k}: error {error:.3g}")
    for pipeline in pipelines:
        try:
            outputs = compile_module(differentiated, grad_name, pipeline)(*inputs, *seeds)
        except Exception as error:
            return Failure("grad-crash", pipeline, _error(error))
        difference = _compare(outputs, reference, dtype)
        if difference is not None:
            return Failure("grad-mismatch", pipeline, difference)
    return None


def _central_differences(
    module,
    entry: str,
    inputs: list[np.ndarray],
    wrt: list[int],
    out_shapes: list[tuple[int, ...]],
    seeds: list[np.ndarray],
    rng: np.random.Generator,
    samples: int = 12,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each argument in `wrt`, some flat element indices and d<seeds, f>/d(element)
    there."""
    from tessc.reference import interpret

    weights = iter(seeds)
    full = [np.ones(s) if int(np.prod(s)) == 1 else next(weights) for s in out_shapes]

    def objective(args: list[np.ndarray]) -> float:
        # Without the non-finite outputs: the mean of an empty tensor is NaN whatever the
        # inputs, and its gradient flows to no element (autodiff's too).
        outs = interpret(module, entry, args)
        terms = [np.where(np.isfinite(o), o * w, 0.0) for o, w in zip(outs, full, strict=True)]
        return float(sum(np.sum(t) for t in terms))

    step = 1e-6
    result = []
    for k in wrt:
        x = inputs[k]
        size = x.size
        index = rng.choice(size, size=min(size, samples), replace=False)
        derivatives = []
        for i in index:
            args = list(inputs)
            plus, minus = x.copy().reshape(-1), x.copy().reshape(-1)
            plus[i] += step
            minus[i] -= step
            args[k] = plus.reshape(x.shape)
            f_plus = objective(args)
            args[k] = minus.reshape(x.shape)
            derivatives.append((f_plus - objective(args)) / (2 * step))
        result.append((index, np.array(derivatives)))
    return result


def shrink(
    program: Program,
    failure: Failure,
    *,
    grad: bool,
    seed: int,
    checker: Callable[..., Failure | None] | None = None,
) -> Program:
    """A smaller program failing the same way (greedy op removal; `checker` is `check`)."""
    check_ = checker or check
    known = (*COMPILED_PIPELINES, *FORCED_LOOPS)
    pipelines = (failure.pipeline,) if failure.pipeline in known else ("cpu",)
    changed = True
    while changed:
        changed = False
        candidates = [program.without(index).pruned() for index in range(len(program.ops))]
        # ... or returning an earlier value (dropping the ops after it)
        candidates += [replace(program, outputs=[op.result]).pruned() for op in program.ops]
        for candidate in sorted(candidates, key=lambda c: len(c.ops)):
            if len(candidate.ops) >= len(program.ops):
                continue
            result = check_(candidate, pipelines=pipelines, grad=grad, seed=seed)
            if failure.same(result):
                program, changed = candidate, True
                break
    return program


def save(program: Program, failure: Failure, directory: Path, *, grad: bool, seed: int) -> Path:
    """Write the failing program as a regression `.mlir` (named by its content)."""
    return save_text(program.text(), failure, directory, grad=grad, seed=seed)


def save_text(text: str, failure: Failure, directory: Path, *, grad: bool, seed: int) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{failure.kind}-{failure.pipeline}-{digest}.mlir"
    header = [
        f"// Found by `python -m tessc.fuzz programs` (input seed {seed}):",
        f"// {failure.kind} at {failure.pipeline}: {failure.detail}",
        f"// fuzz: entry=f seed={seed} grad={'yes' if grad else 'no'}"
        + (f" pipelines={failure.pipeline}" if failure.pipeline in FORCED_LOOPS else ""),
    ]
    path.write_text("\n".join(header) + "\n" + text)
    return path


HEADER = re.compile(r"^// fuzz: entry=(\S+) seed=(\d+) grad=(yes|no)", re.MULTILINE)
FORCED_HEADER = re.compile(r"^// fuzz: .* pipelines=(\S+)$", re.MULTILINE)


def replay(path: Path) -> Failure | None:
    """`check_text` of a saved regression, as its header says (entry, seed, gradients)."""
    text = path.read_text(encoding="utf-8")
    header = HEADER.search(text)
    if header is None:
        raise ValueError(f"{path}: no '// fuzz: entry=... seed=... grad=...' header")
    entry, seed, grad = header.group(1), int(header.group(2)), header.group(3) == "yes"
    pipelines = COMPILED_PIPELINES
    if (forced := FORCED_HEADER.search(text)) is not None:  # found at a forced pipeline
        register_forced_pipelines()
        pipelines = (*pipelines, *forced.group(1).split(","))
    return check_text(text, entry, grad=grad, seed=seed, pipelines=pipelines)


__all__ = [
    "COMPILED_PIPELINES",
    "FORCED_LOOPS",
    "Failure",
    "check",
    "check_text",
    "register_forced_pipelines",
    "replay",
    "save",
    "save_text",
    "shrink",
]
