#!/usr/bin/env bash
# The same C program (crates/lpf/bench/bsp_cost.c: an empty lpf_sync, and total exchanges of
# h bytes per process) linked with spillway's libspillway_lpf and with LPF's own pthreads
# engine, run one after the other at the same P; prints both and their ratio.
#
# Nothing is fetched: pass an LPF checkout whose pthreads engine was built, e.g.
#   git clone https://github.com/Algebraic-Programming/LPF /tmp/lpf
#   (cd /tmp/lpf && mkdir build && cd build && cmake .. -DLPF_ENABLE_TESTS=OFF && make -j2)
# (LPF's CMakeLists asks for CMake 3.29 and Doxygen; with an older CMake lowering the minimum
# and leaving out doc/ works.)
#
# Usage: bash scripts/bench_lpf.sh LPF_CHECKOUT [P...]   (default P: 2 and 8)
set -euo pipefail
cd "$(dirname "$0")/.."
lpf="${1:?usage: scripts/bench_lpf.sh LPF_CHECKOUT [P...]}"
shift
procs=("${@:-2 8}")
engine="$(find "$lpf" -name 'liblpf_core_univ_pthread_*.so' | head -n 1)"
[ -n "$engine" ] || { echo "error: no liblpf_core_univ_pthread_*.so under $lpf (build LPF first)" >&2; exit 2; }
cargo build --release --quiet -p spillway-lpf
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
lib="$PWD/target/release"
cc -O2 -Icrates/lpf/include crates/lpf/bench/bsp_cost.c -o "$work/spillway" \
    -L"$lib" -lspillway_lpf -Wl,-rpath,"$lib"
cc -O2 -I"$lpf/include" crates/lpf/bench/bsp_cost.c -o "$work/lpf" \
    -L"$(dirname "$engine")" -l:"$(basename "$engine")" -Wl,-rpath,"$(dirname "$engine")"
echo "| P | measurement | LPF pthreads | spillway | spillway / LPF |"
echo "|---|---|---|---|---|"
limit="${LPF_BENCH_TIMEOUT:-120}"
for p in ${procs[*]}; do
    LPF_MAX_PROCS=$p "$work/spillway" >"$work/b"
    if ! LPF_MAX_PROCS=$p timeout "$limit" "$work/lpf" 2>/dev/null >"$work/a"; then
        # More threads than cores: LPF's spinning barriers may not finish at all.
        awk -v p="$p" -v l="$limit" '{ printf "| %s | %s h=%s | did not finish in %s s | %.2f us | |\n", p, $1, substr($3, 3), l, $4 * 1e6 }' "$work/b"
        continue
    fi
    paste "$work/a" "$work/b" | awk -v p="$p" '{
        what = $1 " h=" substr($3, 3);
        printf "| %s | %s | %.2f us | %.2f us | %.2f |\n", p, what, $4 * 1e6, $8 * 1e6, $8 / $4 }'
done
