"""
Which attention shapes the `cuda` pipeline's flash kernels take (shared, not a pass):
`tess-decompose-attention{fallback-only}` decomposes the others before `tess-to-linalg`,
and `tess-gpu-attention` maps the rest, so both read the rule here.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_FUSED_DEPTH = 64
"""The widest head dim (E of q and k, or of v) a flash kernel's thread keeps in registers:
a row's output, `dq`, `dk` and `dv` accumulators are `scf.for` `iter_args`."""


def flash_supported(q: Sequence[int], keys: int, value_depth: int) -> bool:
    """Whether attention of `q` (..., L, E) over `keys` keys with values of `value_depth`
    (0 for a logsumexp alone) runs as flash kernels: head dims of at most `MAX_FUSED_DEPTH`,
    no empty dim (an empty attention is the decomposition's zeros and -inf)."""
    fits = 0 < q[-1] <= MAX_FUSED_DEPTH and value_depth <= MAX_FUSED_DEPTH
    return fits and keys > 0 and all(n > 0 for n in q[:-1])


__all__ = ["MAX_FUSED_DEPTH", "flash_supported"]
