#!/usr/bin/env python3
"""Checks a spillway PageRank result against two independent references.

Usage: pagerank_ref.py EDGES_FILE RESULT_FILE [--damping 0.85]

EDGES_FILE is a SNAP edge list ("src dst" per line, '#' comments, N = 1 + max id) or a
Matrix Market coordinate file (*.mtx; entry (i, j) is the edge i -> j, N = max(rows, cols)).
RESULT_FILE holds "vertex rank" for every vertex 0..N-1, in order.

References (both converged far below the comparison tolerance):
  * networkx.pagerank on a DiGraph (only when the graph has no duplicate edges, since a
    DiGraph cannot hold parallel edges);
  * a scipy sparse power iteration: column-stochastic, parallel edges summed, dangling mass
    spread uniformly, start 1/N, until the L1 change is below 1e-15.

Prints the L1 distance to each reference; exits 0 only if every distance is <= 1e-9 and the
result lists exactly the vertices 0..N-1 in order. Exit 1: mismatch; 2: usage or unreadable
input; 3: a required Python module is missing.
"""

import argparse
import sys

try:
    import networkx as nx
    import numpy as np
    import scipy.io
    import scipy.sparse as sp
except ImportError as e:  # pragma: no cover - environment problem
    print(
        f"pagerank_ref.py: missing Python module: {e} "
        "(needs numpy, scipy, networkx; set SPILLWAY_PYTHON to an interpreter that has them)",
        file=sys.stderr,
    )
    sys.exit(3)

TOLERANCE = 1e-9


def fail(msg, code=1):
    print(f"pagerank_ref.py: {msg}", file=sys.stderr)
    sys.exit(code)


def read_edges(path):
    """Returns (n, src, dst) as numpy int64 arrays (parallel edges kept)."""
    if path.endswith(".mtx"):
        try:
            m = sp.coo_matrix(scipy.io.mmread(path))
        except (OSError, ValueError) as e:
            fail(f"{path}: {e}", 2)
        n = max(m.shape)
        return n, np.asarray(m.row, dtype=np.int64), np.asarray(m.col, dtype=np.int64)
    src, dst = [], []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 2:
                fail(f"{path}:{lineno}: expected 'src dst'", 2)
            src.append(int(fields[0]))
            dst.append(int(fields[1]))
    if not src:
        fail(f"{path}: no edges", 2)
    src = np.array(src, dtype=np.int64)
    dst = np.array(dst, dtype=np.int64)
    n = int(max(src.max(), dst.max())) + 1
    return n, src, dst


def read_result(path):
    vertices, ranks = [], []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) != 2:
                fail(f"{path}:{lineno}: expected 'vertex rank', found {line!r}")
            vertices.append(int(fields[0]))
            ranks.append(float(fields[1]))
    return vertices, np.array(ranks, dtype=np.float64)


def scipy_pagerank(n, src, dst, damping):
    # a[v, u] = number of edges u -> v (duplicates summed by the csr conversion).
    a = sp.coo_matrix((np.ones(len(src)), (dst, src)), shape=(n, n)).tocsr()
    a.sum_duplicates()
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    dangling = outdeg == 0
    inv = np.zeros(n)
    inv[~dangling] = 1.0 / outdeg[~dangling]
    x = np.full(n, 1.0 / n)
    for it in range(1, 100001):
        nxt = (1.0 - damping) / n + damping * (a @ (x * inv) + x[dangling].sum() / n)
        delta = np.abs(nxt - x).sum()
        x = nxt
        if delta < 1e-15:
            return x, it
    fail("scipy reference did not converge to an L1 change below 1e-15")


def networkx_pagerank(n, src, dst, damping):
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    pr = nx.pagerank(g, alpha=damping, tol=1e-14, max_iter=10000)
    return np.array([pr[v] for v in range(n)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edges")
    parser.add_argument("result")
    parser.add_argument("--damping", type=float, default=0.85)
    args = parser.parse_args()

    n, src, dst = read_edges(args.edges)
    vertices, ranks = read_result(args.result)
    if vertices != list(range(n)):
        extra = sorted(set(vertices) - set(range(n)))[:10]
        missing = sorted(set(range(n)) - set(vertices))[:10]
        fail(
            f"vertex set differs: expected 0..{n - 1} in order ({n} vertices), result has "
            f"{len(vertices)} lines; missing {missing}, unexpected {extra}"
        )

    ok = True
    reference, iters = scipy_pagerank(n, src, dst, args.damping)
    l1 = float(np.abs(ranks - reference).sum())
    print(f"scipy power iteration ({iters} iterations): L1 = {l1:.3e}")
    ok &= l1 <= TOLERANCE

    pairs = set(zip(src.tolist(), dst.tolist()))
    if len(pairs) != len(src):
        print(f"networkx: skipped ({len(src) - len(pairs)} duplicate edges)")
    else:
        l1 = float(np.abs(ranks - networkx_pagerank(n, src, dst, args.damping)).sum())
        print(f"networkx.pagerank: L1 = {l1:.3e}")
        ok &= l1 <= TOLERANCE

    print(f"{n} vertices, {len(src)} edges, rank sum {ranks.sum():.15f}")
    if not ok:
        fail(f"L1 distance above {TOLERANCE:g}")


if __name__ == "__main__":
    main()
