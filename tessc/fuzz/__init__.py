"""
tessc's fuzzers (`python -m tessc.fuzz --help`).

- `programs`: random `tess` programs (`tessc.fuzz.programs`) run at every compiling
  pipeline against the NumPy reference interpreter, and, for every `--grad-every`-th one
  (float64, differentiable), `tess-autodiff`'s gradients against central differences
  (`tessc.fuzz.check`); a failure is shrunk and saved as a `.mlir` under
  `tests/regressions/`, which the test suite replays. `--generator rows`: matmuls of few
  rows and their row epilogues (`tessc.fuzz.rows`); `--forced`: also at `cpu` with the
  loop passes' size gates open.
- `mutate`: byte, token and syntax-preserving mutations of `.mlir` and `.tess` inputs fed
  to `tessc-opt` under a CPU-time limit, every outcome classified (`tessc.fuzz.mutate`).
- `ci`: a small fixed budget of both with fixed seeds (about a minute).
"""
