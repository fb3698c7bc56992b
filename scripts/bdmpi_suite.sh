#!/usr/bin/env bash
# Runs BDMPI's own test programs (test/*.c, all twelve) and its applications pr1d (both modes:
# all-to-all and point-to-point with ANY_SOURCE), sphkmeans and samplesort, compiled against
# BDMPI's own header and linked with spillway's libbdmpi, under spillway's bdmprun at
# -ns 1..8 and -nr 1..2, and compares every output with that of the same sources compiled as
# plain MPI programs (with scripts/bdmpi_suite/bdmpi.h) and run under `mpirun -np NS`.
# Outputs are compared as sorted lines after pids, pointers, timestamps and timer lines are
# masked (the ranks' lines interleave differently from run to run under either launcher;
# mpirun writes each rank's output to a file of its own, bdmprun forwards whole lines).
# pr1d runs 12 iterations: its p2p mode adds the partial ranks in the order messages arrive
# (ANY_SOURCE), so once the residual reaches rounding noise (~1e-14, after some 20 iterations)
# its last printed digit differs from run to run under mpirun itself.
#
# It also checks that BDMPI's header compiles with -Wall -Wextra -Werror -pedantic and that
# every function it declares, and the four communicator globals, link against libbdmpi.
#
# Nothing is fetched: pass checkouts of BDMPI (https://github.com/jiverson002/bdmpi) and of
# GKlib (https://github.com/jiverson002/GKlib), which BDMPI's programs include. Needs gcc,
# mpicc/mpirun (Open MPI) and python3.
#
# Usage: bash scripts/bdmpi_suite.sh BDMPI_DIR GKLIB_DIR [PATTERN]
#   PATTERN  only programs whose name contains it
# Environment: BDMPI_SUITE_NS (default "1 2 3 4 5 6 7 8"), BDMPI_SUITE_NR (default "1 2"),
# BDMPI_SUITE_REPEAT runs of each bdmprun layout (default 1), BDMPI_SUITE_TIMEOUT seconds per
# run (default 300), BDMPI_SUITE_NODES (default 1): with N > 1, the NS ranks run as
# `mpirun -np N bdmprun -ns NS/N` (NS a multiple of N; bdmprun built with --features mpi) and
# are compared with the same `mpirun -np NS` reference. BDMPI_SUITE_BIN: a directory holding
# an already built bdmprun and libbdmpi.so (then nothing is built here; crates/bdmpi's test
# bdmpi_own_programs passes its own build).
set -euo pipefail
cd "$(dirname "$0")/.."
bdmpi="${1:?usage: scripts/bdmpi_suite.sh BDMPI_DIR GKLIB_DIR [PATTERN]}"
gklib="${2:?usage: scripts/bdmpi_suite.sh BDMPI_DIR GKLIB_DIR [PATTERN]}"
pattern="${3:-}"
ns_list="${BDMPI_SUITE_NS:-1 2 3 4 5 6 7 8}"
nr_list="${BDMPI_SUITE_NR:-1 2}"
repeat="${BDMPI_SUITE_REPEAT:-1}"
nodes="${BDMPI_SUITE_NODES:-1}"
timeout_s="${BDMPI_SUITE_TIMEOUT:-300}"
[ -f "$bdmpi/include/bdmpi.h" ] && [ -f "$bdmpi/test/p2p.c" ] \
    || { echo "error: $bdmpi is not a BDMPI checkout (no include/bdmpi.h, test/p2p.c)" >&2; exit 2; }
[ -f "$gklib/GKlib.h" ] || { echo "error: $gklib is not a GKlib checkout (no GKlib.h)" >&2; exit 2; }
for tool in gcc mpicc mpirun python3; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [ -n "${BDMPI_SUITE_BIN:-}" ]; then
    lib="$(cd "$BDMPI_SUITE_BIN" && pwd)"
    [ -x "$lib/bdmprun" ] && [ -f "$lib/libbdmpi.so" ] \
        || { echo "error: BDMPI_SUITE_BIN=$BDMPI_SUITE_BIN holds no bdmprun and libbdmpi.so" >&2; exit 2; }
else
    if [ "$nodes" -gt 1 ]; then
        cargo build --release --quiet -p spillway-bdmpi --features mpi
    else
        cargo build --release --quiet -p spillway-bdmpi
    fi
    lib="$PWD/target/release"
fi
bdmprun="$lib/bdmprun"
shim="$PWD/scripts/bdmpi_suite"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wd" "$work/gk"

