"""
The GPU check: what a lent CUDA device shows of tessc's `cuda` target, in one run of under
six minutes, written to one summary (`gpu-check.md` and `gpu-check.json` in `--out`).

    bash bench/gpu_check.sh                      # on the GPU machine (sets up ../shared/gpu)
    python bench/gpu_check.py --out DIR          # where tessc already imports
    SIMULATE=1 python bench/gpu_check.py --out DIR   # the dry run, in Numba's CUDA simulator

Each step runs in a child process of its own, under its own time limit, so a hung or
crashed step costs only its share and the summary is always written:

- `probe`: the device (name, SMs, compute capability) and the versions that matter;
- `tests`: `tests/cuda` on the hardware (`TESSC_CUDA_HARDWARE=1`), not the simulator;
- `bench`: `bench/bench_cuda.py` W1-W4 against CuPy and PyTorch CUDA;
- `repeat`: five runs of a tiled matmul with its epilogue, a 2^22 sum, a softmax gradient:
  the bits must be the same every time (a shared-memory race would show here);
- `mlp`: the MLP training step on `cuda` against `cpu`, losses and parameters compared;
- `foreign`: CuPy arrays and PyTorch CUDA tensors passed straight in;
- `cache`: the kernel disk cache read back by a second process (no passes run there).

The dry run (`SIMULATE=1`) runs every step at toy sizes in the simulator: it checks this
script, not the GPU; its times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULT_TAG = "GPU_CHECK_RESULT "
SIMULATE = os.environ.get("SIMULATE") == "1"
# seconds per step on hardware; the whole run stays under six minutes
LIMITS = {
    "probe": 40,
    "tests": 150,
    "bench": 80,
    "repeat": 30,
    "mlp": 40,
    "foreign": 25,
    "cache": 40,
}
if SIMULATE:  # the simulator runs every thread in Python, on a machine that may be shared
    LIMITS = {name: 4 * limit for name, limit in LIMITS.items()}
# the dry run's share of tests/cuda: enough to exercise the step, small enough for CI
SIMULATED_TESTS = ["tests/cuda/test_jit_cuda.py::test_broadcast_operands"]


def child_environment() -> dict[str, str]:
    env = dict(os.environ)
    if SIMULATE:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env["TESSC_CUDA_HARDWARE"] = "1"
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


def emit(result: dict[str, Any]) -> None:
    """A step's verdict, as the one line the driver reads back."""
    print(RESULT_TAG + json.dumps(result, default=str), flush=True)


def seconds(fn: Callable[[], object], repeat: int = 10) -> float:
    from numba import cuda

    fn()
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    cuda.synchronize()
    return (time.perf_counter() - start) / repeat


def host(array: Any) -> np.ndarray:
    return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)


# -- steps (each runs in its own process: `gpu_check.py --step NAME`) --------------------


def step_probe() -> dict[str, Any]:
    import importlib.metadata as metadata

    from numba import cuda

    versions = {}
    for name in (
        "numpy",
        "numba",
        "numba-cuda",
        "cupy-cuda13x",
        "cupy-cuda12x",
        "torch",
        "jax",
        "xdsl",
    ):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    device = cuda.get_current_device()
    name = getattr(device, "name", "Numba's CUDA simulator")
    name = name.decode() if isinstance(name, bytes) else str(name)
    return {
        "ok": True,
        "device": name,
        "sms": int(getattr(device, "MULTIPROCESSOR_COUNT", 0) or 0),
        "compute_capability": list(getattr(device, "compute_capability", ())),
        "versions": versions,
        "python": sys.version.split()[0],
    }


