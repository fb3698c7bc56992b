#!/usr/bin/env bash
# Builds spillway-bench in release mode and runs both benchmarks with their default settings,
# after printing the machine they run on. Tables (Markdown) go to stdout, progress to stderr.
#
#   scripts/bench.sh                 # everything, defaults (about 15 s on 2 cores)
#   scripts/bench.sh > bench.md      # keep the tables
#
# Extra options for a subcommand go in COLLECTIVES_ARGS / PAGERANK_ARGS, e.g.
#   PAGERANK_ARGS="--scale 20" scripts/bench.sh
# SPILLWAY_BENCH_BIN=path runs an already built binary instead of building one.
set -euo pipefail

cd "$(dirname "$0")/.."

if [[ -n "${SPILLWAY_BENCH_BIN:-}" ]]; then
    bin=$SPILLWAY_BENCH_BIN
else
    cargo build --release -p spillway-bench >&2
    bin=target/release/spillway-bench
fi

# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
echo

echo "\$ spillway-bench collectives ${COLLECTIVES_ARGS:-}"
echo
# shellcheck disable=SC2086 # word splitting of the extra arguments is intended
"$bin" collectives ${COLLECTIVES_ARGS:-}
echo "\$ spillway-bench pagerank ${PAGERANK_ARGS:-}"
echo
# shellcheck disable=SC2086
"$bin" pagerank ${PAGERANK_ARGS:-}
