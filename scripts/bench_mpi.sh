#!/usr/bin/env bash
# Compares spillway's `bcast` and `allreduce` on the MPI backend with the MPI library's own
# MPI_Bcast and MPI_Allreduce (Open MPI, through mpi4py), on NP processes of this machine, timed
# the same way: per repetition barrier, start, operation, barrier, stop on rank 0; median and
# minimum of the repetitions; one checked, untimed warm-up (see crates/bench/src/collectives.rs
# and scripts/bench_mpi_ref.py). Both run with Open MPI's default settings, and both use
# buffers backed by transparent huge pages from 4 MiB on (numpy asks for them for its arrays;
# spillway-bench does the same when it measures against MPI), which makes the kernel's
# single-copy transfers between processes 10-30% faster at 16-64 MiB on this machine.
#
#   scripts/bench_mpi.sh                    # builds, runs, prints Markdown (a few minutes)
#   scripts/bench_mpi.sh > bench_mpi.md
#
# Environment:
#   NP=2                            MPI processes (one spillway node each)
#   SIZES=1K,16K,256K,1M,4M,16M,64M,256M
#   REPS=45                         below 4 MiB; max(3, REPS/3) from 4 MiB, max(3, REPS/9) from 64 MiB
#   EXTRA_RANKS=4                   spillway rank counts measured besides NP (one rank per
#                                   process); comma-separated, empty for none
#   SPILLWAY_BENCH_BIN=path         an already built spillway-bench (with --features mpi)
#   SPILLWAY_VENV=.venv             Python environment for the reference (numpy, mpi4py are
#                                   installed into it when missing)
#   MPIRUN=mpirun.openmpi           launcher (default: mpirun.openmpi if present, else mpirun)
#   MPIRUN_ARGS=                    extra launcher options for both runs (default none; e.g.
#                                   "--bind-to none": by default Open MPI binds each of 2
#                                   processes to one core, so spillway's rank threads and its
#                                   progress thread share that core)
# Tables go to stdout, progress and build output to stderr.
set -euo pipefail

cd "$(dirname "$0")/.."

np=${NP:-2}
sizes=${SIZES:-1K,16K,256K,1M,4M,16M,64M,256M}
reps=${REPS:-45}
extra=${EXTRA_RANKS-4}
venv=${SPILLWAY_VENV:-.venv}
read -r -a mpirun_args <<<"${MPIRUN_ARGS:-}"
if [[ -z "${MPIRUN:-}" ]]; then
    if command -v mpirun.openmpi >/dev/null; then MPIRUN=mpirun.openmpi; else MPIRUN=mpirun; fi
fi

# Open MPI refuses to run as root without these; oversubscription only matters when NP or the
# ranks exceed the cores. Nothing else of Open MPI's configuration is changed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [[ -n "${SPILLWAY_BENCH_BIN:-}" ]]; then
    bin=$SPILLWAY_BENCH_BIN
else
    cargo build --release -p spillway-bench --features mpi >&2
    bin=target/release/spillway-bench
fi

# The Python reference: numpy and mpi4py (built against the system MPI's mpicc when no wheel
# fits, which needs the Python headers).
if [[ ! -x "$venv/bin/python" ]]; then
    echo "bench_mpi: creating the Python environment $venv" >&2
    python3 -m venv "$venv"
fi
py=$venv/bin/python
if ! "$py" -c "import numpy" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check numpy >&2
fi
if ! "$py" -c "import mpi4py" 2>/dev/null; then
    include=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    if [[ ! -f "$include/Python.h" ]]; then
        if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
            echo "bench_mpi: Python headers missing ($include/Python.h): apt-get install python3-dev" >&2
            apt-get install -y python3-dev >&2
        else
            echo "bench_mpi: warning: $include/Python.h is missing; if mpi4py must be built" \
                "from source, install the Python headers (python3-dev) first" >&2
        fi
    fi
    echo "bench_mpi: installing mpi4py into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check mpi4py >&2
fi

# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
if [[ -n "${SPILLWAY_BENCH_BIN:-}" ]]; then
    echo "- spillway-bench: $bin (SPILLWAY_BENCH_BIN, built elsewhere: the git line above may not describe it)"
fi
echo "- MPI: $("$MPIRUN" --version 2>&1 | head -n1) ($MPIRUN), default settings${MPIRUN_ARGS:+ except $MPIRUN_ARGS}; $np processes"
echo "- Python reference: $("$py" -c 'import sys, numpy, mpi4py; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, mpi4py {mpi4py.__version__}")')"
echo

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ranks=$np${extra:+,$extra}
spill_args=(collectives --backend mpi --ops bcast,allreduce --sizes "$sizes" --reps "$reps"
    --ranks "$ranks" --json "$tmp/spillway.jsonl")
echo "\$ $MPIRUN ${MPIRUN_ARGS:+$MPIRUN_ARGS }-np $np spillway-bench ${spill_args[*]:0:11}"
echo
"$MPIRUN" "${mpirun_args[@]}" -np "$np" "$bin" "${spill_args[@]}"

ref_args=(scripts/bench_mpi_ref.py --sizes "$sizes" --reps "$reps" --ops bcast,allreduce
    --json "$tmp/mpi.jsonl")
echo "\$ $MPIRUN ${MPIRUN_ARGS:+$MPIRUN_ARGS }-np $np python ${ref_args[*]:0:7}"
echo
"$MPIRUN" "${mpirun_args[@]}" -np "$np" "$py" "${ref_args[@]}"

"$py" scripts/bench_mpi_ref.py --compare "$np" "$tmp/spillway.jsonl" "$tmp/mpi.jsonl"
