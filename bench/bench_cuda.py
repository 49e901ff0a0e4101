"""
The cuda target on a GPU against CuPy or PyTorch CUDA: W1-W4 with device-resident data.

- W1: the elementwise chain `relu(x*w + b) * sigmoid(x) - 0.5*x` on 2^24 f32 (one fused
  kernel, grid-stride);
- W2: the seed's zip+reduce, `(N,K,1) * (1,K,M)` summed over K, N=K=M=512 f32 (one kernel,
  no (N,K,M) intermediate) — CuPy/PyTorch run it as a matmul and as broadcast+sum;
- W3: an MLP layer, `relu(x @ w + b)` at (4096, 1024) @ (1024, 1024) f32 (shared-memory
  tiles, the epilogue in the same kernel) against cuBLAS + an elementwise kernel;
- W4: an Adagrad step over 200 parameters of 1e3-2e5 floats (`tess-fuse-horizontal`: one
  launch over arenas, donated, in place) against a per-tensor loop and
  `torch.optim.Adagrad(fused=True)`.

All inputs live on the device before timing (`numba.cuda.to_device`; CuPy/PyTorch get
views of the same memory through `__cuda_array_interface__`), so no contender pays a
host<->device copy; tessc returns device arrays. Every contender is checked against NumPy
first. A time is the median over `--rounds` of `--repeat` calls, each round ended by a
device synchronisation; ratios are tessc's time over the other's (below 1: tessc faster).

    python bench/bench_cuda.py [--repeat 20] [--rounds 5] [--only W1 W3]

Without a CUDA GPU (or without numba-cuda) it prints that it skipped and exits 0.
`--simulate` runs W1-W4 at toy sizes in Numba's CUDA simulator (set
`NUMBA_ENABLE_CUDASIM=1`): it checks the script and the results, its times mean nothing.
No figures from a GPU are recorded here yet: this machine has none.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SIZES = {  # workload -> sizes: full (GPU) and toy (--simulate)
    "W1": ({"n": 1 << 24}, {"n": 1001}),
    "W2": ({"n": 512}, {"n": 9}),
    "W3": ({"m": 4096, "k": 1024, "n": 1024}, {"m": 9, "k": 33, "n": 17}),
    "W4": ({"params": 200, "low": 1_000, "high": 200_000}, {"params": 3, "low": 5, "high": 40}),
}
LR, LR_DECAY, WEIGHT_DECAY, EPS = 0.01, 1e-3, 0.01, 1e-10


from machine import describe_machine  # noqa: E402  (bench/ is sys.path[0])


def skip(reason: str) -> None:
    print(f"bench_cuda: skipped — {reason}. Nothing was measured.")
    sys.exit(0)


def gpu_library() -> tuple[str, Any] | None:
    """CuPy, else PyTorch with CUDA, else None."""
    if importlib.util.find_spec("cupy") is not None:
        import cupy

        return "cupy", cupy
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            return "torch", torch
    return None


def timed(
    contenders: dict[str, Callable[[], object]], repeat: int, rounds: int, sync: Callable
) -> dict[str, float]:
    """Median ms per call of each contender; rounds alternate the contenders."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, function in contenders.items():
            function()
            sync()
            start = time.perf_counter()
            for _ in range(repeat):
                function()
            sync()
            times[name].append((time.perf_counter() - start) * 1e3 / repeat)
    return {name: statistics.median(values) for name, values in times.items()}


def report(title: str, times: dict[str, float]) -> None:
    tessc_ms = times["tessc cuda"]
    print(f"\n{title}")
    for name, ms in times.items():
        print(f"  {name:<34} {ms:9.3f} ms   tessc / it {tessc_ms / ms:5.2f}x")


def close(got: Any, want: np.ndarray, rtol: float = 1e-4) -> None:
    host = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    np.testing.assert_allclose(host, want, rtol=rtol, atol=rtol)


