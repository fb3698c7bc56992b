#!/usr/bin/env python3
"""BDMPI programs out of core and at scale, under spillway's bdmprun.

1. Out of core (crates/bdmpi/bench/ooc.c): the ranks of one node together keep 8x the node's
   memory limit (-rm) in storage-backed memory (BDMPI_sbmalloc) and sweep all of it in every
   iteration (read, change, write), with an allreduce in between, under -sbma araw. For -nr 1
   and 2 (with 8 * nr ranks of rm / nr each) it runs the job once without a limit and once in a
   memory cgroup (v1) of -rm + 64 MiB per running rank, which counts the page cache too, and
   reports:
     * the peak RSS of the whole process tree (bdmprun and every rank process), sampled every
       5 ms from /proc, against the bound -rm + 64 MiB per running rank;
     * the cgroup's peak usage (memory.max_usage_in_bytes: RSS and page cache);
     * the checksums printed by the program (which checks them against a formula): they must
       be the same with and without the limit.
2. Many ranks (crates/bdmpi/bench/many.c): -ns 1000 -nr 2, an allreduce and an all-to-all over
   every rank; while rank 0 holds the node and the 999 others wait in a barrier, the memory of
   every process is read (Pss and Rss from /proc/PID/smaps_rollup): per idle rank, its process
   plus its share of bdmprun.

Needs root (cgroups), gcc, and the release build of spillway-bdmpi.
Usage: python3 scripts/bdmpi_ooc.py [--rm-mib 256] [--iters 3] [--ranks 1000] [--only ooc|many]
Exit status: 0 when every check holds, 1 otherwise, 2 for a wrong request.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

MIB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_program(name, out_dir):
    lib = os.path.join(ROOT, "target", "release")
    exe = os.path.join(out_dir, name)
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-I", os.path.join(ROOT, "crates/bdmpi/include"),
                    os.path.join(ROOT, "crates/bdmpi/bench", name + ".c"), "-o", exe,
                    "-L", lib, "-lbdmpi", f"-Wl,-rpath,{lib}"], check=True)
    return exe


def descendants(pid):
    """pid and every process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError):
        return 0


class TreeSampler(threading.Thread):
    """Samples the summed RSS of a process tree until stopped; keeps the peak."""

    def __init__(self, pid, period=0.005):
        super().__init__(daemon=True)
        self.pid, self.period, self.peak, self.stop = pid, period, 0, False

    def run(self):
        while not self.stop:
            total = sum(rss(p) for p in descendants(self.pid))
            self.peak = max(self.peak, total)
            time.sleep(self.period)


