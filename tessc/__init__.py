"""tessc: a small multi-level tensor compiler on xDSL, lowering to Numba kernels."""
