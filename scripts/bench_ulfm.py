#!/usr/bin/env python3
"""Cost of surviving a lost MPI process (ULFM): for word count, connected components,
PageRank (MapReduce and direct) and K-means, the failure-free time with and without ULFM on,
and the time of runs in which one rank's process is SIGKILLed from outside early, in the
middle and late (a fraction of the failure-free run after the job's ranks started), with the
output checked against the failure-free run's (PageRank ranks within 1e-9 relative).

Prints a table: job, failure-free seconds (ULFM on), killed seconds (median of the runs
that recovered from their kill; "kills" says how many of the kills did: a kill that lands
after the job's work, while it ends, has nothing to recover and is said, not counted),
added seconds per failure, that over one operation's (iteration's) mean time in the
failure-free run, the overhead of running with ULFM on, the command and the date. The job's times are its own
`total_seconds` (from the ranks' start to the end of its output and report; the launcher's
start and end, which move by 0.05-0.1 s from run to run here, are left out); "added (wall)"
is the same difference in wall-clock time, launcher included. The overhead of ULFM on is
in wall-clock time (the launcher's fault tolerance is part of it).

Needs spillway built with the mpi feature against Open MPI 5 (see scripts/test.sh) and that
Open MPI's mpirun. Run it with nothing else running on the machine.

Usage: bench_ulfm.py --spillway BIN --mpirun MPIRUN [--np 4] [--reps 3] [--kill-reps 1]
                     [--work DIR] [--jobs wordcount,cc,pagerank-mr,pagerank,kmeans]
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MOMENTS = [("early", 0.2), ("middle", 0.5), ("late", 0.8)]


def descendants(root):
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 1:].split()
        parent[int(d)] = int(rest[1])
    out, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p:
                out.append(c)
                frontier.append(c)
    return out


def process_of(root, rank):
    key = f"OMPI_COMM_WORLD_RANK={rank}".encode()
    for p in descendants(root):
        try:
            if key in open(f"/proc/{p}/environ", "rb").read().split(b"\0"):
                return p
        except OSError:
            pass
    return None


def ranks_run(pid):
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            if open(f"/proc/{pid}/task/{t}/comm").read().startswith("node-"):
                return True
    except OSError:
        pass
    return False


def run(mpirun, np_, args, kill=None, reference=None):
    """Runs the job; with kill=(rank, fraction), SIGKILLs that rank's process `fraction` of
    the reference time after the ranks started. Returns (seconds, exit code, stdout, stderr,
    killed)."""
    t0 = time.monotonic()
    child = subprocess.Popen(
        ["timeout", "600", *mpirun, "-np", str(np_), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killed = False
    if kill is not None:
        rank, fraction = kill
        while child.poll() is None and time.monotonic() - t0 < 300:
            p0 = process_of(child.pid, 0)
            if p0 and ranks_run(p0):
                left = max(0.0, reference - (time.monotonic() - t0))
                time.sleep(fraction * left)
                victim = process_of(child.pid, rank)
                if victim and child.poll() is None:
                    os.kill(victim, signal.SIGKILL)
                    killed = True
                break
            time.sleep(0.02)
    out, err = child.communicate()
    return time.monotonic() - t0, child.returncode, out.decode(), err.decode(), killed


def same(job, a, b):
    if job in ("pagerank", "pagerank-mr"):
        def load(p):
            return {int(l.split()[0]): float(l.split()[1]) for l in open(p)}
        x, y = load(a), load(b)
        if x.keys() != y.keys():
            return False
        return all(abs(x[k] - y[k]) <= 1e-9 * abs(x[k]) for k in x)
    if job == "kmeans":
        return open(a).read() == open(b).read()
    return sorted(open(a).read().splitlines()) == sorted(open(b).read().splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--mpirun", required=True, help="Open MPI 5's mpirun")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kill-reps", type=int, default=1, help="killed runs per moment")
    ap.add_argument("--work", default=None, help="directory for inputs and outputs")
    ap.add_argument("--jobs", default="wordcount,cc,pagerank-mr,pagerank,kmeans")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="bench_ulfm.")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.environ.update(env)
    sp = a.spillway
    graph = os.path.join(work, "graph.txt")
    if not os.path.exists(graph):
        subprocess.run([sp, "gen", "rmat", "--scale", "19", "--edge-factor", "8", "--out", graph], check=True)
    points = os.path.join(work, "points.csv")
    if not os.path.exists(points):
        subprocess.run([sp, "gen", "blobs", "--points", "1000000", "--dim", "8", "--k", "16", "--out", points], check=True)
    text = os.path.join(work, "text.txt")
    if not os.path.exists(text):
        import random
        rng = random.Random(5)
        words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(200000)]
        with open(text, "w") as f:
            for _ in range(1200000):
                f.write(" ".join(rng.choice(words) for _ in range(12)) + "\n")
    ranks = str(2 * a.np)
    jobs = {
        "wordcount": ["run", "wordcount", "--input", text, "--fault-tolerance"],
        "cc": ["run", "cc", "--engine", "mapreduce", "--input", graph, "--fault-tolerance"],
        "pagerank-mr": ["run", "pagerank", "--engine", "mapreduce", "--input", graph, "--iterations", "10", "--fault-tolerance"],
        "pagerank": ["run", "pagerank", "--input", graph, "--iterations", "200"],
        "kmeans": ["run", "kmeans", "--input", points, "--k", "16", "--iterations", "40", "--init", "random:3"],
    }
    out_flag = {"kmeans": "--assign"}
    ulfm = [a.mpirun, "--with-ft", "ulfm", "--map-by", ":OVERSUBSCRIBE"]
    plain = [a.mpirun, "--map-by", ":OVERSUBSCRIBE"]
    date = datetime.date.today().isoformat()
    rows = []
    for job in a.jobs.split(","):
        base = [sp, *jobs[job], "--backend", "mpi", "--ranks", ranks, "--json"]
        ref_out = os.path.join(work, f"{job}.ref")
        def args(out):
            return [*base, out_flag.get(job, "--out"), out]
        times = {"plain": [], "ulfm": []}
        job_times = []
        per_op = []
        for rep in range(a.reps):
            for mode, launcher in (("plain", plain), ("ulfm", ulfm)):
                out = ref_out if mode == "ulfm" and rep == 0 else os.path.join(work, f"{job}.{mode}")
                if os.path.exists(out):
                    os.remove(out)
                s, code, so, se, _ = run(launcher, a.np, args(out))
                if code != 0:
                    sys.exit(f"{job} ({mode}) failed with {code}:\n{se}")
                times[mode].append(s)
                if mode == "ulfm":
                    rep_json = json.loads(so.strip().splitlines()[-1])
                    job_times.append(rep_json["total_seconds"])
                    its = rep_json.get("iteration_seconds") or []
                    if its:
                        per_op.append(statistics.mean(its))
        ff = statistics.median(job_times)
        ff_wall = statistics.median(times["ulfm"])
        op = statistics.median(per_op) if per_op else float("nan")
        killed = []
        for name, fraction in MOMENTS:
            for _ in range(a.kill_reps):
                out = os.path.join(work, f"{job}.{name}")
                if os.path.exists(out):
                    os.remove(out)
                s, code, so, se, did = run(ulfm, a.np, args(out), kill=(a.np - 1 if name != "middle" else 1, fraction), reference=ff_wall)
                ok = code == 0 and same(job, ref_out, out)
                # A run the kill came too late for is no test of recovery: it is said, not
                # counted as a difference.
                what = "identical" if ok else "DIFFERS"
                note = "" if did else " (the job ended before the kill: no recovery tested)"
                total = None
                recs = []
                try:
                    rep_json = json.loads(so.strip().splitlines()[-1])
                    total = rep_json["total_seconds"]
                    recs = (rep_json.get("fault_tolerance") or {}).get("recoveries") or rep_json.get("recoveries") or []
                    how = "; ".join(r.get("detected", f"from iteration {r.get('from_iteration')}") for r in recs) or "none"
                except (ValueError, IndexError, KeyError):
                    how = "no report"
                if did and code == 0 and not recs:
                    # The job's work was done when the process died (it was ending): no
                    # recovery to time.
                    note = " (the kill landed after the job's work: nothing to recover)"
                    total = None
                killed.append((name, s, ok, did, code, total))
                job_s = f"{total:7.2f}" if total is not None else "   none"
                print(f"{job:12s} {name:7s} killed={did} exit={code} job {job_s} s wall {s:7.2f} s output {what}{note}; recoveries: {how}", flush=True)
                if code != 0:
                    # What the survivors said, for the record of a failed recovery.
                    for line in se.strip().splitlines()[-6:]:
                        print(f"    {line}", flush=True)
        hit = [k for k in killed if k[3] and k[5] is not None]
        ks = statistics.median([k[5] for k in hit]) if hit else float("nan")
        ks_wall = statistics.median([k[1] for k in hit]) if hit else float("nan")
        added = ks - ff
        overhead = ff_wall / statistics.median(times["plain"]) - 1
        kills = f"{len(hit)}/{len(killed)}"
        rows.append((job, ff, ks, added, added / op, ks_wall - ff_wall, overhead, all(k[2] for k in killed), kills, " ".join([*ulfm, "-np", str(a.np), *args("OUT")])))
    print()
    print(f"# {date}, 2-core VM, mpirun -np {a.np}, {ranks} ranks; job times (total_seconds); failure-free: median of {a.reps}; killed: median of the runs the kill landed in ({a.kill_reps} per moment)")
    print(f"{'job':12s} {'failure-free s':>14s} {'killed s':>9s} {'added s':>8s} {'added/op':>9s} {'added (wall) s':>15s} {'ULFM on':>8s} {'kills':>6s} {'outputs':>8s}")
    for job, ff, ks, added, ratio, added_wall, overhead, ok, kills, cmd in rows:
        print(f"{job:12s} {ff:14.2f} {ks:9.2f} {added:8.2f} {ratio:9.2f} {added_wall:15.2f} {100 * overhead:+7.1f}% {kills:>6s} {'same' if ok else 'DIFFER':>8s}")
    print()
    for job, *_, cmd in rows:
        print(f"{job}: {cmd}")
    if a.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
