#!/usr/bin/env bash
# spillway against the tools people use for the same jobs, on the same generated files in one
# run, printed as Markdown after the machine header (scripts/bench_peers.py does the timing and
# checks the answers before printing any time):
#
#   PageRank on R-MAT (default scale 20, edge factor 16), 20 iterations, against scipy's CSR
#   power iteration: per iteration and including set-up;
#   K-means lloyd on 1M x 32 points of one Gaussian (the blobs generator with one blob: no
#   cluster of the first-k start empties, so scikit-learn's relocation of empty clusters, which
#   spillway does not do, never applies), k = 100, first-k initial centres, against
#   scikit-learn (float64 and float32, all cores).
#
#   scripts/bench_peers.sh > peers.md
#
# Environment:
#   SPILLWAY_VENV=.venv     Python environment (created, numpy scipy scikit-learn installed)
#   SCALE=20 EDGE_FACTOR=16 POINTS=1000000 DIM=32 BLOBS=1 K=100   the inputs
#   RANKS="1 2" REPS=3      rank counts of spillway; repetitions (best kept)
#   PEERS_DIR=DIR           where the inputs go (default: a temporary directory, removed)
#   ONLY=pagerank|kmeans    run one part only
set -euo pipefail

cd "$(dirname "$0")/.."

venv=${SPILLWAY_VENV:-.venv}
if [[ ! -x "$venv/bin/python" ]]; then
    echo "bench_peers: creating the Python environment $venv" >&2
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import numpy, scipy, sklearn, threadpoolctl" 2>/dev/null; then
    echo "bench_peers: installing numpy scipy scikit-learn into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check numpy scipy scikit-learn >&2
fi

cargo build --release -p spillway-cli >&2
bin=${CARGO_TARGET_DIR:-target}/release/spillway

scale=${SCALE:-20}
edge_factor=${EDGE_FACTOR:-16}
points=${POINTS:-1000000}
dim=${DIM:-32}
blobs=${BLOBS:-1}
k=${K:-100}
if [[ -n "${PEERS_DIR:-}" ]]; then
    dir=$PEERS_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi
graph="$dir/rmat-$scale-$edge_factor.txt"
pts="$dir/blobs-$points-$dim-$blobs.csv"
[[ -s "$graph" ]] || "$bin" gen rmat --scale "$scale" --edge-factor "$edge_factor" --out "$graph"
[[ -s "$pts" ]] || "$bin" gen blobs --points "$points" --dim "$dim" --k "$blobs" --out "$pts"

# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
echo
only=()
[[ -n "${ONLY:-}" ]] && only=(--only "$ONLY")
# shellcheck disable=SC2086 # RANKS is a list
echo "\$ scripts/bench_peers.py --graph rmat:$scale:$edge_factor --points blobs:$points:$dim:$blobs --k $k --ranks ${RANKS:-1 2} ${only[*]}"
echo
# shellcheck disable=SC2086
"$venv/bin/python" scripts/bench_peers.py --spillway "$bin" --graph "$graph" \
    --graph-name "R-MAT scale $scale, edge factor $edge_factor" --points "$pts" --k "$k" \
    --ranks ${RANKS:-1 2} --reps "${REPS:-3}" --workdir "$dir" "${only[@]}"
