"""`tessc.linalg`: NumPy's `linalg` functions on traced Tensors (`norm`)."""

from __future__ import annotations

from tessc.frontend.vocabulary import norm

__all__ = ["norm"]
