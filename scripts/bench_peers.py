#!/usr/bin/env python3
"""spillway against scipy and scikit-learn on the same generated files, in one run.

PageRank: `spillway run pagerank` on an R-MAT edge list against scipy's CSR power iteration
(same formulation: parallel edges counted, dangling mass spread uniformly, start 1/N).
K-means: `spillway run kmeans` against scikit-learn's KMeans(algorithm="lloyd") with the same
initial centres (the first k points), on the same CSV.

Both answers are checked before any time is printed: PageRank to an L1 distance of 1e-9,
K-means assignments identical (float64). Times:

* spillway "per iteration": the mean of the per-iteration times in its JSON report;
  "total": its `compute_seconds` (set-up and every iteration; loading the file excluded).
* scipy "set-up": CSR construction and out-degrees from the parsed edge arrays; "per
  iteration": the mean over the iterations; "total": both.
* scikit-learn "per iteration": (time of fit with max_iter=N - time with max_iter=1) / (N - 1),
  so its set-up (validation, norms) is not charged to the iterations.

Usage: bench_peers.py --spillway BIN --graph FILE --points FILE [options]; run by
scripts/bench_peers.sh, which installs the peers and generates the inputs.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp


def run_spillway(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def read_edges(path):
    with open(path, "rb") as f:
        data = f.read()
    # Drop comment lines (the generator writes one header line).
    if data.startswith(b"#"):
        data = data[data.index(b"\n") + 1:]
    flat = np.fromstring(data, dtype=np.int64, sep=" ")
    return flat[0::2], flat[1::2]


def scipy_pagerank(src, dst, iterations, damping):
    t0 = time.perf_counter()
    n = int(max(src.max(), dst.max())) + 1
    # Row = target, column = source: y = A @ (x / deg).
    a = sp.csr_matrix((np.ones(len(src)), (dst, src)), shape=(n, n))
    deg = np.bincount(src, minlength=n).astype(np.float64)
    dangling = deg == 0
    inv = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, deg))
    setup = time.perf_counter() - t0
    x = np.full(n, 1.0 / n)
    t1 = time.perf_counter()
    for _ in range(iterations):
        d = x[dangling].sum()
        x = (1.0 - damping) / n + damping * (a @ (x * inv) + d / n)
    per_iter = (time.perf_counter() - t1) / iterations
    return x, setup, per_iter


def read_ranks(path, n):
    got = np.zeros(n)
    v, r = np.loadtxt(path, unpack=True)
    got[v.astype(np.int64)] = r
    return got


def pagerank(args, out):
    src, dst = read_edges(args.graph)
    best = None
    for _ in range(args.reps):
        x, setup, per_iter = scipy_pagerank(src, dst, args.iterations, 0.85)
        if best is None or setup + per_iter * args.iterations < best[1] + best[2] * args.iterations:
            best = (x, setup, per_iter)
    x, s_setup, s_iter = best
    s_total = s_setup + s_iter * args.iterations
    rows = []
    for ranks in args.ranks:
        ranks_file = os.path.join(args.workdir, f"ranks-{ranks}.txt")
        runs = []
        for _ in range(args.reps):
            report = run_spillway([
                args.spillway, "run", "pagerank", "--input", args.graph,
                "--iterations", str(args.iterations), "--tolerance", "0",
                "--ranks", str(ranks), "--out", ranks_file, "--json"])
            runs.append(report)
        got = read_ranks(ranks_file, len(x))
        l1 = float(np.abs(got - x).sum())
        if l1 > 1e-9:
            sys.exit(f"pagerank: spillway at {ranks} ranks is {l1:.3e} (L1) from scipy")
        report = min(runs, key=lambda r: r["compute_seconds"])
        it = np.mean(report["iteration_seconds"])
        total = report["compute_seconds"]
        rows.append((ranks, it, total, total - it * len(report["iteration_seconds"]), l1))
    print(f"### PageRank, {args.graph_name}, {args.iterations} iterations "
          f"(best of {args.reps})\n", file=out)
    print("| | set-up | per iteration | total | x scipy per iteration | x scipy total | L1 vs scipy |", file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    print(f"| scipy CSR | {s_setup*1e3:.0f} ms | {s_iter*1e3:.1f} ms | {s_total*1e3:.0f} ms | 1 | 1 | |",
          file=out)
    for ranks, it, total, setup, l1 in rows:
        print(f"| spillway {ranks} rank{'s' if ranks > 1 else ''} | {setup*1e3:.0f} ms | {it*1e3:.1f} ms | "
              f"{total*1e3:.0f} ms | {s_iter/it:.2f}x | {s_total/total:.2f}x | {l1:.1e} |", file=out)
    print(file=out)
    return rows


def kmeans(args, out):
    from sklearn.cluster import KMeans
    import threadpoolctl

    x64 = np.loadtxt(args.points, delimiter=",", dtype=np.float64)
    k = args.k
    rows = []
    spill = {}
    for ranks in args.ranks:
        assign_file = os.path.join(args.workdir, f"assign-{ranks}.txt")
        runs = []
        for _ in range(args.reps):
            runs.append(run_spillway([
                args.spillway, "run", "kmeans", "--input", args.points, "--k", str(k),
                "--iterations", str(args.kmeans_iterations), "--init", "first",
                "--ranks", str(ranks), "--assign", assign_file, "--json"]))
        report = min(runs, key=lambda r: np.mean(r["iteration_seconds"]))
        spill[ranks] = (report, np.loadtxt(assign_file, dtype=np.int64))
    iters = int(spill[args.ranks[0]][0]["iterations"])

    def sk_fit(x, max_iter):
        km = KMeans(n_clusters=k, init=x[:k], n_init=1, algorithm="lloyd", max_iter=max_iter,
                    tol=0.0, copy_x=True)
        t0 = time.perf_counter()
        km.fit(x)
        return km, time.perf_counter() - t0

    sk = {}
    with threadpoolctl.threadpool_limits(limits=args.threads):
        for name, x in (("float64", x64), ("float32", x64.astype(np.float32))):
            best1 = min(sk_fit(x, 1)[1] for _ in range(args.reps))
            fits = [sk_fit(x, iters) for _ in range(args.reps)]
            km, best_n = min(fits, key=lambda f: f[1])
            per_iter = (best_n - best1) / max(km.n_iter_ - 1, 1)
            sk[name] = (km, per_iter, best_n)
    km64 = sk["float64"][0]
    for ranks in args.ranks:
        report, labels = spill[ranks]
        if int(report["iterations"]) != km64.n_iter_:
            print(f"note: spillway ran {report['iterations']} iterations, scikit-learn {km64.n_iter_}",
                  file=sys.stderr)
        differ = int((labels != km64.labels_).sum())
        if differ:
            sys.exit(f"kmeans: {differ} assignments differ from scikit-learn (float64) at {ranks} ranks")
        it = np.mean(report["iteration_seconds"])
        rows.append((ranks, it, report["compute_seconds"], differ))
    n, d = x64.shape
    print(f"### K-means lloyd, {n} x {d}, k = {k}, {iters} iterations, first-k initial centres "
          f"(best of {args.reps}; scikit-learn with {args.threads} threads)\n", file=out)
    print("| | per iteration | x sklearn float64 | x sklearn float32 | assignments differing |", file=out)
    print("|---|---|---|---|---|", file=out)
    for name in ("float64", "float32"):
        print(f"| scikit-learn {name} | {sk[name][1]*1e3:.0f} ms | {sk['float64'][1]/sk[name][1]:.2f}x | "
              f"{sk['float32'][1]/sk[name][1]:.2f}x | |", file=out)
    for ranks, it, _total, differ in rows:
        print(f"| spillway {ranks} rank{'s' if ranks > 1 else ''} | {it*1e3:.0f} ms | "
              f"{sk['float64'][1]/it:.2f}x | {sk['float32'][1]/it:.2f}x | {differ} |", file=out)
    print(file=out)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spillway", required=True)
    p.add_argument("--graph", required=True)
    p.add_argument("--graph-name", default="R-MAT")
    p.add_argument("--points", required=True)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--kmeans-iterations", type=int, default=20)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workdir", required=True)
    p.add_argument("--only", choices=["pagerank", "kmeans"])
    args = p.parse_args()
    out = sys.stdout
    if args.only != "kmeans":
        rows = pagerank(args, out)
        base = rows[0]
        for ranks, it, total, _s, _l in rows[1:]:
            print(f"PageRank parallel speed-up at {ranks} ranks: {base[1]/it:.2f}x per iteration, "
                  f"{base[2]/total:.2f}x total\n", file=out)
    if args.only != "pagerank":
        rows = kmeans(args, out)
        base = rows[0]
        for ranks, it, _t, _d in rows[1:]:
            print(f"K-means parallel speed-up at {ranks} ranks: {base[1]/it:.2f}x per iteration\n", file=out)


if __name__ == "__main__":
    main()
