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


def register_tess_dialects(ctx: Context) -> None:
    """Add tessc's own dialects to `ctx` (for drivers that already have xDSL's), and the
    patches of xDSL that tessc's IR needs (`tessc.xdsl_patches`)."""
    from tessc import xdsl_patches

    xdsl_patches.apply()
    ctx.register_dialect("tess", _load_tess)
    ctx.register_dialect("kernel", _load_kernel)
    ctx.register_dialect("micro", _load_micro)
    from tessc.dialects.gpu_memory import AddressSpaceAttr

    ctx.load_attr_or_type(AddressSpaceAttr)  # `#gpu.address_space`, which xDSL's gpu lacks


def make_context(*, allow_unregistered: bool = False) -> Context:
    """A fresh context with every xDSL dialect, `tess` and `kernel` registered (each loaded
    on first use)."""
    ctx = Context(allow_unregistered=allow_unregistered)
    for name, loader in get_all_dialects().items():
        ctx.register_dialect(name, loader)
    register_tess_dialects(ctx)
    return ctx


__all__ = ["make_context", "register_tess_dialects"]
