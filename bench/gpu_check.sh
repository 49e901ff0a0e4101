#!/usr/bin/env bash
# The GPU check on a lent GPU machine (no network, no xdsl/lark there): installs the wheels
# that ../shared/gpu carries into a scratch site, then runs bench/gpu_check.py, whose summary
# lands in $OUT (the device tool's output folder) or gpu-check-out/.
#
#   cp -r ../shared/gpu gpu-check && echo gpu-check >> .git/info/exclude   # here, once
#   bash bench/gpu_check.sh                                                # there (carry gpu-check)
#
# SIMULATE=1 runs the same steps in Numba's CUDA simulator (the dry run).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export PY="${PY:-python3}"
if ! "$PY" -c 'import xdsl, lark, tessc' 2>/dev/null; then
    export TESSC_SRC="$repo" HERE="$repo/gpu-check" SITE="${TMPDIR:-/tmp}/tessc-gpu-site/site"
    [[ -d "$HERE" ]] || { echo "gpu_check.sh: tessc does not import and gpu-check/ is missing (see the header)" >&2; exit 2; }
    export PYTHONPATH="$SITE:$HERE/pathhook${PYTHONPATH:+:$PYTHONPATH}"
    bash "$HERE/setup_site.sh"
fi
exec "$PY" bench/gpu_check.py --out "${OUT:-gpu-check-out}" "$@"