class Cgroup:
    def __init__(self, name, limit):
        self.path = os.path.join("/sys/fs/cgroup/memory", name)
        os.makedirs(self.path, exist_ok=True)
        self._write("memory.limit_in_bytes", str(limit))

    def _write(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def read(self, f):
        with open(os.path.join(self.path, f)) as fh:
            return int(fh.read())

    def wrap(self, cmd):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def run_tree(cmd):
    """Runs cmd, sampling the peak RSS of its process tree; returns (rc, stdout, stderr, peak, s)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(p.pid)
    sampler.start()
    out, err = p.communicate()
    sampler.stop = True
    sampler.join()
    return p.returncode, out, err, sampler.peak, time.perf_counter() - t0


def ooc(args, work, exe):
    bdmprun = os.path.join(ROOT, "target", "release", "bdmprun")
    rm = args.rm_mib * MIB
    ok = True
    print(f"== out of core: 8 x -rm {args.rm_mib} MiB of storage-backed memory, -sbma araw, "
          f"{args.iters} sweeps")
    print(f"{'nr':>3} {'ns':>4} {'MiB/rank':>9} {'limit':>10} {'peak RSS tree':>14} {'bound':>8} "
          f"{'cgroup peak':>12} {'time s':>7}  checksums")
    for nr in (1, 2):
        ns = 8 * nr
        per_rank = args.rm_mib // nr
        wd = os.path.join(work, "wd")
        os.makedirs(wd, exist_ok=True)
        cmd = [bdmprun, "-ns", str(ns), "-nr", str(nr), "-sbma", "araw",
               "-rm", str(rm // 4096), "-wd", wd, exe, str(per_rank), str(args.iters)]
        results = {}
        for limited in (False, True):
            cg = None
            run_cmd = cmd
            if limited:
                cg = Cgroup(f"bdmpi-ooc-{os.getpid()}", rm + 64 * MIB * nr)
                run_cmd = cg.wrap(cmd)
            try:
                rc, out, err, peak, secs = run_tree(run_cmd)
                cg_peak = cg.read("memory.max_usage_in_bytes") if cg else None
            finally:
                if cg:
                    cg.remove()
            sums = [l.split()[-1] for l in out.splitlines() if "checksum" in l]
            results[limited] = sums
            bound = rm + 64 * MIB * nr
            good = rc == 0 and len(sums) == args.iters and (not limited or peak <= bound)
            ok &= good
            print(f"{nr:>3} {ns:>4} {per_rank:>9} {('cgroup' if limited else 'none'):>10} "
                  f"{peak / MIB:>11.0f} MiB {bound / MIB:>5.0f} MiB "
                  f"{(f'{cg_peak / MIB:.0f} MiB' if cg_peak else '-'):>12} {secs:>7.1f}  "
                  f"{' '.join(sums)}{'' if good else '  FAILED: ' + err.strip()[-300:]}")
        if results[False] != results[True]:
            print(f"   checksums differ with and without the limit: {results}")
            ok = False
    return ok


def smaps(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:"):
                    out[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def many(args, work, exe):
    bdmprun = os.path.join(ROOT, "target", "release", "bdmprun")
    n = args.ranks
    ready = os.path.join(work, "ready")
    wd = os.path.join(work, "wd")
    os.makedirs(wd, exist_ok=True)
    print(f"== {n} ranks on one node (-ns {n} -nr 2): allreduce and alltoall")
    t0 = time.perf_counter()
    p = subprocess.Popen([bdmprun, "-ns", str(n), "-nr", "2", "-wd", wd, exe, ready, "5"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not os.path.exists(ready) and p.poll() is None:
        time.sleep(0.05)
    if p.poll() is not None:
        out, err = p.communicate()
        print(f"   FAILED before the measurement: {err.strip()[-500:]}")
        return False
    time.sleep(0.5)
    rank0 = int(open(ready).read())
    pids = descendants(p.pid)
    node = smaps(p.pid)
    ranks = [smaps(q) for q in pids if q not in (p.pid, rank0)]
    out, err = p.communicate()
    secs = time.perf_counter() - t0
    idle = len(ranks)
    pss = sum(r.get("Pss", 0) for r in ranks) / max(idle, 1)
    rss_ = sum(r.get("Rss", 0) for r in ranks) / max(idle, 1)
    share = node.get("Pss", 0) / n
    print(f"   {out.strip()}  (status {p.returncode}, {secs:.1f} s)")
    print(f"   {idle} idle rank processes: Pss {pss / 1024:.0f} KiB each (Rss {rss_ / 1024:.0f} KiB, "
          f"shared pages counted in full)")
    print(f"   bdmprun: Pss {node.get('Pss', 0) / MIB:.1f} MiB = {share / 1024:.0f} KiB per rank")
    print(f"   per idle rank: {(pss + share) / 1024:.0f} KiB")
    return p.returncode == 0 and "correct" in out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rm-mib", type=int, default=256)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--only", choices=["ooc", "many"])
    args = ap.parse_args()
    if args.rm_mib < 16 or args.iters < 1 or args.ranks < 2:
        print("error: --rm-mib >= 16, --iters >= 1, --ranks >= 2", file=sys.stderr)
        return 2
    if not os.path.exists(os.path.join(ROOT, "target/release/bdmprun")):
        print("error: build first: cargo build --release -p spillway-bdmpi", file=sys.stderr)
        return 2
    if args.only != "many" and not os.path.isdir("/sys/fs/cgroup/memory"):
        print("error: needs the cgroup v1 memory controller at /sys/fs/cgroup/memory (and root)",
              file=sys.stderr)
        return 2
    ok = True
    with tempfile.TemporaryDirectory() as work:
        print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores")
        if args.only in (None, "ooc"):
            ok &= ooc(args, work, compile_program("ooc", work))
        if args.only in (None, "many"):
            ok &= many(args, work, compile_program("many", work))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
