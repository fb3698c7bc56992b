#!/usr/bin/env python3
"""Out of core at disk speed: PageRank and K-means whose rank data is 4x the memory budget, run
inside a memory cgroup of budget + 128 MiB that also counts the page cache, so the data really
comes from the disk. Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory, or
cgroup v2 at /sys/fs/cgroup with the memory controller).

For each job it measures, in the same run:
  * the disk's sequential read and write bandwidth (direct I/O on the spill directory's device);
  * the job in memory (no budget, no cgroup): time per iteration;
  * the job out of core with 1 + K iterations: time per iteration is the mean of iterations
    2..1+K (the first one also finishes the set-up), and so are the bytes read and written per
    iteration, which the job's report samples at the end of each iteration (`iteration_io`):
    the sectors read and written on the spill directory's block device (machine-wide, so the
    machine should be otherwise idle), and beside them this process's storage reads and the
    pages it dirtied (`/proc/self/io`: dirtied pages discarded before write-back are never
    written);
  * "must read": the bytes an iteration touches minus the budget, the least it must read back
    from the disk; the ratio time / (must read / read bandwidth) is 1 at disk speed. K-means
    touches all of its rank data; PageRank does not touch the loaded graph or the set-up's
    temporary arrays after its set-up (the runtime then neither reads them back nor prefetches
    them), so its figure uses the bytes its iterations touch (`iteration_bytes` of its report).

Usage: sudo python3 scripts/bench_ooc_cgroup.py [--bin target/release/spillway] [--quick]
                                                [--only pagerank|kmeans]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def disk_bandwidth(directory, size=1 << 30):
    """Sequential write then read of `size` bytes with O_DIRECT (bytes/s each)."""
    path = os.path.join(directory, "bandwidth.tmp")
    bs = 16 * MIB
    t = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", f"bs={bs}", f"count={size // bs}",
                    "oflag=direct", "conv=fsync"], check=True, capture_output=True)
    write = size / (time.perf_counter() - t)
    t = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={bs}", "iflag=direct"],
                   check=True, capture_output=True)
    read = size / (time.perf_counter() - t)
    os.remove(path)
    return read, write


class Cgroup:
    """A memory cgroup with a limit that includes the page cache."""

    def __init__(self, name, limit):
        v1 = "/sys/fs/cgroup/memory"
        if os.path.isdir(v1):
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("memory.limit_in_bytes", str(limit))
            try:
                self._write("memory.memsw.limit_in_bytes", str(limit))
            except OSError:
                pass  # no swap accounting: there is no swap to escape to anyway
        else:
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.makedirs(self.path, exist_ok=True)
            self._write("memory.max", str(limit))
            self._write("memory.swap.max", "0")

    def _write(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def wrap(self, cmd):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    except OSError:
        pass


def run_json(cmd):
    """Runs `cmd` after dropping the caches: its JSON report."""
    drop_caches()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/spillway")
    ap.add_argument("--quick", action="store_true", help="small inputs (a check of the script)")
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--only", default=None, choices=["pagerank", "kmeans"], help="run one job only")
    ap.add_argument("--policies", default="araw,arlw",
                    help="storage-backed memory policies to run out of core (comma-separated)")
    ap.add_argument("--running", type=int, default=None,
                    help="ranks running at once per node out of core (default: the cores)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (the benchmark creates a memory cgroup)")
    k = 4
    if a.quick:
        jobs = [
            ("pagerank", ["pagerank", "--generate", "rmat:18:16", "--ranks", "16", "--tolerance", "0"], 16),
            ("kmeans", ["kmeans", "--generate", "blobs:500000:32:16:1", "--k", "16", "--init", "random:3",
                        "--ranks", "16"], 32),
        ]
    else:
        # rmat:23:16: about 2.6 GiB of rank data; K-means: 4M x 32 doubles = 1 GiB of points (4x the budget).
        jobs = [
            ("pagerank", ["pagerank", "--generate", "rmat:23:16", "--ranks", "32", "--tolerance", "0"], 512),
            ("kmeans", ["kmeans", "--generate", "blobs:4000000:32:16:1", "--k", "16", "--init", "random:3",
                        "--ranks", "32"], 256),
        ]
    spill = a.spill_dir or tempfile.mkdtemp(prefix="spillway-ooc-")
    read_bw, write_bw = disk_bandwidth(spill)
    print(f"disk: sequential read {read_bw / 1e9:.2f} GB/s, write {write_bw / 1e9:.2f} GB/s (direct I/O, {spill})")
    print()
    print("| job | rank data | budget | policy | in memory s/iter | out of core s/iter | x in memory "
          "| device read/iter | device written/iter | must read/iter | time / (must read / read bw) |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, args, budget_mib in jobs:
        if a.only and name != a.only:
            continue
        inmem = run_json([a.bin, "run", *args, "--iterations", str(1 + k), "--json"])
        t_mem = sum(inmem["iteration_seconds"][1:]) / k
        for policy in a.policies.split(","):
            report(a, name, args, budget_mib, policy, spill, k, t_mem, read_bw)


def report(a, name, args, budget_mib, policy, spill, k, t_mem, read_bw):
    budget = budget_mib * MIB
    cg = Cgroup(f"spillway-ooc-{os.getpid()}", budget + 128 * MIB)
    try:
        run = run_json(cg.wrap([a.bin, "run", *args, "--mem-budget", f"{budget_mib}M", "--policy", policy,
                                "--spill-dir", spill, "--json", "--iterations", str(1 + k),
                                *(["--running", str(a.running)] if a.running else [])]))
    finally:
        cg.remove()
    t_ooc = sum(run["iteration_seconds"][1:]) / k
    io = run.get("iteration_io", [])[1:]
    if len(io) != k:
        sys.exit(f"the report has no I/O for {k} iterations after the first: {run.get('iteration_io')}")

    def per_iter(key):
        values = [i.get(key) for i in io]
        return None if None in values else sum(values) / k

    def mib(v):
        return "n/a" if v is None else f"{v / MIB:.0f} MiB"

    data = run["peak_storage_backed_bytes"]
    # What an iteration touches: PageRank reports it (its in-lists, per-row and per-slot
    # values and the values it receives; the peak rank data also counts the loaded graph and
    # the set-up's temporary arrays, which an iteration never touches); K-means touches
    # everything.
    touched = run.get("iteration_bytes", data)
    must = max(touched - budget, 0)
    ideal = must / read_bw
    print(f"| {name} {args[2]} | {data / MIB:.0f} MiB | {budget_mib} MiB | {policy} | {t_mem:.3f} | {t_ooc:.3f} | "
          f"{t_ooc / t_mem:.2f}x | {mib(per_iter('device_read_bytes'))} | {mib(per_iter('device_written_bytes'))} | "
          f"{must / MIB:.0f} MiB | {t_ooc / ideal if ideal > 0 else float('nan'):.2f} |")
    print(f"  (out of core: peak RSS {run['peak_rss'] / MIB:.0f} MiB, load {run['load_seconds']:.1f} s; "
          f"per iteration: read by the job {mib(per_iter('read_bytes'))}, pages dirtied "
          f"{mib(per_iter('dirtied_bytes'))}; whole run: messages spilled {run['message_bytes_spilled'] / MIB:.0f} MiB)",
          flush=True)


if __name__ == "__main__":
    main()
