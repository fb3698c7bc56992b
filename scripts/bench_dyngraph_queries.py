#!/usr/bin/env python3
"""networkx on the thesis's three query kernels, for `spillway-bench dyngraph --mode query`.

The bench writes the final graph and its queries as little-endian u32 pairs and runs this
script on them; it prints one JSON object. The kernels are the bench's:

  * BFT of the whole graph: a breadth-first search from SOURCE, then from every vertex not
    yet reached, in id order (the same traversal as the bench's; networkx's
    `connected_components` is the same set of searches but starts elsewhere);
  * intersections: |N(u) & N(v)| for every pair of PAIRS (set intersection of the
    adjacency views' keys, u and v included when they are neighbours, as the bench counts);
  * lookups: G.has_edge(u, v) for every pair of LOOKUPS.

Building the graph is not timed; each kernel is timed REPS times and the minimum printed.

Usage: bench_dyngraph_queries.py N SOURCE EDGES PAIRS LOOKUPS REPS
"""

import json
import sys
import time
from collections import deque

import networkx as nx
import numpy as np


def pairs(path):
    a = np.fromfile(path, dtype="<u4").reshape(-1, 2)
    return [(int(u), int(v)) for u, v in a]


def bft(g, n, source):
    """Visited count and roots of the whole-graph traversal."""
    seen = [False] * n
    adj = g._adj  # networkx's own traversals read this dict of dicts directly
    reached = roots = 0

    def search(r):
        nonlocal reached
        seen[r] = True
        q = deque([r])
        while q:
            u = q.popleft()
            reached += 1
            for w in adj[u]:
                if not seen[w]:
                    seen[w] = True
                    q.append(w)

    if source < n:
        search(source)
        roots += 1
    for r in range(n):
        if not seen[r]:
            search(r)
            roots += 1
    return reached, roots


def best(reps, f):
    out, t_min = None, float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        t_min = min(t_min, time.perf_counter() - t)
    return t_min, out


def main():
    n, source = int(sys.argv[1]), int(sys.argv[2])
    edges, qpairs, lookups = (pairs(p) for p in sys.argv[3:6])
    reps = int(sys.argv[6])
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    bft_s, (reached, roots) = best(reps, lambda: bft(g, n, source))
    cc_s, _ = best(reps, lambda: sum(len(c) for c in nx.connected_components(g)))
    intersect_s, common = best(
        reps, lambda: sum(len(g[u].keys() & g[v].keys()) for u, v in qpairs)
    )
    lookup_s, hits = best(reps, lambda: sum(1 for u, v in lookups if g.has_edge(u, v)))
    print(
        json.dumps(
            {
                "version": nx.__version__,
                "bft_s": bft_s,
                "connected_components_s": cc_s,
                "reached": reached,
                "roots": roots,
                "intersect_s": intersect_s,
                "common": common,
                "lookup_s": lookup_s,
                "hits": hits,
            }
        )
    )


if __name__ == "__main__":
    main()
