"""PTX of the emitted CUDA kernels, without a GPU: NVVM (numba-cuda's `compile_ptx`) makes
the PTX, `ptxas -v` assembles it and reports registers, spills and local memory, and the
PTX text gives each loop's instruction mix. Both come from the `nvidia-cuda-nvcc-cu12`
wheel (`pip install 'numba-cuda[cu12]'`); `available()` says whether they are here.

These are proxies for speed that need no hardware: spills and local memory are slow
memory traffic, registers bound occupancy, and a matmul's inner loop should be mostly
FMAs. They do not say how fast a kernel runs."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARCHES = ((8, 0), (9, 0))


@functools.cache
def ptxas_path() -> str | None:
    """`ptxas` of the nvidia-cuda-nvcc wheel, else one on PATH."""
    try:
        import nvidia.cuda_nvcc  # type: ignore[import-not-found]
    except ImportError:
        return shutil.which("ptxas")
    for root in nvidia.cuda_nvcc.__path__:
        candidate = Path(root) / "bin" / "ptxas"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("ptxas")


@functools.cache
def available() -> bool:
    """Whether NVVM and ptxas are installed: a trivial kernel goes to PTX and assembles."""
    from numba import cuda, float32

    def kernel(out: Any) -> None:
        out[0] = float32(1)

    try:
        ptx, _ = cuda.compile_ptx(kernel, (float32[:],), cc=(8, 0))
    except Exception:
        return False
    return ptxas_path() is not None and assemble(ptx, (8, 0)).registers >= 0


def kernel_ptxes(
    function: Callable[..., Any], argument_types: tuple, source: str
) -> dict[tuple[int, int], str]:
    """The PTX of `function` (a kernel's Python function, defined in the generated module
    `source`) typed with `argument_types`, for each of `ARCHES`. Numba types and lowers it
    ONCE (the slow part: seconds for a contraction's unrolled k steps) and NVVM makes each
    arch's PTX from that one LLVM module; the PTX is cached on disk by the source, the
    kernel, its argument types and numba-cuda's version."""
    import json

    from numba import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup

    from tessc.runtime.numba_cuda_compat import linear_singly_assigned_variables, numba_cuda_version

    key = hashlib.sha256(
        json.dumps(
            [source, function.__name__, [str(t) for t in argument_types], numba_cuda_version()]
        ).encode()
    ).hexdigest()
    cached = {cc: cache_dir() / f"{key}.sm_{cc[0]}{cc[1]}.ptx" for cc in ARCHES}
    if all(path.is_file() for path in cached.values()):
        return {cc: path.read_text() for cc, path in cached.items()}
    linear_singly_assigned_variables()
    # What `cuda.compile_ptx(function, argument_types, cc=...)` does for a kernel, less the
    # second typing and lowering: its LLVM module does not depend on the arch.
    result = compile_cuda(
        function,
        types.void,
        argument_types,
        nvvm_options={"fastmath": False, "opt": 3},
        cc=ARCHES[0],
    )
    kernel_fixup(result.library.get_function(result.fndesc.llvm_func_name), False)
    texts = {cc: result.library.get_asm_str(cc=cc) for cc in ARCHES}
    for cc, path in cached.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(texts[cc])
        os.replace(partial, path)
    return texts


@dataclass(frozen=True)
class Resources:
    """What `ptxas -v` says of one kernel."""

    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    stack_frame: int  # bytes
    local_memory: int  # bytes (`lmem`)
    shared_memory: int  # bytes (`smem`)


_USED = re.compile(r"Used (\d+) registers")
_BYTES = re.compile(r"(\d+) bytes (spill stores|spill loads|stack frame|lmem|smem)")


def cache_dir() -> Path:
    root = os.environ.get("TESSC_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "tessc-ptx")
    return Path(root) / "ptxas"


def assemble(ptx: str, cc: tuple[int, int]) -> Resources:
    """`ptxas -v` on `ptx` for sm_<cc>; its report cached on disk by the PTX's hash."""
    arch = f"sm_{cc[0]}{cc[1]}"
    key = hashlib.sha256(f"{arch}\n{ptx}".encode()).hexdigest()
    cached = cache_dir() / f"{key}.txt"
    if cached.is_file():
        report = cached.read_text()
    else:
        ptxas = ptxas_path()
        assert ptxas is not None
        with tempfile.TemporaryDirectory() as work:
            source = Path(work) / "kernel.ptx"
            source.write_text(ptx)
            result = subprocess.run(
                [ptxas, "-v", f"-arch={arch}", "-o", os.devnull, str(source)],
                capture_output=True,
                text=True,
                check=False,
            )
        if result.returncode != 0:
            raise AssertionError(f"ptxas -arch={arch} failed:\n{result.stderr}")
        report = result.stderr
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(report)
        os.replace(partial, cached)
    used = _USED.search(report)
    sizes = {kind: 0 for kind in ("spill stores", "spill loads", "stack frame", "lmem", "smem")}
    for amount, kind in _BYTES.findall(report):
        sizes[kind] += int(amount)
    return Resources(
        registers=int(used.group(1)) if used else 0,
        spill_stores=sizes["spill stores"],
        spill_loads=sizes["spill loads"],
        stack_frame=sizes["stack frame"],
        local_memory=sizes["lmem"],
        shared_memory=sizes["smem"],
    )


@dataclass(frozen=True)
class Loop:
    """One loop of a PTX function: the instructions from its header label to the branch
    back to it."""

    label: str
    instructions: tuple[str, ...]  # opcodes with their type suffixes: `fma.rn.f32`
    nested: bool  # another loop lies inside it

    def count(self, prefix: str) -> int:
        return sum(1 for op in self.instructions if op.startswith(prefix))

    @property
    def fma_share(self) -> float:
        return self.count("fma.") / max(1, len(self.instructions))


_LABEL = re.compile(r"^(\$L__\w+):")
_BRANCH = re.compile(r"bra(?:\.uni)?\s+(\$L__\w+);")


def loops(ptx: str) -> list[Loop]:
    """The loops of `ptx` (every backward branch closes one), innermost ones first."""
    lines: list[str] = []
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line.startswith((".", "{", "}")) or line.endswith(")"):
            continue
        lines.append(line)
    where: dict[str, int] = {}
    found: list[tuple[int, int, str]] = []
    for at, line in enumerate(lines):
        label = _LABEL.match(line)
        if label:
            where[label.group(1)] = at
            continue
        branch = _BRANCH.search(line)
        if branch and branch.group(1) in where:
            found.append((where[branch.group(1)], at, branch.group(1)))
    result: list[Loop] = []
    for start, end, label in found:
        nested = any(s > start and e < end for s, e, _ in found)
        body = []
        for line in lines[start + 1 : end + 1]:
            if _LABEL.match(line):
                continue
            opcode = line.split()[0]
            if opcode.startswith("@"):  # a predicate guard: `@%p1 bra ...`
                opcode = line.split()[1]
            body.append(opcode)
        result.append(Loop(label, tuple(body), nested))
    result.sort(key=lambda loop: loop.nested)
    return result


def fma_loop(ptx: str) -> Loop | None:
    """The innermost loop with the most FMAs (a matmul's k loop), None when no loop has
    one."""
    candidates = [loop for loop in loops(ptx) if loop.count("fma.") > 0 and not loop.nested]
    return max(candidates, key=lambda loop: loop.count("fma."), default=None)
