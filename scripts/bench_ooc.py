#!/usr/bin/env python3
"""Out-of-core benchmark: PageRank and K-means under a memory budget with each policy and
running = 1, 2 and dynamic, against the same job in memory, measured in the same run.

Usage: python3 scripts/bench_ooc.py [--bin target/release/spillway] [--quick]
Prints a markdown table per algorithm: compute time, ratio to in-memory, spill I/O per
iteration (bytes written + read back), its ratio to the storage-backed rank data, peak RSS,
and whether the output equals the in-memory output.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile


def run(binary, args, out):
    cmd = [binary, "run", *args, "--json", "--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stderr}")
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return json.loads(res.stdout), digest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/spillway")
    ap.add_argument("--quick", action="store_true", help="smaller inputs")
    a = ap.parse_args()
    mib = 1 << 20
    if a.quick:
        jobs = {
            "pagerank": ["pagerank", "--generate", "rmat:18:16", "--iterations", "5", "--ranks", "16"],
            "kmeans": ["kmeans", "--generate", "blobs:250000:32:16:1", "--k", "16", "--init", "random:3",
                       "--iterations", "5", "--ranks", "16"],
        }
        budget = "16M"
    else:
        jobs = {
            "pagerank": ["pagerank", "--generate", "rmat:20:16", "--iterations", "10", "--ranks", "32"],
            "kmeans": ["kmeans", "--generate", "blobs:1050000:32:16:1", "--k", "16", "--init", "random:3",
                       "--iterations", "10", "--ranks", "32"],
        }
        budget = "64M"
    tmp = tempfile.mkdtemp()
    for name, args in jobs.items():
        out = os.path.join(tmp, name)
        base, base_digest = run(a.bin, args + ["--running", "2"], out)
        print(f"\n### {name}: `spillway run {' '.join(args)}`, budget {budget}\n")
        print("| policy | running | compute s | vs in-memory | spill I/O per iteration MiB | I/O / rank data | peak RSS MiB | rank data MiB | same output |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
        rank_data = base["peak_storage_backed_bytes"]
        print(f"| in memory | 2 | {base['compute_seconds']:.2f} | 1.00 | 0 | 0 | {base['peak_rss'] / mib:.0f} | {rank_data / mib:.0f} | - |")
        for policy in ["araw", "arlw", "lrlw"]:
            for running in ["1", "2", "dynamic"]:
                r, digest = run(a.bin, args + ["--mem-budget", budget, "--policy", policy, "--running", running], out)
                iters = max(r["iterations"], 1)
                if "spill_io_per_iteration_bytes" in r:
                    io = r["spill_io_per_iteration_bytes"]
                else:
                    io = (r["spill_bytes_written"] + r["spill_bytes_read"]) / iters
                print(
                    f"| {policy} | {running} | {r['compute_seconds']:.2f} | {r['compute_seconds'] / base['compute_seconds']:.2f} "
                    f"| {io / mib:.0f} | {io / r['peak_storage_backed_bytes']:.2f} | {r['peak_rss'] / mib:.0f} "
                    f"| {r['peak_storage_backed_bytes'] / mib:.0f} | {'yes' if digest == base_digest else 'NO'} |"
                )
                sys.stdout.flush()


if __name__ == "__main__":
    main()
