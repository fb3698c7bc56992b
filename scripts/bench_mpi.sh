#!/usr/bin/env bash
# Compares spillway's `bcast` and `allreduce` on the MPI backend with the MPI library's own
# MPI_Bcast and MPI_Allreduce (Open MPI, through mpi4py), on NP processes of this machine, timed
# the same way: per repetition barrier, start, operation, barrier, stop on rank 0; median and
# minimum of the repetitions; one checked, untimed warm-up (see crates/bench/src/collectives.rs
# and scripts/bench_mpi_ref.py). Both run with Open MPI's default settings.
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

cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
echo "## Machine"
echo
echo "- date (UTC): $(date -u +%F)"
echo "- cores (nproc): $(nproc)"
echo "- CPU: ${cpu:-unknown}"
echo "- memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo unknown)"
echo "- rustc: $(rustc --version)"
echo "- git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
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

"$py" - "$np" "$tmp/spillway.jsonl" "$tmp/mpi.jsonl" <<'EOF'
"""Joins the two result files into one comparison table per operation."""
import json
import sys

np_, spill_path, mpi_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt_size(n):
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def fmt_time(s):
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.1f} ns"


spill, ref = load(spill_path), load(mpi_path)
extra = sorted({r["ranks"] for r in spill if "ranks" in r} - {np_})
by = {(r["op"], r.get("ranks"), r["size"]): r for r in spill}
ref_by = {(r["op"], r["size"]): r for r in ref}

print("## spillway (MPI backend) vs Open MPI\n")
print(
    f"{np_} MPI processes. spillway: {np_} ranks, one per process (one spillway node per "
    "process); Open MPI: MPI_Bcast / MPI_Allreduce through mpi4py. Median of the repetitions "
    "(barrier, start, operation, barrier, stop; both implementations use their own barrier); "
    "GB/s = bytes / median / 1e9; ratio = spillway GB/s / Open MPI GB/s."
)
if extra:
    print(
        "Extra columns: spillway with more ranks than processes ("
        + ", ".join(f"{r} ranks = {r // np_} per process" for r in extra)
        + "), ratio again against Open MPI with one rank per process."
    )
b_s, b_m = by.get(("barrier", np_, 0)), ref_by.get(("barrier", 0))
if b_s and b_m:
    print(
        f"\nBarrier latency (median): spillway {fmt_time(b_s['median_s'])}, "
        f"Open MPI {fmt_time(b_m['median_s'])}."
    )
for op, what in (("bcast", "bcast (`u8`, from rank 0)"), ("allreduce", "allreduce (`f64`, sum)")):
    sizes = sorted({r["size"] for r in spill if r["op"] == op})
    if not sizes:
        continue
    print(f"\n### {what}\n")
    head = "| size | spillway median | spillway GB/s | Open MPI median | Open MPI GB/s | ratio |"
    rule = "|---:|---:|---:|---:|---:|---:|"
    for r in extra:
        head += f" spillway {r} ranks median | GB/s | ratio |"
        rule += "---:|---:|---:|"
    print(head)
    print(rule)
    for size in sizes:
        s, m = by.get((op, np_, size)), ref_by.get((op, size))
        if s is None or m is None:
            continue
        row = (
            f"| {fmt_size(s['bytes'])} | {fmt_time(s['median_s'])} | {s['gbps']:.3f} "
            f"| {fmt_time(m['median_s'])} | {m['gbps']:.3f} | {s['gbps'] / m['gbps']:.3f} |"
        )
        for r in extra:
            x = by.get((op, r, size))
            row += (
                f" {fmt_time(x['median_s'])} | {x['gbps']:.3f} | {x['gbps'] / m['gbps']:.3f} |"
                if x
                else " - | - | - |"
            )
        print(row)
print()
EOF
