#!/usr/bin/env python3
"""Connected components: spillway against scipy and networkit on one graph, in one run.

Usage: bench_cc.py --spillway BIN --graph EDGES [--ranks 2] [--reps 3]
                   [--engines direct,mapreduce] [--budget-fraction 0.25] [--budget-ranks 8]

Parses the edge list once with numpy (not timed; comment lines only at the top), then times,
each --reps times (medians):
  * scipy.sparse.csgraph.connected_components on a CSR matrix (building the matrix from the
    numpy arrays timed separately as "load / build");
  * networkit ConnectedComponents and ParallelConnectedComponents with 2 threads (building the
    graph timed separately, once);
  * `spillway run cc --input EDGES --ranks R --engine E --json --out FILE`: its load_seconds
    (reading and parsing the file) and compute_seconds (the components and labels, without
    the output);
  * optionally the direct engine under a memory budget of --budget-fraction of the edge data
    (8 bytes per edge), with --budget-ranks ranks (2 running);
checks that every system finds the same partition (spillway's labels against scipy's
relabelled to the smallest vertex id; networkit's as a partition), and prints a Markdown
table with each time's ratio to scipy's and spillway's direct engine against each peer.
Exit 1 if a result differs, 3 if a module is missing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
except ImportError as e:  # pragma: no cover
    print(f"bench_cc.py: missing module: {e}", file=sys.stderr)
    sys.exit(3)
try:
    import networkit as nk
except ImportError:  # networkit is optional
    nk = None


def read_edges(path):
    """The edges of a SNAP file as an (m, 2) int64 array."""
    with open(path, "rb") as f:
        data = f.read()
    start = 0
    while data.startswith(b"#", start):
        start = data.index(b"\n", start) + 1
    if b"#" in data[start:]:
        return np.loadtxt(path, dtype=np.int64, comments="#", ndmin=2)
    flat = np.array(data[start:].split(), dtype=np.int64)
    return flat.reshape(-1, 2)


def same_partition(a, b):
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def spillway(args, extra, out, reps):
    times = []
    for _ in range(reps):
        cmd = [args.spillway, "run", "cc", "--input", args.graph, "--json", "--out", out] + extra
        r = subprocess.run(cmd, check=True, capture_output=True, text=True)
        rep = json.loads(r.stdout)
        times.append(rep)
    return times


def check_labels(out, verts, expected, what):
    got = read_edges(out)
    got = got[np.argsort(got[:, 0], kind="stable")]
    if not (np.array_equal(got[:, 0], verts) and np.array_equal(got[:, 1], expected)):
        print(f"{what}: labels differ from scipy's", file=sys.stderr)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engines", default="direct,mapreduce")
    ap.add_argument("--budget-fraction", type=float, default=0.25)
    ap.add_argument("--budget-ranks", type=int, default=8)
    a = ap.parse_args()

    edges = read_edges(a.graph)
    verts = np.unique(edges.ravel())
    n = int(edges.max()) + 1
    m = len(edges)
    rows = []

    build, run = [], []
    for _ in range(a.reps):
        t = time.perf_counter()
        mat = sp.csr_matrix((np.ones(m, dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
        build.append(time.perf_counter() - t)
        t = time.perf_counter()
        k, comp = connected_components(mat, directed=False)
        run.append(time.perf_counter() - t)
        del mat
    smallest = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(smallest, comp[verts], verts)
    expected = smallest[comp[verts]]
    components = len(np.unique(comp[verts]))
    rows.append(("scipy connected_components", statistics.median(build), statistics.median(run)))
    peers = {}

    if nk is not None:
        nk.setNumberOfThreads(2)
        for name, algo in (("ConnectedComponents", nk.components.ConnectedComponents),
                           ("ParallelConnectedComponents", nk.components.ParallelConnectedComponents)):
            # Building the graph is slow (about 1 us per edge): once, timed once.
            t = time.perf_counter()
            g = nk.graph.Graph(n, weighted=False, directed=False)
            g.addEdges((np.ascontiguousarray(edges[:, 0], dtype=np.uint64),
                        np.ascontiguousarray(edges[:, 1], dtype=np.uint64)))
            build = [time.perf_counter() - t]
            run = []
            for _ in range(a.reps):
                t = time.perf_counter()
                cc = algo(g)
                cc.run()
                run.append(time.perf_counter() - t)
            part = np.array(cc.getPartition().getVector())
            if not same_partition(comp[verts], part[verts]):
                print(f"networkit {name}: components differ from scipy's", file=sys.stderr)
                sys.exit(1)
            label = f"networkit {name} ({nk.getMaxNumberOfThreads()} threads)"
            rows.append((label, statistics.median(build), statistics.median(run)))
            peers[label] = statistics.median(run)
            del g

    ours = {}
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cc.txt")
        for engine in [e for e in a.engines.split(",") if e]:
            reps = spillway(a, ["--ranks", str(a.ranks), "--engine", engine], out, a.reps)
            check_labels(out, verts, expected, f"spillway --engine {engine}")
            load = statistics.median(r["load_seconds"] for r in reps)
            comp_t = statistics.median(r["compute_seconds"] for r in reps)
            label = f"spillway run cc --engine {engine}, {a.ranks} ranks"
            rows.append((label, load, comp_t))
            ours[label] = comp_t
        if a.budget_fraction > 0:
            budget = max(1, int(8 * m * a.budget_fraction) >> 20)
            extra = ["--ranks", str(a.budget_ranks), "--running", "2", "--mem-budget", f"{budget}M"]
            reps = spillway(a, extra, out, a.reps)
            check_labels(out, verts, expected, "spillway under a budget")
            load = statistics.median(r["load_seconds"] for r in reps)
            comp_t = statistics.median(r["compute_seconds"] for r in reps)
            rss = statistics.median(r["peak_rss"] for r in reps) / 2**20
            label = (f"spillway run cc --engine direct, {a.budget_ranks} ranks, 2 running, "
                     f"--mem-budget {budget}M ({a.budget_fraction:g} of the edges' {8 * m >> 20} MiB; "
                     f"peak RSS {rss:.0f} MiB)")
            rows.append((label, load, comp_t))
            ours[label] = comp_t

    print(f"{m} edges, {len(verts)} vertices, {components} components; medians of {a.reps}; "
          f"every partition equal to scipy's\n")
    print("| system | load / build | components | time / scipy's |")
    print("|---|---:|---:|---:|")
    base = rows[0][2]
    for name, b, r in rows:
        print(f"| {name} | {b:.3f} s | {r:.3f} s | {r / base:.2f} |")
    print()
    print("| spillway | peer | speed-up (peer time / spillway time) |")
    print("|---|---|---:|")
    allpeers = {"scipy connected_components": base, **peers}
    for mine, t in ours.items():
        for peer, pt in allpeers.items():
            print(f"| {mine} | {peer} | {pt / t:.2f}x |")


main()
