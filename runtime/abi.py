"""
The numbers and names both sides of the codegen -> runtime boundary must agree on.

Codegen (`tessc.lowering`) writes them into the modules it generates and lays out the
workspace by them; the runtime reads and allocates by them. Plain constants, no imports:
the one module of `tessc.runtime` that `tessc.lowering` may import.
"""

ALIGNMENT = 64
"""Byte alignment of a host's workspace and of every buffer placed in it (and of the
arrays `tessc.arena` packs): a cache line, an AVX-512 vector."""

HUGE_PAGE = 1 << 21
"""Kernel scratch of at least this many bytes starts on a 2 MiB boundary, advised into
transparent huge pages (`madvise(MADV_HUGEPAGE)`, as NumPy does for its own arrays of 4
MiB and more; this machine's THP setting is `madvise`). On 4 KiB pages a packed panel of
B lands on L2 sets by its physical pages' addresses, some sets holding more of it than
they have ways: `tess-pack-matmul` at 2048 f32 ran 3% faster (one thread, same run).
`tess-hoist-scratch` puts such scratch at multiples of it in a host's workspace, and the
runtime starts a workspace of this size or more on a multiple of it."""

SIGNATURES = "TESSC_SIGNATURES"
"""The generated module's dict of host signatures (format: `tessc.runtime.signatures`)."""

TARGET = "TESSC_TARGET"
"""The generated module's target, when not the CPU: `CUDA_TARGET`."""

CPU_TARGET = "cpu"
CUDA_TARGET = "cuda"

# The keys of one `SIGNATURES` entry (`tessc.runtime.signatures` documents each).
FUNCTION = "function"
INPUTS = "inputs"
INPUT_NAMES = "input_names"
OUTPUTS = "outputs"
OUTPUT_NAMES = "output_names"
WORKSPACE_BYTES = "workspace_bytes"
OUTPUT_ALIASES = "output_aliases"
ARENAS = "arenas"
MEMBER_TABLES = "member_tables"

KERNEL_BITS_DTYPES = ("bfloat16", "float16")
"""Array dtypes Numba has no type for: a signature names them as the caller holds them, and
the compiled code takes the arrays as their bits (`uint16` views, no copy)."""
