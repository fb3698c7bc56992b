#!/usr/bin/env python3
"""BDMPI programs under spillway's bdmprun against the same programs as plain MPI under
Open MPI (mpirun, oversubscribed with the same number of ranks), measured in the same run.

The programs (crates/bdmpi/bench) are written against BDMPI's API; the MPI builds use our
shim crates/bdmpi/tests/mpi-shim/bdmpi.h (storage-backed memory is plain memory there). Each
prints its seconds per iteration (the set-up excluded) and a result that must agree between
the launchers.

  * pingpong: one-way time of 8 B .. 16 MiB messages between two ranks, and of a call that
    returns at once (Iprobe), bdmprun -nr 1 and 2 against mpirun;
  * in memory: PageRank (push, 1-D) and K-means (Lloyd, dense) on P ranks;
  * out of core: the same on 2P ranks whose data is several times a memory cgroup (v1, which
    counts the page cache): bdmprun with -sbma araw and lraw (storage-backed memory read
    back whole on resume, or page by page as touched) and -rm = the cgroup minus 64 MiB per
    running rank (32 MiB with --quick), and mpirun in the same cgroup; with the numbers of
    the same jobs in memory (no cgroup) beside them.

Run it with nothing else running on the machine. Needs root (cgroups), gcc, mpicc, mpirun and the release build of
spillway-bdmpi.
Usage: python3 scripts/bench_bdmpi.py [--quick] [--reps 3] [--only pingpong|memory|ooc]
           [--program pagerank|kmeans]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(ROOT, "target", "release")
BDMPRUN = os.path.join(LIB, "bdmprun")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def build(work):
    exes = {}
    for prog in ("pingpong", "pagerank", "kmeans"):
        src = os.path.join(ROOT, "crates/bdmpi/bench", prog + ".c")
        bd, mp = os.path.join(work, "bd_" + prog), os.path.join(work, "mpi_" + prog)
        subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-I", os.path.join(ROOT, "crates/bdmpi/include"),
                        src, "-o", bd, "-L", LIB, "-lbdmpi", f"-Wl,-rpath,{LIB}"], check=True)
        subprocess.run(["mpicc", "-O2", "-Wall", "-Werror", "-I", os.path.join(ROOT, "crates/bdmpi/tests/mpi-shim"),
                        src, "-o", mp], check=True, env=ENV)
        exes[prog] = (bd, mp)
    return exes


class Cgroup:
    def __init__(self, name, limit):
        self.path = os.path.join("/sys/fs/cgroup/memory", name)
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))

    def wrap(self, cmd):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]

    def oom_kills(self):
        try:
            with open(os.path.join(self.path, "memory.oom_control")) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def run(cmd, timeout):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        return None, "", "timeout", time.perf_counter() - t0


def per_iteration(out):
    m = re.search(r"seconds per iteration ([0-9.]+)", out)
    return float(m.group(1)) if m else None


def result_of(out):
    """The program's answer: the lines other than timings."""
    return [l for l in out.splitlines() if "seconds" not in l]


def pingpong(exes, work):
    bd, mp = exes["pingpong"]
    wd = os.path.join(work, "wd")
    rows = {}
    for name, cmd in (("bdmprun -nr 1", [BDMPRUN, "-ns", "2", "-nr", "1", "-wd", wd, bd]),
                      ("bdmprun -nr 2", [BDMPRUN, "-ns", "2", "-nr", "2", "-wd", wd, bd]),
                      ("mpirun", ["mpirun", "-np", "2", mp])):
        rc, out, err, _ = run(cmd, 300)
        for line in out.splitlines():
            m = re.match(r"pingpong (\d+) bytes ([0-9.]+) us", line)
            if m:
                rows.setdefault(int(m.group(1)), {})[name] = float(m.group(2))
            m = re.match(r"iprobe ([0-9.]+) us", line)
            if m:
                rows.setdefault("call", {})[name] = float(m.group(1))
    print("== pingpong: one-way microseconds (2 ranks)")
    print(f"{'bytes':>10} {'bdmprun -nr 1':>14} {'bdmprun -nr 2':>14} {'mpirun':>10} {'ratio nr1':>10}")
    for k, v in rows.items():
        a, b, c = v.get("bdmprun -nr 1"), v.get("bdmprun -nr 2"), v.get("mpirun")
        ratio = f"{a / c:.2f}" if a and c else "-"
        label = "a call" if k == "call" else str(k)
        print(f"{label:>10} {a or 0:>14.2f} {b or 0:>14.2f} {c or 0:>10.2f} {ratio:>10}")


def jobs(quick):
    if quick:
        return {"memory": {"pagerank": ["400000", "8", "5"], "kmeans": ["400000", "16", "16", "5"]},
                "ooc": {"pagerank": ["2000000", "8", "3"], "kmeans": ["1000000", "32", "16", "3"]},
                "p": 4, "limit": 128 * MIB, "reserve": 32 * MIB}
    return {"memory": {"pagerank": ["1000000", "8", "10"], "kmeans": ["2000000", "16", "16", "10"]},
            "ooc": {"pagerank": ["6000000", "8", "5"], "kmeans": ["4000000", "32", "16", "5"]},
            "p": 8, "limit": 192 * MIB, "reserve": 64 * MIB}