# GKlib, from its sources.
for f in "$gklib"/*.c; do
    gcc -O2 -fPIC -w -std=gnu99 -DLINUX -D_FILE_OFFSET_BITS=64 -I"$gklib" -c "$f" \
        -o "$work/gk/$(basename "$f" .c).o"
done
ar rcs "$work/libGKlib.a" "$work"/gk/*.o

# BDMPI's header: warning-free, and everything it declares links against libbdmpi.
{
    echo '#include <bdmpi.h>'
    echo 'typedef void (*fn_t)(void);'
    echo 'static fn_t fns[] = {'
    grep -oP '^(BDMPI_API|MPI_API)\([^)]*\)\s+\K\w+(?=\()' "$bdmpi/include/bdmpi.h" \
        | sort -u | sed 's/.*/    (fn_t)\0,/'
    echo '};'
    echo 'static BDMPI_Comm *globals[] = {&BDMPI_COMM_WORLD, &BDMPI_COMM_SELF, &BDMPI_COMM_CWORLD, &BDMPI_COMM_NODE};'
    echo 'int main(void) { return (int)(sizeof fns / sizeof fns[0]) + (globals[0] != 0) - 1 == 0; }'
} > "$work/header.c"
nfns=$(grep -c '(fn_t)' "$work/header.c")
if gcc -std=gnu11 -Wall -Wextra -Werror -pedantic -I"$bdmpi/include" "$work/header.c" \
        -o "$work/header" -L"$lib" -lbdmpi -Wl,-rpath,"$lib" 2>"$work/header.log"; then
    echo "header: BDMPI's bdmpi.h compiles without warnings; its $nfns functions and 4 globals link against libbdmpi"
else
    echo "header: FAIL"; cat "$work/header.log"; exit 1
fi

# The programs and their arguments.
python3 - "$work" <<'PY'
import random, struct, sys
work = sys.argv[1]
rng = random.Random(7)
# pr1d: binary CSR graph: int nrows, int ncols, ssize_t rowptr[nrows+1], int rowind[nnz]
n = 20000
rows = []
for i in range(n):
    deg = 0 if rng.random() < 0.05 else rng.randint(1, 16)
    rows.append(sorted(rng.sample(range(n), deg)))
with open(f"{work}/graph.bin", "wb") as f:
    f.write(struct.pack("ii", n, n))
    at = 0
    ptr = [0]
    for r in rows:
        at += len(r)
        ptr.append(at)
    f.write(struct.pack(f"{n + 1}q", *ptr))
    for r in rows:
        f.write(struct.pack(f"{len(r)}i", *r))
# sphkmeans: GKlib's binary row format: int nrows, int ncols, ssize_t rowptr, int rowind,
# float rowval
m, d = 3000, 400
rows = []
for i in range(m):
    topic = i % 5
    cols = sorted(rng.sample(range(topic * 60, topic * 60 + 120), 12) + rng.sample(range(300, 400), 4))
    cols = sorted(set(cols))
    rows.append([(c, float(rng.randint(1, 9))) for c in cols])
with open(f"{work}/matrix.bin", "wb") as f:
    f.write(struct.pack("ii", m, d))
    at = 0
    ptr = [0]
    for r in rows:
        at += len(r)
        ptr.append(at)
    f.write(struct.pack(f"{m + 1}q", *ptr))
    for r in rows:
        f.write(struct.pack(f"{len(r)}i", *[c for c, _ in r]))
    for r in rows:
        f.write(struct.pack(f"{len(r)}f", *[v for _, v in r]))
PY

declare -A src args
for t in allgather alltoall bcast commtest gather helloworld lazyread p2p pscan reduce scatter test_MPI_ANY_SOURCE; do
    src[$t]="$bdmpi/test/$t.c"; args[$t]=""
done
args[pscan]="12"
src[pr1d_a2a]="$bdmpi/apps/bdmp/pr1d.c";           args[pr1d_a2a]="$work/graph.bin 12 1 0"
src[pr1d_p2p]="$bdmpi/apps/bdmp/pr1d.c";           args[pr1d_p2p]="$work/graph.bin 12 2 0"
src[sphkmeans]="$bdmpi/apps/bdmp/sphkmeans.c";     args[sphkmeans]="$work/matrix.bin 8 2 20 1 0"
src[samplesort]="$bdmpi/apps/bdmp/samplesort.c";   args[samplesort]="200000"
names=$(printf '%s\n' "${!src[@]}" | sort)

