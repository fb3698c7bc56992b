#!/usr/bin/env bash
# Benchmarks of the memory-constrained data structures (crate spillway-structures), printed as
# Markdown after the machine header:
#
#   1. error-bounded compression: spillway compress (the default predictive method, and
#      SBD1/SBD2/RBD variants) against zfp
#      (fixed accuracy, zfpy) and SZ3 (absolute bound, pysz) at the same bounds, on grid data
#      shipped in PyPI packages (matplotlib's sample DEM, eofs's geopotential height), every
#      output decompressed and checked (scripts/bench_structures.py);
#   2. dynamic graphs: spillway-bench dyngraph, an R-MAT stream of 2^24 edges into LL, BCSR,
#      DAA, DIAA and DCAA against a CSR rebuilt from scratch.
#
#   scripts/bench_structures.sh > structures.md
#
# Environment:
#   SPILLWAY_VENV=.venv          Python environment (created, and numpy zfpy pysz scipy
#                                matplotlib eofs installed into it, when missing)
#   DYNGRAPH_ARGS="--scale 20"   extra options of `spillway-bench dyngraph`
#   SKIP_COMPRESSION=1 / SKIP_DYNGRAPH=1   run one part only
#   COMPRESS_ARGS="--predict-only"          extra options of bench_structures.py (--reps N,
#                                           --predict-only: only the default method against
#                                           SZ3 and zfp, real grids and ~80 MB grids)
set -euo pipefail

cd "$(dirname "$0")/.."

venv=${SPILLWAY_VENV:-.venv}
if [[ -z "${SKIP_COMPRESSION:-}" ]]; then
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "bench_structures: creating the Python environment $venv" >&2
        python3 -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c "import numpy, zfpy, pysz, scipy, matplotlib, eofs" 2>/dev/null; then
        echo "bench_structures: installing numpy zfpy pysz scipy matplotlib eofs into $venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check numpy zfpy pysz scipy matplotlib eofs >&2
    fi
fi

cargo build --release -p spillway-cli -p spillway-bench >&2
target=${CARGO_TARGET_DIR:-target}

# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
echo

if [[ -z "${SKIP_COMPRESSION:-}" ]]; then
    echo "\$ scripts/bench_structures.py $target/release/spillway ${COMPRESS_ARGS:-}"
    echo
    # shellcheck disable=SC2086 # word splitting of the extra arguments is intended
    "$venv/bin/python" scripts/bench_structures.py "$target/release/spillway" ${COMPRESS_ARGS:-}
fi
if [[ -z "${SKIP_DYNGRAPH:-}" ]]; then
    echo "\$ spillway-bench dyngraph ${DYNGRAPH_ARGS:-}"
    echo
    # shellcheck disable=SC2086 # word splitting of the extra arguments is intended
    "$target/release/spillway-bench" dyngraph ${DYNGRAPH_ARGS:-}
fi
