"""
The mutation fuzzer: `tessc-opt` on mutated `.mlir` and `.tess` inputs, every outcome
classified.

Seeds are the chunks of the lit tests (`tests/filecheck/**/*.mlir`, each with the pass
pipeline of its first `RUN:` line), the `.tess` examples, and random programs of
`tessc.fuzz.programs` (run through the whole `cpu` pipeline and `-t numba`). A mutant is
one to three mutations of a seed:

- byte: flip a bit, insert or delete bytes, duplicate a span, insert invalid UTF-8;
- token: delete, duplicate or swap tokens, or replace one with an interesting token (huge
  and special numbers, element types such as `f80` or `vector<4xf32>`, op names, `%0`);
- syntax-preserving (`.mlir`): change a dimension of a tensor type, an element type, a
  `tess` op for another of its arity, or an SSA operand for another name (use before
  definition, self use).

Each mutant runs `tessc-opt` in a child forked from a process that imported everything
once (so a run costs milliseconds, not an interpreter start), under a CPU-time limit
(`resource.setrlimit(RLIMIT_CPU)`, not wall time: the machine is shared) and an
address-space limit. The outcome is one of

    ok          exit status 0
    located     exit status 1, a `file:line:col: error:` diagnostic
    unlocated   exit status 1, a diagnostic without line and column
    ice         an internal compiler error report (a bug, reported with a reproducer)
    traceback   a Python traceback (an uncaught exception)
    signal      killed by a signal (a crash in native code)
    hang        out of CPU time
    memory      out of memory

All but `ok` and `located` are bugs; the inputs are saved (`save_dir`) to be fixed.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("ok", "located", "unlocated", "ice", "traceback", "signal", "hang", "memory")
BAD = ("unlocated", "ice", "traceback", "signal", "hang", "memory")
LOCATED = re.compile(rb"^[^\n:]+:\d+:\d+: error: ", re.MULTILINE)
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Seed:
    name: str
    content: bytes
    suffix: str  # ".mlir" or ".tess"
    passes: str  # the -p pipeline ("" for none)
    target: str = ""  # "-t numba" or ""


# ---------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------

_RUN_PASSES = re.compile(r"//\s*RUN:\s*tessc-opt\s+%s\s+[^|\n]*?-p\s+(?:'([^']+)'|([^'\s|]+))")


def seeds(rng: random.Random, generated: int = 40) -> list[Seed]:
    from tessc.fuzz.programs import generate
    from tessc.pipelines import get_pipeline

    found: list[Seed] = []
    for path in sorted((REPO / "tests" / "filecheck").rglob("*.mlir")):
        text = path.read_text(encoding="utf-8", errors="replace")
        match = _RUN_PASSES.search(text)
        passes = (match.group(1) or match.group(2)) if match else ""
        if "gpu" in passes:
            continue  # the cuda pipeline's passes need no fuzzing of their own here
        for k, chunk in enumerate(text.split("// -----")):
            lines = [line for line in chunk.splitlines() if not line.lstrip().startswith("//")]
            body = "\n".join(lines).strip()
            if body:
                found.append(Seed(f"{path.name}#{k}", body.encode() + b"\n", ".mlir", passes))
    loops = get_pipeline("cpu").passes_to("loops")
    for path in sorted([*(REPO / "examples").glob("*.tess"), *(REPO / "tests").rglob("*.tess")]):
        found.append(Seed(path.name, path.read_bytes(), ".tess", ""))
        found.append(Seed(f"{path.name}@loops", path.read_bytes(), ".tess", loops, "numba"))
    for k in range(generated):
        program = generate(rng, ops=10)
        found.append(Seed(f"generated#{k}", program.text().encode(), ".mlir", loops, "numba"))
    return found


# ---------------------------------------------------------------------------------------
# mutations
# ---------------------------------------------------------------------------------------

INTERESTING = [
    b"0",
    b"-1",
    b"1",
    b"99999999999999999999",
    b"18446744073709551616",
    b"1.0e39",
    b"0x7FF0000000000000",
    b"0xFFFFFFFFFFFFFFFFFFFF",
    b"nan",
    b"1e-400",
    b"-0.0",
    b"f16",
    b"f64",
    b"f80",
    b"bf16",
    b"i32",
    b"i1",
    b"index",
    b"vector<4xf32>",
    b"tensor<?xf32>",
    b"tensor<0xf32>",
    b"tensor<f32>",
    b"memref<3xf32>",
    b"%0",
    b"%a",
    b"@g",
    b"@f",
    b"tess.add",
    b"tess.matmul",
    b"tess.sum",
    b"linalg.generic",
    b'"x',
    b"dims = [5]",
    b"keepdim",
    b"{",
    b"}",
    b"(",
    b")",
    b"[",
    b"]",
    b"<",
    b">",
    b",",
    b":",
    b"->",
    b"=",
    b"\xff\xfe",
    b"\x00",
    b"\\",
    b"**",
    b"@",
    b"10 ** 400",
    b"def",
    b"return",
    b"relu",
    b"sum",
    b"dim=",
    b"\n",
    b"    ",
]
TOKEN = re.compile(rb'%[\w.$-]+|@[\w.$-]+|"[^"\n]*"|[A-Za-z_][\w.]*|\d[\w.+-]*|->|\*\*|\S')
TESS_UNARY = [b"neg", b"exp", b"log", b"relu", b"sigmoid", b"tanh", b"sqrt", b"abs"]
TESS_BINARY = [b"add", b"sub", b"mul", b"div", b"max", b"min", b"pow", b"lt", b"gt", b"eq"]
ELEMENT_TYPES = [b"f32", b"f64", b"f16", b"i32", b"f80", b"i1", b"index"]


def _byte(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(data))
    choice = rng.randrange(5)
    if choice == 0:
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if choice == 1:
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[i:]
    if choice == 2:
        return data[:i] + data[i + rng.randint(1, 16) :]
    if choice == 3:
        j = min(len(data), i + rng.randint(1, 64))
        return data[:j] + data[i:j] + data[j:]
    return data[:i] + b"\xc3\x28\xff" + data[i:]


def _token(rng: random.Random, data: bytes) -> bytes:
    tokens = list(TOKEN.finditer(data))
    if not tokens:
        return _byte(rng, data)
    t = rng.choice(tokens)
    choice = rng.randrange(4)
    if choice == 0:
        return data[: t.start()] + data[t.end() :]
    if choice == 1:
        return data[: t.end()] + b" " + t.group() + data[t.end() :]
    if choice == 2:
        u = rng.choice(tokens)
        a, b = sorted((t, u), key=lambda m: m.start())
        if a.end() > b.start():
            return data
        return (
            data[: a.start()] + b.group() + data[a.end() : b.start()] + a.group() + data[b.end() :]
        )
    replacement = rng.choice(INTERESTING) if rng.random() < 0.7 else rng.choice(tokens).group()
    return data[: t.start()] + replacement + data[t.end() :]


def _syntax(rng: random.Random, data: bytes) -> bytes:
    """A mutation that keeps the text well-formed (so it reaches the verifiers/passes)."""
    choice = rng.randrange(4)
    if choice == 0:  # a dimension of a tensor type
        dims = list(re.finditer(rb"(?<=[<x])\d+(?=x)", data))
        if dims:
            d = rng.choice(dims)
            new = rng.choice([b"0", b"1", b"2", b"7", b"65536", b"99999999999999999999"])
            return data[: d.start()] + new + data[d.end() :]
    if choice == 1:  # an element type
        types = list(re.finditer(rb"(?<=x)f(?:32|64)(?=>)", data))
        if types:
            t = rng.choice(types)
            return data[: t.start()] + rng.choice(ELEMENT_TYPES) + data[t.end() :]
    if choice == 2:  # a tess op for another of the same arity
        ops = list(re.finditer(rb"tess\.(\w+)", data))
        if ops:
            o = rng.choice(ops)
            for group in (TESS_UNARY, TESS_BINARY):
                if o.group(1) in group:
                    new = b"tess." + rng.choice(group)
                    return data[: o.start()] + new + data[o.end() :]
    uses = list(re.finditer(rb"(?<=[ (,])%[\w]+(?=[,) :])", data))  # an SSA operand
    names = sorted({m.group() for m in re.finditer(rb"%[\w]+", data)})
    if uses and names:
        u = rng.choice(uses)
        return data[: u.start()] + rng.choice(names) + data[u.end() :]
    return _token(rng, data)


MUTATIONS: tuple[Callable[[random.Random, bytes], bytes], ...] = (_byte, _token, _syntax)


def mutate(rng: random.Random, seed: Seed) -> bytes:
    data = seed.content
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        data = rng.choice(MUTATIONS)(rng, data)
    return data


# ---------------------------------------------------------------------------------------
# running tessc-opt on one input, in a forked child
# ---------------------------------------------------------------------------------------


def _child(argv: list[str], cpu_seconds: int, memory_bytes: int, out: int, err: int) -> None:
    os.dup2(out, 1)
    os.dup2(err, 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    status = 70
    try:
        from tessc.cli.opt import main

        status = main(argv)
    except MemoryError:
        status = 71
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def run_one(
    content: bytes,
    seed: Seed,
    workdir: Path,
    *,
    cpu_seconds: int = 20,
    memory_bytes: int = 4 << 30,
) -> tuple[str, bytes]:
    """The outcome of `tessc-opt` on `content` (with `seed`'s passes and target), and its
    stderr."""
    path = workdir / f"input{seed.suffix}"
    path.write_bytes(content)
    argv = [str(path)]
    if seed.passes:
        argv += ["-p", seed.passes]
    if seed.target:
        argv += ["-t", seed.target]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            _child(argv, cpu_seconds, memory_bytes, out.fileno(), err.fileno())
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        stderr = err.read()
    return classify(status, stderr), stderr


def classify(status: int, stderr: bytes) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return "hang" if number in (signal.SIGXCPU, signal.SIGKILL) else "signal"
    code = os.WEXITSTATUS(status)
    if b"Traceback (most recent call last)" in stderr or code == 70:
        return "memory" if code == 71 or b"MemoryError" in stderr else "traceback"
    if code == 71:
        return "memory"
    if code == 0:
        return "ok"
    if b"internal compiler error" in stderr:
        return "ice"
    return "located" if LOCATED.search(stderr) else "unlocated"


def _warm_up() -> None:
    """Import what tessc-opt uses, so every forked child starts warm."""
    import tessc.cli.opt  # noqa: F401
    from tessc.context import make_context
    from tessc.passes import TESS_PASSES, load_pass

    for name in TESS_PASSES:
        try:
            load_pass(name)
        except ImportError:
            pass  # a pass registered before its module landed: no seed uses it
    import tessc.frontend.tess_lang  # noqa: F401
    import tessc.lowering.codegen.to_numba  # noqa: F401

    make_context()


def run_campaign(
    *,
    count: int,
    seed: int,
    cpu_seconds: int = 20,
    time_limit: float = 0,
    save_dir: Path | None = None,
) -> int:
    """Mutate and run `count` inputs; print the outcome counts. Exit status 1 when an input
    went wrong (a traceback, signal, hang, memory blow-up or unlocated diagnostic)."""
    rng = random.Random(seed)
    corpus = seeds(rng)
    tess = [s for s in corpus if s.suffix == ".tess"]
    mlir = [s for s in corpus if s.suffix != ".tess"]
    _warm_up()
    outcomes: Counter[str] = Counter()
    by_suffix: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tessc-fuzz-") as directory:
        workdir = Path(directory)
        for _ in range(count):
            if time_limit and time.monotonic() - start > time_limit:
                break
            # A third .tess, as few seeds are .tess files.
            origin = rng.choice(tess if tess and rng.random() < 0.33 else mlir)
            content = mutate(rng, origin)
            outcome, stderr = run_one(content, origin, workdir, cpu_seconds=cpu_seconds)
            outcomes[outcome] += 1
            by_suffix[origin.suffix] += 1
            if outcome in BAD:
                first = stderr.decode("utf-8", "replace").strip().splitlines()
                summary = first[-1] if first else ""
                examples.setdefault(outcome, []).append(f"{origin.name}: {summary[:160]}")
                if save_dir is not None:
                    save_dir.mkdir(parents=True, exist_ok=True)
                    digest = hashlib.sha256(content).hexdigest()[:10]
                    name = f"{outcome}-{digest}{origin.suffix}"
                    (save_dir / name).write_bytes(content)
                    pipeline = f"-p '{origin.passes}' " if origin.passes else ""
                    target = f"-t {origin.target}" if origin.target else ""
                    (save_dir / f"{name}.cmd").write_text(
                        f"tessc-opt {name} {pipeline}{target}\n{stderr.decode('utf-8', 'replace')}"
                    )
    total = sum(outcomes.values())
    elapsed = time.monotonic() - start
    print(
        f"mutants: {total} run ({by_suffix['.mlir']} .mlir, {by_suffix['.tess']} .tess), "
        f"{elapsed:.0f} s"
    )
    for outcome in OUTCOMES:
        print(f"  {outcomes[outcome]:6d}  {outcome}")
    for outcome, lines in examples.items():
        for line in lines[:5]:
            print(f"  {outcome}: {line}")
    return 1 if any(outcomes[o] for o in BAD) else 0


__all__ = ["OUTCOMES", "Seed", "classify", "mutate", "run_campaign", "run_one", "seeds"]
