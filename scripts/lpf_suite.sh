#!/usr/bin/env bash
# Runs LPF's own functional tests of the core API (tests/functional/func_lpf_*, the type and
# version tests), of its collectives library and of its BSPlib layer (func_bsplib_*), the two
# libraries built from LPF's sources, against libspillway_lpf, at P = 1..5 as LPF's harness does (each test's "\pre P >= n"
# and "\pre P <= n" bound the counts; "Exit code: n" is the expected status).
#
# Nothing is fetched: pass a checkout of LPF (https://github.com/Algebraic-Programming/LPF).
# Needs a C/C++ compiler and GoogleTest (Debian: apt-get install g++ libgtest-dev).
#
# Usage: bash scripts/lpf_suite.sh LPF_SOURCE_DIR [PATTERN]
#   PATTERN  only tests whose name contains it
# Environment: LPF_SUITE_PROCS (default "1 2 3 4 5"), LPF_SUITE_TIMEOUT seconds per run
# (default 120), LPF_SUITE_ENV extra variables for every run (e.g. "SPILLWAY_NODES=2").
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: scripts/lpf_suite.sh LPF_SOURCE_DIR [PATTERN]}"
pattern="${2:-}"
procs="${LPF_SUITE_PROCS:-1 2 3 4 5}"
timeout_s="${LPF_SUITE_TIMEOUT:-120}"
[ -f "$src/include/lpf/core.h" ] || { echo "error: $src is not an LPF checkout" >&2; exit 2; }

cargo build --release --quiet -p spillway-lpf
lib="$PWD/target/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# LPF's collectives and BSPlib libraries, from LPF's sources, against spillway.
gcc -O2 -fPIC -DNDEBUG -I"$src/include" -I"$src/src/common" -c "$src/src/core-libraries/collectives.c" -o "$work/collectives.o"
g++ -O2 -fPIC -std=c++17 -DNDEBUG -I"$src/include" -I"$src/src/common" -c "$src/src/core-libraries/bsplib.cpp" -o "$work/bsplib.o"
g++ -O2 -fPIC -std=c++17 -DNDEBUG -I"$src/include" -I"$src/src/common" -c "$src/src/common/time.cpp" -o "$work/time.o"

tests=()
for f in "$src"/tests/functional/func_lpf_*.cpp "$src"/tests/functional/macro_LPF_VERSION.cpp \
         "$src"/tests/functional/type_lpf_*.cpp "$src"/tests/functional/collectives/func_lpf_*.cpp \
         "$src"/tests/functional/func_bsplib_*.cpp; do
    name="$(basename "$f" .cpp)"
    case "$name" in *.*) continue ;; esac          # engine-specific (name.pthread.cpp, ...)
    [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
    tests+=("$f")
done

pass=0; fail=0; failed=()
for f in "${tests[@]}"; do
    name="$(basename "$f" .cpp)"
    exe="$work/$name"
    if ! g++ -O1 -std=c++17 -DLPF_CORE_IMPL_ID=pthread -I"$src/include" -I"$src/tests/functional" \
            "$f" "$work/collectives.o" "$work/bsplib.o" "$work/time.o" -o "$exe" \
            -L"$lib" -lspillway_lpf -Wl,-rpath,"$lib" -lgtest -lgtest_main -lpthread 2>"$work/$name.cc.log"; then
        echo "BUILD FAIL $name"; sed -n 1,20p "$work/$name.cc.log"
        fail=$((fail + 1)); failed+=("$name(build)"); continue
    fi
    min="$(grep -oP 'pre P >= \K[0-9]+' "$f" | head -n 1 || true)"; min="${min:-1}"
    max="$(grep -oP 'pre P <= \K[0-9]+' "$f" | head -n 1 || true)"; max="${max:-5}"
    want="$(grep -oP 'Exit code: \K[0-9]+' "$f" | head -n 1 || true)"; want="${want:-0}"
    for p in $procs; do
        [ "$p" -lt "$min" ] || [ "$p" -gt "$max" ] && continue
        set +e
        env LPF_MAX_PROCS="$p" ${LPF_SUITE_ENV:-} timeout "$timeout_s" "$exe" >"$work/out" 2>&1
        rc=$?
        set -e
        if [ "$rc" = "$want" ]; then
            pass=$((pass + 1))
        else
            echo "FAIL $name P=$p: exit $rc, expected $want"; tail -n 25 "$work/out"
            fail=$((fail + 1)); failed+=("$name(P=$p)")
        fi
    done
done
echo "LPF functional tests: $pass runs passed, $fail failed (${#tests[@]} tests, P in {$procs})"
[ "$fail" = 0 ] || { printf '  %s\n' "${failed[@]}"; exit 1; }