cflags=(-O2 -w -std=gnu99 -DLINUX -D_FILE_OFFSET_BITS=64 -fopenmp)
for name in $names; do
    [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
    gcc "${cflags[@]}" -I"$bdmpi/include" -I"$gklib" "${src[$name]}" -o "$work/bd_$name" \
        -L"$lib" -lbdmpi -Wl,-rpath,"$lib" "$work/libGKlib.a" -lm
    mpicc "${cflags[@]}" -I"$shim" -I"$gklib" "${src[$name]}" -o "$work/mpi_$name" \
        "$work/libGKlib.a" -lm
done

# Masks what differs between any two runs: pids, pointers, clock readings, timers.
normalize() {
    sed -E -e 's/\[ *[0-9]+: *[0-9]+\]/[PID]/g' -e 's/0x[0-9a-f]+|\(nil\)/PTR/g' \
        -e 's/(\[ts|ts|timestamp0[0-9]):? *[0-9]+/\1 T/g' -e 's/^[0-9]{9,} /T /' \
        -e 's/(Root is +[0-9]+ )\[[0-9]+\]/\1[PID]/' \
        -e '/Tmr:|mrss:/d' "$1" | LC_ALL=C sort
}

printf '\n%-20s %3s %3s %-6s %9s %9s\n' program ns nr result mpirun_s bdmprun_s
pass=0; fail=0; failed=()
for name in $names; do
    [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
    for ns in $ns_list; do
        # test/p2p.c pairs rank 2i with 2i + 1: with an odd count the last rank sends to a rank
        # that does not exist (mpirun aborts; BDMPI, and bdmprun, return BDMPI_ERR_RANK).
        [ "$name" = p2p ] && [ $((ns % 2)) = 1 ] && continue
        [ $((ns % nodes)) = 0 ] || continue
        t0=$(date +%s.%N)
        set +e
        # Each rank's output to a file of its own: mpirun forwards output in the pieces the
        # ranks write it, so lines written in several pieces mix across ranks.
        rm -rf "$work/of"
        ( cd "$work" && timeout "$timeout_s" mpirun -np "$ns" --output-filename "$work/of" "$work/mpi_$name" ${args[$name]} ) \
            >"$work/ref.log" 2>"$work/ref.err"
        rc_ref=$?
        cat "$work"/of/1/rank.*/stdout >"$work/ref.out" 2>/dev/null || true
        set -e
        t_ref=$(echo "$(date +%s.%N) - $t0" | bc)
        normalize "$work/ref.out" >"$work/ref.norm"
        for nr in $nr_list; do
            [ "$nr" -gt $((ns / nodes)) ] && continue
            for rep in $(seq "$repeat"); do
                t0=$(date +%s.%N)
                set +e
                if [ "$nodes" = 1 ]; then
                    # shellcheck disable=SC2086
                    ( cd "$work" && timeout "$timeout_s" "$bdmprun" -ns "$ns" -nr "$nr" -wd "$work/wd" "$work/bd_$name" ${args[$name]} ) \
                        >"$work/ours.out" 2>"$work/ours.err"
                    rc=$?
                else
                    rm -rf "$work/ofb"
                    # shellcheck disable=SC2086
                    ( cd "$work" && timeout "$timeout_s" mpirun -np "$nodes" --output-filename "$work/ofb" "$bdmprun" -ns $((ns / nodes)) -nr "$nr" -wd "$work/wd" "$work/bd_$name" ${args[$name]} ) \
                        >"$work/ours.log" 2>"$work/ours.err"
                    rc=$?
                    cat "$work"/ofb/1/rank.*/stdout >"$work/ours.out" 2>/dev/null || true
                    cat "$work"/ofb/1/rank.*/stderr >>"$work/ours.err" 2>/dev/null || true
                fi
                set -e
                t_ours=$(echo "$(date +%s.%N) - $t0" | bc)
                normalize "$work/ours.out" >"$work/ours.norm"
                left=$(find "$work/wd" -mindepth 1 | wc -l)
                if [ "$rc" = "$rc_ref" ] && [ "$left" = 0 ] && cmp -s "$work/ref.norm" "$work/ours.norm"; then
                    result=PASS; pass=$((pass + 1))
                else
                    result=FAIL; fail=$((fail + 1)); failed+=("$name:ns=$ns:nr=$nr")
                    echo "--- $name -ns $ns -nr $nr: status $rc (mpirun $rc_ref), $left files left in -wd"
                    diff "$work/ref.norm" "$work/ours.norm" | head -n 20 || true
                    head -n 5 "$work/ours.err"
                fi
                printf '%-20s %3s %3s %-6s %9.2f %9.2f\n' "$name" "$ns" "$nr" "$result" "$t_ref" "$t_ours"
            done
        done
    done
done
echo
echo "passed $pass, failed $fail"
[ "$fail" = 0 ] || { printf '  %s\n' "${failed[@]}"; exit 1; }
