"""
The cuda target's convolutions (`tess-gpu-conv`) on a GPU against PyTorch CUDA (cuDNN).

- C1: `relu(conv2d(x, w, b, padding=1))` at a ResNet layer's shape, N=8, 64 -> 64
  channels, 56 x 56, 3 x 3, f32 (tessc: the pad kernel, then one staged conv kernel with
  the bias and relu fused);
- C2: its backward, the input and weight gradients of `sum(conv2d(x, w, padding=1) * g)`.

Inputs live on the device before timing (PyTorch views the same memory through
`__cuda_array_interface__`). Results are checked against PyTorch first; times are the
median over `--rounds` of `--repeat` calls, with GFLOP/s (2 * N * F * C * K * H * W flops
per conv, twice that for the two gradients). Without a CUDA GPU it says so and exits 0;
`--simulate` (with `NUMBA_ENABLE_CUDASIM=1`) runs toy sizes against the reference
interpreter: it checks the script, its times mean nothing. No GPU figures are recorded:
this machine has none, so the staged kernel's speed is untested on hardware.

    python bench/bench_cuda_conv.py [--repeat 20] [--rounds 5] [--simulate]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_cuda import skip, timed  # bench/ is sys.path[0]
from machine import describe_machine

FULL = {"n": 8, "c": 64, "f": 64, "hw": 56, "k": 3}
TOY = {"n": 1, "c": 3, "f": 4, "hw": 6, "k": 3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
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
    torch = None
    if not simulated:
        if importlib.util.find_spec("torch") is None:
            skip("PyTorch with CUDA is not installed to compare against")
        import torch

        if not torch.cuda.is_available():
            skip("PyTorch has no CUDA here")
    run(TOY if simulated else FULL, torch, args, cuda.synchronize)


def run(sizes: dict[str, int], torch: Any, args: argparse.Namespace, sync: Callable) -> None:
    from numba import cuda

    import tessc as ts

    n, c, f, hw, k = (sizes[key] for key in ("n", "c", "f", "hw", "k"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((f, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    b = rng.standard_normal(f).astype(np.float32)
    g = rng.standard_normal((n, f, hw, hw)).astype(np.float32)

    def forward(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.conv2d(x, w, b, padding=1).relu()

    backward = ts.grad(lambda x, w, g: (ts.nn.conv2d(x, w, padding=1) * g).sum(), argnums=(0, 1))
    fwd, bwd = ts.jit(forward, target="cuda"), ts.jit(backward, target="cuda")
    dx, dw, db, dg = (cuda.to_device(a) for a in (x, w, b, g))

    def host(a: Any) -> np.ndarray:
        return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)

    if torch is None:  # the simulator: against the reference interpreter
        want_y = ts.jit(forward, target="reference")(x, w, b)
        want_grads = ts.jit(backward, target="reference")(x, w, g)
    else:
        tx, tw, tb, tg = (torch.as_tensor(a, device="cuda") for a in (dx, dw, db, dg))
        conv = torch.nn.functional.conv2d
        want_y = torch.relu(conv(tx, tw, tb, padding=1)).cpu().numpy()
        tx_, tw_ = tx.clone().requires_grad_(), tw.clone().requires_grad_()
        (conv(tx_, tw_, padding=1) * tg).sum().backward()
        want_grads = (tx_.grad.cpu().numpy(), tw_.grad.cpu().numpy())
    np.testing.assert_allclose(host(fwd(dx, dw, db)), want_y, rtol=1e-3, atol=1e-3)
    for got, want in zip(bwd(dx, dw, dg), want_grads, strict=True):
        np.testing.assert_allclose(host(got), np.asarray(want), rtol=1e-3, atol=1e-2)
    if torch is None:
        print(f"C1, C2 {sizes}: ok (simulator; no times)")
        return
    flops = 2 * n * f * c * k * k * hw * hw

    def torch_forward() -> Any:
        return torch.relu(conv(tx, tw, tb, padding=1))

    def torch_backward() -> Any:
        return torch.autograd.grad((conv(tx_, tw_, padding=1) * tg).sum(), (tx_, tw_))

    for title, mine, theirs, work in (
        ("C1 conv + bias + relu", lambda: fwd(dx, dw, db), torch_forward, flops),
        ("C2 input + weight gradients", lambda: bwd(dx, dw, dg), torch_backward, 2 * flops),
    ):
        times = timed(
            {"tessc cuda": mine, "torch cuda (cuDNN)": theirs}, args.repeat, args.rounds, sync
        )
        print(f"\n{title} {sizes}")
        for name, ms in times.items():
            print(f"  {name:<22} {ms:9.3f} ms  {work / ms / 1e6:8.1f} GFLOP/s")


if __name__ == "__main__":
    main()