def run_in_repo(
    command: list[str], limit: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` in the checkout, in a child's environment, its output captured."""
    return subprocess.run(
        command,
        cwd=REPO,
        env=env if env is not None else child_environment(),
        capture_output=True,
        text=True,
        timeout=limit,
    )


def step_tests() -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if SIMULATE:
        command += SIMULATED_TESTS
    else:
        command += ["tests/cuda", "-n", "4"]
    run = run_in_repo(command, LIMITS["tests"] - 5)
    tail = (run.stdout + run.stderr).strip().splitlines()[-30:]
    counts = {
        kind: int(n)
        for n, kind in re.findall(r"(\d+) (passed|failed|error|skipped)", "\n".join(tail[-3:]))
    }
    return {"ok": run.returncode == 0, "counts": counts, "tail": tail[-12:]}


def step_bench() -> dict[str, Any]:
    command = [sys.executable, "bench/bench_cuda.py"]
    command += (
        ["--simulate", "--repeat", "1", "--rounds", "1"]
        if SIMULATE
        else ["--repeat", "10", "--rounds", "3"]
    )
    run = run_in_repo(command, LIMITS["bench"] - 5)
    return {
        "ok": run.returncode == 0,
        "output": run.stdout.strip().splitlines()[-40:],
        "stderr": run.stderr.strip().splitlines()[-8:],
    }


def step_repeat() -> dict[str, Any]:
    from numba import cuda

    import tessc as ts

    m, k, n, total = (9, 12, 5, 257) if SIMULATE else (1024, 512, 256, 1 << 22)
    rng = np.random.default_rng(0)
    x = cuda.to_device(rng.standard_normal((m, k)).astype(np.float32))
    w = cuda.to_device(rng.standard_normal((k, n)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal(n).astype(np.float32))
    big = cuda.to_device(rng.standard_normal(total).astype(np.float32))

    def softmax_loss(z: Any) -> Any:
        return (ts.nn.softmax(z, dim=1) * z).sum()

    cases = {
        "matmul+bias+relu": (ts.jit(lambda x, w, b: (x @ w + b).relu(), target="cuda"), (x, w, b)),
        "sum 2^22" if not SIMULATE else "sum": (ts.jit(lambda v: v.sum(), target="cuda"), (big,)),
        "softmax gradient": (ts.jit(ts.grad(softmax_loss), target="cuda"), (x,)),
    }
    same = {}
    for name, (fn, args) in cases.items():
        runs = [host(fn(*args)).tobytes() for _ in range(5)]
        same[name] = all(r == runs[0] for r in runs)
    return {"ok": all(same.values()), "bitwise_same_over_5_runs": same}


def step_mlp() -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "bench"))
    from mlp_step import init_params, loss_fn

    import tessc as ts

    batch, hidden, steps = (8, 4, 2) if SIMULATE else (512, 256, 20)
    lr = 0.1
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (batch, 64)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]

    def train(target: str) -> tuple[dict[str, np.ndarray], list[float], float]:
        value_and_grad = ts.jit(ts.value_and_grad(loss_fn), target=target)
        params = init_params(hidden)
        losses = []
        start = time.perf_counter()
        for _ in range(steps):
            loss, grads = value_and_grad(params, x, y)
            losses.append(float(host(loss)))
            params = {k: params[k] - lr * host(grads[k]) for k in params}
        return params, losses, (time.perf_counter() - start) / steps

    cpu_params, cpu_losses, cpu_step = train("cpu")
    gpu_params, gpu_losses, gpu_step = train("cuda")
    worst = max(float(np.max(np.abs(gpu_params[k] - cpu_params[k]))) for k in cpu_params)
    ok = np.allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-5) and worst < 1e-3
    return {
        "ok": bool(ok),
        "losses_cpu": cpu_losses[-3:],
        "losses_cuda": gpu_losses[-3:],
        "max_param_difference": worst,
        "step_seconds_host_loop": {"cpu": cpu_step, "cuda": gpu_step},
    }


def step_foreign() -> dict[str, Any]:
    import importlib.util

    from numba import cuda

    import tessc as ts

    fn = ts.jit(lambda a, b: (a * b + 1.0).relu().sum(dim=0), target="cuda")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    want = np.maximum(a * b + 1.0, 0).sum(axis=0)
    seen: dict[str, Any] = {}
    seen["numba"] = bool(
        np.allclose(host(fn(cuda.to_device(a), cuda.to_device(b))), want, rtol=1e-5)
    )
    if not SIMULATE and importlib.util.find_spec("cupy") is not None:
        import cupy

        got = fn(cupy.asarray(a), cupy.asarray(b))
        seen["cupy"] = bool(np.allclose(host(got), want, rtol=1e-5))
    if not SIMULATE and importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            got = fn(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
            seen["torch"] = bool(np.allclose(host(got), want, rtol=1e-5))
    return {"ok": all(seen.values()), "inputs_accepted": seen}


CACHE_CHILD = textwrap.dedent("""
    import time, numpy as np, tessc as ts
    f = ts.jit(lambda x, w: (x @ w).relu().sum(dim=1), target="cuda")
    start = time.perf_counter()
    f(np.ones((40, 33), np.float32), np.ones((33, 17), np.float32))
    print("FIRST_CALL", time.perf_counter() - start)
""")


def step_cache() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(child_environment(), TESSC_CACHE_DIR=cache, TESSC_TIMING="1")
        runs = []
        for _ in range(2):
            run = run_in_repo([sys.executable, "-c", CACHE_CHILD], LIMITS["cache"] / 2 - 2, env)
            first = re.search(r"FIRST_CALL ([\d.]+)", run.stdout)
            runs.append(
                {
                    "rc": run.returncode,
                    "ran_passes": " passes" in run.stderr + run.stdout,
                    "first_call_s": float(first.group(1)) if first else None,
                }
            )
    cold, warm = runs
    ok = cold["rc"] == 0 and warm["rc"] == 0 and cold["ran_passes"] and not warm["ran_passes"]
    return {"ok": ok, "cold": cold, "warm": warm}


STEPS: dict[str, Callable[[], dict[str, Any]]] = {
    "probe": step_probe,
    "tests": step_tests,
    "bench": step_bench,
    "repeat": step_repeat,
    "mlp": step_mlp,
    "foreign": step_foreign,
    "cache": step_cache,
}


# -- the driver ------------------------------------------------------------------------


def run_step(name: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        child = run_in_repo(
            [sys.executable, str(Path(__file__).resolve()), "--step", name], LIMITS[name]
        )
    except subprocess.TimeoutExpired:
        return {
            "ok": False,
            "error": f"timed out after {LIMITS[name]} s",
            "seconds": round(time.perf_counter() - start, 1),
        }
    found = [line for line in child.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if found:
        result = json.loads(found[-1][len(RESULT_TAG) :])
    else:
        tail = (child.stdout + child.stderr).strip().splitlines()[-15:]
        result = {"ok": False, "error": f"exit status {child.returncode}", "tail": tail}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def markdown(results: dict[str, dict[str, Any]], total: float) -> str:
    probe = results.get("probe", {})
    where = "Numba's CUDA simulator (dry run)" if SIMULATE else probe.get("device", "unknown")
    lines = [
        f"# tessc GPU check: {where}",
        "",
        f"{sum(r.get('ok', False) for r in results.values())}/{len(results)} steps held, "
        f"{total:.0f} s in all.",
        "",
        "| step | held | seconds |",
        "| --- | --- | ---: |",
    ]
    for name, result in results.items():
        lines.append(f"| {name} | {'yes' if result.get('ok') else 'NO'} | {result['seconds']} |")
    for name, result in results.items():
        details = {k: v for k, v in result.items() if k not in ("ok", "seconds")}
        lines += ["", f"## {name}", "", "```", json.dumps(details, indent=1, default=str), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check-out")))
    parser.add_argument("--step", choices=sorted(STEPS), help="run one step in this process")
    parser.add_argument("--only", nargs="+", choices=list(STEPS), default=list(STEPS))
    options = parser.parse_args()
    if options.step:
        try:
            emit(STEPS[options.step]())
        except Exception as error:  # noqa: BLE001 - the verdict is the report
            emit({"ok": False, "error": f"{type(error).__name__}: {error}"})
        return 0
    start = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for name in options.only:
        results[name] = run_step(name)
        print(
            f"gpu_check: {name}: {'held' if results[name]['ok'] else 'FAILED'} "
            f"({results[name]['seconds']} s)",
            flush=True,
        )
    total = time.perf_counter() - start
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "gpu-check.json").write_text(
        json.dumps(
            {"simulated": SIMULATE, "seconds": total, "steps": results}, indent=1, default=str
        )
    )
    (options.out / "gpu-check.md").write_text(markdown(results, total))
    print(f"gpu_check: summary in {options.out / 'gpu-check.md'}")
    return 0 if all(r.get("ok") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
