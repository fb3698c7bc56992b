#!/usr/bin/env bash
# Scale in the number of ranks per node, and peak RSS against the memory budget (issue 8).
#
#   scripts/bench_scale.sh > scale.md      # about 10 minutes on 2 cores
#
# Part 1: `spillway-bench scale` (empty-work jobs, PageRank on a 2-vertex graph, a barrier-only
# job of 10,000 ranks), each point in its own process.
# Part 2: peak RSS (VmHWM, from the report) of PageRank on R-MAT scale 22 (generated, and the
# same graph read from an edge-list file) and of K-means on blobs of 4x the budget, at budgets
# of 16M, 64M and 256M, 32 ranks, the default (dynamic) number of running ranks.
# SCALE=20 for a quicker, smaller run of part 2.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p spillway-cli -p spillway-bench >&2
bin=target/release
# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
echo
echo "\$ spillway-bench scale"
echo
"$bin/spillway-bench" scale
echo
scale=${SCALE:-22}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/spillway" gen rmat --scale "$scale" --edge-factor 16 --seed 5 --out "$tmp/rmat.txt" >&2
echo "## Peak RSS against the memory budget (32 ranks, running = dynamic)"
echo
echo "| job | input | budget | rank data | peak RSS | RSS - budget | limit (budget + 64 MiB) | load | compute |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
row() { # job input budget json
    python3 - "$@" <<'PY'
import json, sys
job, inp, budget, text = sys.argv[1:5]
d = json.loads(text)
mib = lambda b: b / 2**20
b = int(budget[:-1])
rss = mib(d["peak_rss"])
print(f"| {job} | {inp} | {budget} | {mib(d['peak_storage_backed_bytes']):.0f} MiB | {rss:.1f} MiB | "
      f"{rss - b:+.1f} MiB | {b + 64} MiB{' ✓' if rss <= b + 64 else ' ✗'} | "
      f"{d['load_seconds']:.1f} s | {d['compute_seconds']:.1f} s |")
PY
}
for budget in 16M 64M 256M; do
    json=$("$bin/spillway" run pagerank --generate "rmat:$scale:16:5" --ranks 32 --iterations 3 \
        --mem-budget "$budget" --json)
    row pagerank "rmat:$scale:16 generated" "$budget" "$json"
    json=$("$bin/spillway" run pagerank --input "$tmp/rmat.txt" --ranks 32 --iterations 3 \
        --mem-budget "$budget" --json)
    row pagerank "rmat:$scale:16 edge list" "$budget" "$json"
done
for spec in "16M blobs:1048576:8:8" "64M blobs:4194304:8:8" "256M blobs:4194304:32:16"; do
    set -- $spec
    json=$("$bin/spillway" run kmeans --generate "$2" --k 8 --ranks 32 --iterations 5 \
        --mem-budget "$1" --json)
    row kmeans "$2" "$1" "$json"
done