class Library:
    """The comparison library's view of a device array and its few ops we need."""

    def __init__(self, name: str, module: Any):
        self.name, self.module = name, module

    def view(self, array: Any) -> Any:
        if self.name == "cupy":
            return self.module.asarray(array)
        return self.module.as_tensor(array, device="cuda")

    def host(self, array: Any) -> np.ndarray:
        return self.module.asnumpy(array) if self.name == "cupy" else array.cpu().numpy()

    def relu(self, x: Any) -> Any:
        return self.module.maximum(x, 0) if self.name == "cupy" else self.module.relu(x)

    def sigmoid(self, x: Any) -> Any:
        if self.name == "cupy":
            return 1 / (1 + self.module.exp(-x))
        return self.module.sigmoid(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=sorted(SIZES), default=sorted(SIZES))
    parser.add_argument("--simulate", action="store_true", help="toy sizes in the simulator")
    args = parser.parse_args()
    print(describe_machine())

    if importlib.util.find_spec("numba_cuda") is None:
        skip("numba-cuda is not installed (pip install -e '.[cuda]')")
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    if simulated and not args.simulate:
        skip("NUMBA_ENABLE_CUDASIM=1 is set: the simulator measures nothing (add --simulate)")
    from numba import cuda

    if not simulated and not cuda.is_available():
        skip("no CUDA GPU here (numba.cuda.is_available() is False)")
    library = None
    if not simulated:
        found = gpu_library()
        if found is None:
            skip("neither CuPy nor PyTorch with CUDA is installed to compare against")
        library = Library(*found)
        print(f"GPU: {cuda.get_current_device().name!r}; against {library.name}")
    else:
        print("CUDA simulator, toy sizes: results checked, times meaningless")
    index = 1 if simulated else 0
    sync = cuda.synchronize
    for name in args.only:
        sizes = SIZES[name][index]
        times = WORKLOADS[name](sizes, library, args.repeat if not simulated else 1)
        if simulated:
            print(f"{name}: ok")
            continue
        report(f"{name} {sizes}", timed(times, args.repeat, args.rounds, sync))


# ---------------------------------------------------------------------------------------
# the workloads: each checks every contender, then returns them to time
# ---------------------------------------------------------------------------------------


def w1(sizes: dict, lib: Library | None, _: int) -> dict[str, Callable[[], object]]:
    from numba import cuda

    import tessc as ts

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(sizes["n"]).astype(np.float32) for _ in range(3))
    want = np.maximum(x * w + b, 0) / (1 + np.exp(-x)) - 0.5 * x
    chain = ts.jit(lambda x, w, b: (x * w + b).relu() * x.sigmoid() - 0.5 * x, target="cuda")
    dx, dw, db = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
    close(chain(dx, dw, db), want)
    contenders: dict[str, Callable[[], object]] = {"tessc cuda": lambda: chain(dx, dw, db)}
    if lib is not None:
        lx, lw, lb = lib.view(dx), lib.view(dw), lib.view(db)

        def other() -> Any:
            return lib.relu(lx * lw + lb) * lib.sigmoid(lx) - 0.5 * lx

        close(lib.host(other()), want)
        contenders[f"{lib.name} (one kernel per op)"] = other
    return contenders


def w2(sizes: dict, lib: Library | None, _: int) -> dict[str, Callable[[], object]]:
    from numba import cuda

    import tessc as ts

    n = sizes["n"]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n, 1)).astype(np.float32)
    b = rng.standard_normal((1, n, n)).astype(np.float32)
    want = a[:, :, 0] @ b[0]
    seed = ts.jit(lambda a, b: (a * b).sum(dim=1), target="cuda")
    da, db = cuda.to_device(a), cuda.to_device(b)
    close(seed(da, db), want, rtol=1e-3)
    contenders: dict[str, Callable[[], object]] = {"tessc cuda": lambda: seed(da, db)}
    if lib is not None:
        la, lb = lib.view(da), lib.view(db)
        a2, b2 = la.reshape(n, n), lb.reshape(n, n)
        contenders[f"{lib.name} matmul"] = lambda: a2 @ b2
        if n <= 512:
            contenders[f"{lib.name} broadcast+sum"] = lambda: (la * lb).sum(1)
    return contenders


