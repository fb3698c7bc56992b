#!/usr/bin/env python3
"""Connected components: spillway's MapReduce cc against scipy and networkit on one graph.

Usage: bench_cc.py --spillway BIN --graph EDGES [--ranks 2] [--reps 3]

Loads the edge list once with numpy (not timed), then times
  * scipy.sparse.csgraph.connected_components on a CSR matrix (building the matrix timed
    separately),
  * networkit.components.ConnectedComponents (building the graph timed separately; networkit
    uses all cores),
  * `spillway run cc --input EDGES --ranks R --json --out FILE` (its compute_seconds: the star
    operations and the labelling, without reading the file),
checks that every system finds the same partition (spillway's labels against scipy's,
relabelled to the smallest vertex id), and prints a Markdown table of medians.
Exit 1 if a result differs, 3 if a module is missing.
"""

import argparse
import json
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()

    edges = np.loadtxt(a.graph, dtype=np.int64, comments="#", ndmin=2)
    verts = np.unique(edges.ravel())
    n = int(edges.max()) + 1
    rows = []

    build, run = [], []
    for _ in range(a.reps):
        t = time.perf_counter()
        m = sp.csr_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
        build.append(time.perf_counter() - t)
        t = time.perf_counter()
        k, comp = connected_components(m, directed=False)
        run.append(time.perf_counter() - t)
    smallest = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(smallest, comp[verts], verts)
    expected = smallest[comp[verts]]
    rows.append(("scipy connected_components", statistics.median(build), statistics.median(run)))

    if nk is not None:
        build, run = [], []
        for _ in range(a.reps):
            t = time.perf_counter()
            g = nk.graph.Graph(n, weighted=False, directed=False)
            g.addEdges((np.ascontiguousarray(edges[:, 0], dtype=np.uint64),
                        np.ascontiguousarray(edges[:, 1], dtype=np.uint64)))
            build.append(time.perf_counter() - t)
            t = time.perf_counter()
            cc = nk.components.ConnectedComponents(g)
            cc.run()
            run.append(time.perf_counter() - t)
        part = np.array(cc.getPartition().getVector())
        # Same partition: the same number of parts over the vertices of edges, and each
        # scipy component maps to one networkit part.
        pairs = set(zip(comp[verts].tolist(), part[verts].tolist()))
        if len(pairs) != len(set(comp[verts].tolist())) or len(pairs) != len(set(part[verts].tolist())):
            print("networkit's components differ from scipy's", file=sys.stderr)
            sys.exit(1)
        rows.append((f"networkit ConnectedComponents ({nk.getMaxNumberOfThreads()} threads)",
                     statistics.median(build), statistics.median(run)))

    times = []
    with tempfile.TemporaryDirectory() as d:
        out = f"{d}/cc.txt"
        for _ in range(a.reps):
            r = subprocess.run([a.spillway, "run", "cc", "--input", a.graph, "--ranks", str(a.ranks),
                                "--json", "--out", out], check=True, capture_output=True, text=True)
            rep = json.loads(r.stdout)
            times.append((rep["load_seconds"], rep["compute_seconds"], rep["iterations"]))
        got = np.loadtxt(out, dtype=np.int64, ndmin=2)
        got = got[np.argsort(got[:, 0])]
        if not (np.array_equal(got[:, 0], verts) and np.array_equal(got[:, 1], expected)):
            print("spillway's labels differ from scipy's", file=sys.stderr)
            sys.exit(1)
    load = statistics.median(t[0] for t in times)
    comp_t = statistics.median(t[1] for t in times)
    rows.append((f"spillway run cc, {a.ranks} ranks ({times[0][2]} star operations)", load, comp_t))

    print(f"{len(edges)} edges, {len(verts)} vertices, {k - (n - len(verts))} components; "
          f"medians of {a.reps}\n")
    print("| system | load / build | components | vs scipy |")
    print("|---|---|---|---|")
    base = rows[0][2]
    for name, b, r in rows:
        print(f"| {name} | {b:.3f} s | {r:.3f} s | {r / base:.1f}x |")


main()
