"""
The one `Context` every tessc tool and test parses in: all of xDSL's dialects plus tessc's
(`tess`, `kernel` for kernel boundaries, `micro` for register-tile micro-kernels).

Dialects are registered lazily (a name and a loader), so building a context imports nothing
but the loader table; a dialect's module is imported the first time IR names it.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.ir import Dialect


def _load_tess() -> Dialect:
    from tessc.dialects.tess import Tess

    return Tess


def _load_kernel() -> Dialect:
    from tessc.dialects.kernel import Kernel

    return Kernel


def _load_micro() -> Dialect:
    from tessc.dialects.micro import Micro

    return Micro


def _load_gpu() -> Dialect:
    from tessc.dialects.gpu_func import GPU

    return GPU


def register_tess_dialects(ctx: Context) -> None:
    """Add tessc's own dialects to `ctx`, and the patches of xDSL that tessc's IR needs
    (`tessc.xdsl_patches`). `register_dialects` registers these and xDSL's."""
    from tessc import xdsl_patches

    xdsl_patches.apply()
    ctx.register_dialect("tess", _load_tess)
    ctx.register_dialect("kernel", _load_kernel)
    ctx.register_dialect("micro", _load_micro)


def register_dialects(ctx: Context) -> None:
    """Register every xDSL dialect and tessc's in `ctx` (each loaded on first use). The
    `gpu` dialect is xDSL's with upstream MLIR's `gpu.func` and `#gpu.address_space`
    (`tessc.dialects.gpu_func`)."""
    for name, loader in {**get_all_dialects(), "gpu": _load_gpu}.items():
        ctx.register_dialect(name, loader)
    register_tess_dialects(ctx)


def make_context(*, allow_unregistered: bool = False) -> Context:
    """A fresh context with every xDSL dialect and tessc's registered (`register_dialects`)."""
    ctx = Context(allow_unregistered=allow_unregistered)
    register_dialects(ctx)
    return ctx


__all__ = ["make_context", "register_dialects", "register_tess_dialects"]