def w3(sizes: dict, lib: Library | None, _: int) -> dict[str, Callable[[], object]]:
    from numba import cuda

    import tessc as ts

    m, k, n = sizes["m"], sizes["k"], sizes["n"]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    want = np.maximum(x @ w + b, 0)
    layer = ts.jit(lambda x, w, b: (x @ w + b).relu(), target="cuda")
    dx, dw, db = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
    close(layer(dx, dw, db), want, rtol=1e-3)
    contenders: dict[str, Callable[[], object]] = {"tessc cuda": lambda: layer(dx, dw, db)}
    if lib is not None:
        lx, lw, lb = lib.view(dx), lib.view(dw), lib.view(db)
        contenders[f"{lib.name} matmul + bias + relu"] = lambda: lib.relu(lx @ lw + lb)
    return contenders


def w4(sizes: dict, lib: Library | None, _: int) -> dict[str, Callable[[], object]]:
    from numba import cuda

    import tessc as ts

    rng = np.random.default_rng(3)
    counts = np.exp(rng.uniform(np.log(sizes["low"]), np.log(sizes["high"]), sizes["params"]))
    params = [rng.standard_normal(int(c)).astype(np.float32) for c in counts]
    grads = [rng.standard_normal(p.size).astype(np.float32) for p in params]
    states = [np.zeros_like(p) for p in params]

    def adagrad(step: Any, params: list, grads: list, states: list) -> tuple[list, list]:
        clr = LR / (1.0 + (step - 1.0) * LR_DECAY)
        new_params, new_states = [], []
        for p, g, s in zip(params, grads, states, strict=True):
            g = g + WEIGHT_DECAY * p
            s = s + g * g
            new_params.append(p - clr * g / (ts.sqrt(s) + EPS))
            new_states.append(s)
        return new_params, new_states

    def numpy_adagrad(p: np.ndarray, g: np.ndarray, s: np.ndarray) -> tuple:
        g = g + WEIGHT_DECAY * p
        s = s + g * g
        return p - LR * g / (np.sqrt(s) + EPS), s

    step = ts.jit(adagrad, target="cuda", donate_argnums=(1, 3))
    one = np.array(1.0, np.float32)
    dp = [cuda.to_device(p) for p in params]
    dg = [cuda.to_device(g) for g in grads]
    ds = [cuda.to_device(s) for s in states]
    new_p, new_s = step(one, dp, dg, ds)
    for got_p, got_s, p, g, s in zip(new_p, new_s, params, grads, states, strict=True):
        want_p, want_s = numpy_adagrad(p, g, s)
        close(got_p, want_p)
        close(got_s, want_s)
    contenders: dict[str, Callable[[], object]] = {"tessc cuda": lambda: step(one, dp, dg, ds)}
    if lib is not None and lib.name == "torch":
        torch = lib.module
        tp = [torch.nn.Parameter(lib.view(p).clone()) for p in dp]
        for t, g in zip(tp, dg, strict=True):
            t.grad = lib.view(g)
        for fused in (True, False):
            optimizer = torch.optim.Adagrad(
                tp, lr=LR, lr_decay=LR_DECAY, weight_decay=WEIGHT_DECAY, eps=EPS,
                fused=fused, foreach=None if fused else True,
            )  # fmt: skip
            contenders[f"torch Adagrad({'fused' if fused else 'foreach'})"] = optimizer.step
    return contenders


WORKLOADS: dict[str, Callable[..., dict[str, Callable[[], object]]]] = {
    "W1": w1,
    "W2": w2,
    "W3": w3,
    "W4": w4,
}

if __name__ == "__main__":
    main()
