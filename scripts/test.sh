#!/usr/bin/env bash
# Runs every check of the project: formatting, lints, unit/SPMD/CLI tests (with Python
# reference checks against networkx, scipy and scikit-learn), doc tests and the examples.
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${SPILLWAY_VENV:-.venv}"
if [ -z "${SPILLWAY_PYTHON:-}" ]; then
    if ! "$venv/bin/python" -c "import numpy, scipy, networkx, sklearn" 2>/dev/null; then
        echo "== setting up the Python reference environment in $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check numpy scipy networkx scikit-learn
    fi
    export SPILLWAY_PYTHON="$PWD/$venv/bin/python"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --profile ci --no-fail-fast
else
    cargo test --workspace --no-fail-fast
fi
echo "== doc tests"
cargo test --workspace --doc --quiet
echo "== examples"
for ex in hello pagerank kmeans; do
    cargo run --quiet --release -p spillway --example "$ex"
done
echo "== all checks passed"
