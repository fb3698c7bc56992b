#!/usr/bin/env python3
"""Out of core at disk speed: PageRank and K-means whose rank data is 4x the memory budget, run
inside a memory cgroup of budget + 128 MiB that also counts the page cache, so the data really
comes from the disk. Needs root (cgroup v1 memory controller at /sys/fs/cgroup/memory, or
cgroup v2 at /sys/fs/cgroup with the memory controller).

For each job it measures, in the same run:
  * the disk's sequential read and write bandwidth (direct I/O on the spill directory's device);
  * the job in memory (no budget, no cgroup): time per iteration;
  * the job out of core with 1 and with 1 + K iterations: the difference gives the bytes read
    on the block device per iteration (getrusage of the child: ru_inblock) and the bytes
    written to the spill directory's device (its sector counts in /sys/dev/block, taken around
    each run: machine-wide, so the machine should be otherwise idle; the child's ru_oublock
    would count pages when they are dirtied, also those discarded before they are ever
    written) without the load phase; time per iteration is the mean of iterations 2..1+K;
  * "must read": rank data minus the budget, the least an iteration must read back when all of
    the rank data is touched once per iteration; the ratio time / (must read / read bandwidth)
    is 1 at disk speed. PageRank does not touch the loaded graph or the set-up's temporary
    arrays after its set-up (the runtime then neither reads them back nor prefetches them),
    so the last two columns use the bytes its iterations touch (`iteration_bytes` of its
    report) instead: the stricter ratio.

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


def sectors_written(directory):
    """Sectors written so far to the block device holding `directory` (machine-wide)."""
    st = os.stat(directory)
    with open(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat") as f:
        return int(f.read().split()[6])


def run_usage(cmd, directory=None):
    """Runs `cmd` with wait4: its JSON report, and its rusage (block I/O of the child) with,
    given `directory`, the bytes written meanwhile to the device holding it."""
    drop_caches()
    before = sectors_written(directory) if directory else 0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    written = (sectors_written(directory) - before) * 512 if directory else 0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{err.decode()}")
    return json.loads(out), (usage, written)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/spillway")
    ap.add_argument("--quick", action="store_true", help="small inputs (a check of the script)")
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--only", default=None, choices=["pagerank", "kmeans"], help="run one job only")
    ap.add_argument("--policies", default="araw,arlw",
                    help="storage-backed memory policies to run out of core (comma-separated)")
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
    print("| job | rank data | budget | policy | in memory s/iter | out of core s/iter | ratio | device read/iter | device write/iter | must read/iter | time / (must read / read bw) | working set/iter | time / ((working set - budget) / read bw) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, args, budget_mib in jobs:
        if a.only and name != a.only:
            continue
        inmem, _ = run_usage([a.bin, "run", *args, "--iterations", str(1 + k), "--json"])
        t_mem = sum(inmem["iteration_seconds"][1:]) / k
        for policy in a.policies.split(","):
            report(a, name, args, budget_mib, policy, spill, k, t_mem, read_bw)


def report(a, name, args, budget_mib, policy, spill, k, t_mem, read_bw):
    budget = budget_mib * MIB
    cg = Cgroup(f"spillway-ooc-{os.getpid()}", budget + 128 * MIB)
    try:
        base = [a.bin, "run", *args, "--mem-budget", f"{budget_mib}M", "--policy", policy,
                "--spill-dir", spill, "--json"]
        short, u1 = run_usage(cg.wrap(base + ["--iterations", "1"]), spill)
        long, u2 = run_usage(cg.wrap(base + ["--iterations", str(1 + k)]), spill)
    finally:
        cg.remove()
    t_ooc = sum(long["iteration_seconds"][1:]) / k
    (u1, w1), (u2, w2) = u1, u2
    dev_read = (u2.ru_inblock - u1.ru_inblock) * 512 / k
    dev_write = (w2 - w1) / k
    dirtied = (u2.ru_oublock - u1.ru_oublock) * 512 / k
    data = long["peak_storage_backed_bytes"]
    must = max(data - budget, 0)
    ideal = must / read_bw
    # What an iteration touches: PageRank reports it (its in-lists, per-row and per-slot
    # values and the values it receives; the peak rank data also counts the loaded graph and
    # the set-up's temporary arrays, which an iteration never touches); K-means touches
    # everything.
    working = long.get("iteration_bytes", data)
    ideal_ws = max(working - budget, 0) / read_bw
    print(f"| {name} {args[2]} | {data / MIB:.0f} MiB | {budget_mib} MiB | {policy} | {t_mem:.3f} | {t_ooc:.3f} | "
          f"{t_ooc / t_mem:.2f}x | {dev_read / MIB:.0f} MiB | {dev_write / MIB:.0f} MiB | {must / MIB:.0f} MiB | "
          f"{t_ooc / ideal if ideal > 0 else float('nan'):.2f} | {working / MIB:.0f} MiB | "
          f"{t_ooc / ideal_ws if ideal_ws > 0 else float('nan'):.2f} |")
    print(f"  (out of core: peak RSS {long['peak_rss'] / MIB:.0f} MiB, load {long['load_seconds']:.1f} s, "
          f"spill written {long['spill_bytes_written'] / MIB:.0f} MiB, read back {long['spill_bytes_read'] / MIB:.0f} MiB; "
          f"per iteration: pages dirtied {dirtied / MIB:.0f} MiB, messages spilled "
          f"{(long['message_bytes_spilled'] - short['message_bytes_spilled']) / k / MIB:.0f} MiB)",
          flush=True)


if __name__ == "__main__":
    main()
