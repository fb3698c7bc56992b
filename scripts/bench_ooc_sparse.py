#!/usr/bin/env python3
"""Out of core at 8x the budget for BDMPI's two other workloads: spherical K-means on a
generated Zipf document-term matrix and SGD matrix factorisation on generated ratings, each
with >= 200M non-zeros / ratings, inside a memory cgroup of budget + 128 MiB that also counts
the page cache (caches dropped before each run). Needs root.

For each job, in the same run:
  * the disk's direct sequential read bandwidth on the spill directory's device, measured
    before and after the job (the bound uses their mean; both are printed);
  * the job in memory (no budget, no cgroup), for the compute time alone;
  * the job out of core with 1 + K iterations: the median of iterations 2..1+K;
  * the bound: reading the input's non-zeros / ratings once at 12 bytes each (a 4-byte index
    and an 8-byte value of CSR, as scipy holds them; for ratings 4-byte user and item ids and
    a 4-byte rating) at the measured bandwidth, and the ratio time / bound (the issue's
    target is 1.3);
  * peak RSS against budget + 64 MiB, and the device bytes read per iteration;
  * the hand-written serial out-of-core program of our own for each (`spillway-bench
    serial-ooc spkmeans`: the rows normalised in a binary file of 12 bytes a non-zero and 4 a
    row; `serial-ooc sgd`: the ratings shuffled once into a binary file of 16 bytes a rating;
    each file written before the timed run; every iteration streams it with O_DIRECT reads on
    a reader thread, the centroids or U and V in memory) in the same cgroup, caches dropped,
    and the ratio spillway / serial (the issue's target: 1.1).

Usage: sudo python3 scripts/bench_ooc_sparse.py [--bin target/release/spillway]
           [--bench target/release/spillway-bench] [--quick]
           [--only spkmeans|sgd] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ooc_cgroup import Cgroup, disk_bandwidth, run_json  # noqa: E402

MIB = 1 << 20
BYTES_PER_NONZERO = 12


def jobs(quick):
    if quick:
        return [
            ("spkmeans", ["spkmeans", "--generate", "zipf:200000:5000:50", "--k", "16", "--ranks", "16"],
             "nonzeros", 16),
            ("sgd", ["sgd", "--generate", "ratings:50000:5000:200", "--ranks", "16",
                     "--rmse-every", "0"],
             "training_ratings", 16),
        ]
    return [
        # 4M documents of 50 terms on average: 200M non-zeros, 2.4 GB at 12 bytes each.
        ("spkmeans", ["spkmeans", "--generate", "zipf:4000000:20000:50", "--k", "16", "--ranks", "32"],
         "nonzeros", 256),
        # 1M users rating 200 items on average: 200M ratings (3.2 GB as our 16-byte ratings).
        # The RMSE is measured after the last iteration only (each measure reads the ratings
        # once more; the iteration times never included it).
        ("sgd", ["sgd", "--generate", "ratings:1000000:100000:200", "--ranks", "64",
                 "--rmse-every", "0"],
         "training_ratings", 256),
    ]


def measure(a, name, args, count_key, budget_mib, spill, k):
    before, _ = disk_bandwidth(spill, 1 << 30)
    inmem = run_json([a.bin, "run", *args, "--iterations", str(1 + k), "--json"])
    cg = Cgroup(f"spillway-sparse-{os.getpid()}", (budget_mib + 128) * MIB)
    try:
        ooc = run_json(cg.wrap([a.bin, "run", *args, "--mem-budget", f"{budget_mib}M",
                                "--spill-dir", spill, "--iterations", str(1 + k), "--json"]))
    finally:
        cg.remove()
    serial = serial_run(a, name, args, budget_mib, spill, k)
    after, _ = disk_bandwidth(spill, 1 << 30)
    bw = (before + after) / 2
    count = ooc[count_key]
    bound = count * BYTES_PER_NONZERO / bw
    iters = ooc["iteration_seconds"][1:]
    t = statistics.median(iters)
    reads = [i.get("device_read_bytes") for i in ooc.get("iteration_io", [])[1:]]
    row = {
        "job": name,
        "command": "spillway run " + " ".join(args),
        "count": count,
        "input_bytes_at_12": count * BYTES_PER_NONZERO,
        "budget_mib": budget_mib,
        "data_over_budget": count * BYTES_PER_NONZERO / (budget_mib * MIB),
        "read_bw_before": before,
        "read_bw_after": after,
        "in_memory_s_per_iter": statistics.median(inmem["iteration_seconds"][1:]),
        "ooc_s_per_iter": iters,
        "ooc_median": t,
        "bound_s": bound,
        "ratio": t / bound,
        "peak_rss_mib": ooc["peak_rss"] / MIB,
        "rss_limit_mib": budget_mib + 64,
        "load_s": ooc["load_seconds"],
        "device_read_per_iter": reads,
        "rank_data_bytes": ooc["peak_storage_backed_bytes"],
        "train_rmse": ooc.get("train_rmse"),
    }
    if serial is not None:
        row["serial_s_per_iter"] = serial["iteration_seconds"][1:]
        row["serial_median"] = statistics.median(serial["iteration_seconds"][1:])
        row["serial_rmse"] = serial.get("train_rmse")
        row["vs_serial"] = t / row["serial_median"]
    return row


def serial_run(a, name, args, budget_mib, spill, k):
    """The serial out-of-core program on the same input, in a cgroup of the same limit."""
    spec = args[args.index("--generate") + 1]
    path = os.path.join(spill, f"serial-{name}.bin")
    if name == "sgd":
        build = ["ratings", "--generate", spec, "--out", path]
        job = ["sgd", "--ratings", path]
    else:
        build = ["docs", "--generate", spec, "--out", path]
        job = ["spkmeans", "--docs", path, "--k", args[args.index("--k") + 1]]
    subprocess.run([a.bench, "serial-ooc", *build], check=True, stdout=subprocess.DEVNULL)
    cg = Cgroup(f"spillway-serial-{os.getpid()}", (budget_mib + 128) * MIB)
    try:
        return run_json(cg.wrap([a.bench, "serial-ooc", *job, "--iterations", str(1 + k),
                                 "--json"]))
    finally:
        cg.remove()
        os.unlink(path)


def print_row(r):
    reads = [x for x in r["device_read_per_iter"] if x is not None]
    read = f"{statistics.median(reads) / 1e9:.2f} GB" if reads else "n/a"
    print(f"| {r['job']} | {r['count'] / 1e6:.0f}M | {r['data_over_budget']:.1f}x | "
          f"{r['read_bw_before'] / 1e9:.2f} / {r['read_bw_after'] / 1e9:.2f} GB/s | "
          f"{r['in_memory_s_per_iter']:.2f} | {r['ooc_median']:.2f} "
          f"({min(r['ooc_s_per_iter']):.2f}-{max(r['ooc_s_per_iter']):.2f}) | {r['bound_s']:.2f} | "
          f"**{r['ratio']:.2f}** | {read} | {r['peak_rss_mib']:.0f} / {r['rss_limit_mib']} MiB | "
          f"{r['load_s']:.1f} |", flush=True)
    if "vs_serial" in r:
        rmse = "" if r["serial_rmse"] is None else \
            f"RMSE {r['serial_rmse']:.4f} (spillway {r['train_rmse']}); "
        print(f"  serial out-of-core {r['job']}: {r['serial_median']:.2f} s/iter "
              f"({min(r['serial_s_per_iter']):.2f}-{max(r['serial_s_per_iter']):.2f}), "
              f"{rmse}spillway / serial **{r['vs_serial']:.2f}**", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/spillway")
    ap.add_argument("--bench", default="target/release/spillway-bench")
    ap.add_argument("--quick", action="store_true", help="small inputs (a check of the script)")
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--only", default=None, choices=["spkmeans", "sgd"])
    ap.add_argument("--iterations", type=int, default=6, help="measured iterations after the first")
    ap.add_argument("--json", default=None, help="write the rows here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (the benchmark creates a memory cgroup and drops caches)")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"--bin {a.bin}: not an executable (cargo build --release first)")
    spill = a.spill_dir or tempfile.mkdtemp(prefix="spillway-sparse-")
    print("| job | non-zeros | input / budget | read bw before / after | in memory s/iter "
          "| out of core s/iter (min-max) | read once s | ratio | device read/iter | peak RSS / limit | load s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for name, args, key, budget in jobs(a.quick):
        if a.only and name != a.only:
            continue
        rows.append(measure(a, name, args, key, budget, spill, a.iterations))
        print_row(rows[-1])
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
