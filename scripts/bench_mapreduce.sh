#!/usr/bin/env bash
# MapReduce benchmarks, printed as Markdown after the machine header:
#
#   1. word count of a generated text (default 1 GiB, Zipf-like words over a 1M vocabulary)
#      on spillway at 1 and 2 ranks, with and without the combiner, against a sequential
#      HashMap count of the same file (spillway-bench mapreduce: counts checked, medians);
#   2. the same word count with PySpark local[2] (session start-up reported separately),
#      checked against spillway's output;
#   3. out of core: spillway under a memory budget of 1/8 of the text, peak RSS and output
#      compared with the in-memory run.
#
#   scripts/bench_mapreduce.sh > mapreduce.md
#
# Environment:
#   SIZE=1G             size of the generated text
#   RANKS=1,2 REPS=3    spillway rank counts; repetitions
#   SPARK=1             run PySpark (installed into SPARK_VENV=.venv-spark if missing)
#   MR_DIR=DIR          where the text goes (default: a temporary directory, removed)
set -euo pipefail

cd "$(dirname "$0")/.."

cargo build --release -p spillway-cli -p spillway-bench >&2
target=${CARGO_TARGET_DIR:-target}
bin=$target/release/spillway
bench=$target/release/spillway-bench

size=${SIZE:-1G}
if [[ -n "${MR_DIR:-}" ]]; then
    dir=$MR_DIR
    mkdir -p "$dir"
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi
text="$dir/text-$size.txt"
[[ -s "$text" ]] || "$bench" mapreduce --input "$text" --generate "$size" --generate-only

# shellcheck source=scripts/machine.sh
source scripts/machine.sh
print_machine
echo
echo "### Word count against a sequential HashMap"
echo
echo "\$ spillway-bench mapreduce --input TEXT --ranks ${RANKS:-1,2} --reps ${REPS:-3}"
echo
"$bench" mapreduce --input "$text" --ranks "${RANKS:-1,2}" --reps "${REPS:-3}"
echo

"$bin" run wordcount --input "$text" --ranks 2 --out "$dir/wc-mem.txt" --json > "$dir/wc-mem.json"
if [[ "${SPARK:-1}" == 1 ]]; then
    venv=${SPARK_VENV:-.venv-spark}
    if [[ ! -x "$venv/bin/python" ]]; then
        python3 -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c "import pyspark" 2>/dev/null; then
        echo "bench_mapreduce: installing pyspark into $venv" >&2
        "$venv/bin/pip" install --quiet --disable-pip-version-check pyspark >&2
    fi
    echo "### Word count with PySpark local[2]"
    echo
    sp=$("$venv/bin/python" scripts/bench_pyspark_wordcount.py "$text" "$dir/wc-mem.txt" --reps "${SPARK_REPS:-1}")
    mr=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["compute_seconds"])' "$dir/wc-mem.json")
    python3 - "$sp" "$mr" <<'PY'
import json, statistics, sys
sp = json.loads(sys.argv[1]); mr = float(sys.argv[2])
job = statistics.median(sp["job_seconds"])
print("| system | start-up | job | job vs spillway (2 ranks) |")
print("|---|---|---|---|")
print(f"| PySpark local[2] | {sp['startup_seconds']:.1f} s | {job:.1f} s | {job / mr:.1f}x |")
print(f"| spillway, 2 ranks | - | {mr:.2f} s | 1.0x |")
PY
    echo
fi

echo "### Out of core: the budget is 1/8 of the text"
echo
bytes=$(stat -c %s "$text")
budget=$(( bytes / 8 / 1048576 ))M
echo "\$ spillway run wordcount --input TEXT --ranks 4 --mem-budget $budget"
echo
/usr/bin/time -f "%M" -o "$dir/rss" "$bin" run wordcount --input "$text" --ranks 4 \
    --mem-budget "$budget" --out "$dir/wc-ooc.txt" --json > "$dir/wc-ooc.json"
cmp -s "$dir/wc-mem.txt" "$dir/wc-ooc.txt" || { echo "out-of-core output differs" >&2; exit 1; }
python3 - "$dir/wc-ooc.json" "$(cat "$dir/rss")" "$budget" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); rss_kib = int(sys.argv[2]); op = r["operations"][0]
print("| budget | peak RSS | compute | spilled | rounds | output |")
print("|---|---|---|---|---|---|")
print(f"| {sys.argv[3]} | {rss_kib / 1024:.0f} MiB | {r['compute_seconds']:.2f} s | "
      f"{op['bytes_spilled'] / 2**20:.0f} MiB | {op['rounds']} | equal to the in-memory run |")
PY