def timed(cmd, reps, timeout=900):
    times, outs, status = [], [], None
    for _ in range(reps):
        rc, out, err, secs = run(cmd, timeout)
        status = rc
        if rc != 0:
            return None, out, f"status {rc}: {err.strip()[-200:]}"
        times.append(per_iteration(out))
        outs.append(out)
    return statistics.median(times), outs[0], None


def memory(exes, work, cfg, reps):
    p = cfg["p"]
    wd = os.path.join(work, "wd")
    print(f"\n== in memory: {p} ranks, seconds per iteration (median of {reps})")
    print(f"{'program':>9} {'mpirun -np ' + str(p):>14} {'bdmprun -nr 1':>14} {'bdmprun -nr 2':>14} "
          f"{'ratio nr1':>10} {'ratio nr2':>10}  same result")
    for prog, args in cfg["memory"].items():
        bd, mp = exes[prog]
        ref, ref_out, e1 = timed(["mpirun", "-np", str(p), mp, *args], reps)
        one, out1, e2 = timed([BDMPRUN, "-ns", str(p), "-nr", "1", "-wd", wd, bd, *args], reps)
        two, out2, e3 = timed([BDMPRUN, "-ns", str(p), "-nr", "2", "-wd", wd, bd, *args], reps)
        same = result_of(ref_out) == result_of(out1) == result_of(out2)
        r1 = f"{one / ref:.2f}" if one and ref else "-"
        r2 = f"{two / ref:.2f}" if two and ref else "-"
        print(f"{prog:>9} {ref or 0:>14.4f} {one or 0:>14.4f} {two or 0:>14.4f} {r1:>10} {r2:>10}  "
              f"{'yes' if same else 'NO'} {e1 or ''}{e2 or ''}{e3 or ''}")
        print(f"          {prog} {' '.join(args)}")


def ooc(exes, work, cfg):
    p = 2 * cfg["p"]
    limit, reserve = cfg["limit"], cfg["reserve"]
    wd = os.path.join(work, "wd")
    print(f"\n== out of core: {p} ranks, memory cgroup of {limit // MIB} MiB (page cache counted), "
          "seconds per iteration")
    for prog, args in cfg["ooc"].items():
        bd, mp = exes[prog]
        print(f"   {prog} {' '.join(args)}")
        rows = []
        for label, cmd, limited in (
                ("mpirun, in memory", ["mpirun", "-np", str(p), mp, *args], False),
                ("mpirun -np 1, in memory", ["mpirun", "-np", "1", mp, *args], False),
                ("bdmprun -nr 1, in memory", [BDMPRUN, "-ns", str(p), "-nr", "1", "-wd", wd, bd, *args], False),
                ("mpirun, cgroup", ["mpirun", "-np", str(p), mp, *args], True),
                *[(f"bdmprun -nr {nr} {pol}, cgroup",
                   [BDMPRUN, "-ns", str(p), "-nr", str(nr), "-sbma", pol, "-rm",
                    str((limit - nr * reserve) // 4096), "-wd", wd, bd, *args], True)
                  for pol in ("araw", "lraw") for nr in (1, 2)]):
            cg = Cgroup(f"bdmpi-bench-{os.getpid()}", limit) if limited else None
            try:
                rc, out, err, secs = run(cg.wrap(cmd) if cg else cmd, 1200)
                kills = cg.oom_kills() if cg else 0
            finally:
                if cg:
                    cg.remove()
            it = per_iteration(out)
            if rc == 0 and it is not None:
                what = f"{it:.3f} s/iteration ({secs:.0f} s in all)"
            else:
                what = f"failed: status {rc}, {kills} processes killed for lack of memory ({secs:.0f} s)"
            rows.append((label, it, out))
            print(f"     {label:<30} {what}")
        results = {tuple(result_of(o)) for _, it, o in rows if it is not None}
        print(f"     same result in every completed run: {'yes' if len(results) == 1 else 'NO'}")
        mem = next((it for l, it, _ in rows if l == "mpirun, in memory"), None)
        for l, it, _ in rows:
            if "bdmprun" in l and "cgroup" in l and it and mem:
                print(f"     {l}: {it / mem:.2f}x mpirun in memory")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["pingpong", "memory", "ooc"])
    ap.add_argument("--program", choices=["pagerank", "kmeans"], help="only this program")
    args = ap.parse_args()
    if args.reps < 1:
        print("error: --reps must be at least 1", file=sys.stderr)
        return 2
    if not os.path.exists(BDMPRUN):
        print("error: build first: cargo build --release -p spillway-bdmpi", file=sys.stderr)
        return 2
    if args.only in (None, "ooc") and not os.path.isdir("/sys/fs/cgroup/memory"):
        print("error: needs the cgroup v1 memory controller (and root)", file=sys.stderr)
        return 2
    cfg = jobs(args.quick)
    if args.program:
        for part in ("memory", "ooc"):
            cfg[part] = {args.program: cfg[part][args.program]}
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "wd"))
        print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
              f"{subprocess.run(['mpirun', '--version'], capture_output=True, text=True, env=ENV).stdout.splitlines()[0]}")
        exes = build(work)
        if args.only in (None, "pingpong"):
            pingpong(exes, work)
        if args.only in (None, "memory"):
            memory(exes, work, cfg, args.reps)
        if args.only in (None, "ooc"):
            ooc(exes, work, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
