#!/usr/bin/env python3
"""Checks spillway connected components against scipy.

Usage: cc_ref.py EDGES_FILE RESULT_FILE

EDGES_FILE is a SNAP edge list ("src dst" per line, '#' comments), edges undirected.
RESULT_FILE holds "vertex label" lines, one per vertex that appears in an edge, in any
order; the label must be the smallest vertex id of the vertex's component, as computed by
scipy.sparse.csgraph.connected_components (relabelled to the smallest id per component).

Exit 0: equal; 1: mismatch; 2: usage; 3: a required Python module is missing.
"""

import sys

try:
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
except ImportError as e:  # pragma: no cover - environment problem
    print(f"cc_ref.py: missing Python module: {e}", file=sys.stderr)
    sys.exit(3)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    edges = np.loadtxt(sys.argv[1], dtype=np.int64, comments="#", ndmin=2)
    verts = np.unique(edges.ravel())
    # Compact ids so the matrix stays small whatever the ids are.
    idx = np.searchsorted(verts, edges)
    n = len(verts)
    a = sp.coo_matrix((np.ones(len(edges)), (idx[:, 0], idx[:, 1])), shape=(n, n))
    k, comp = connected_components(a, directed=False)
    smallest = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(smallest, comp, verts)
    expected = dict(zip(verts.tolist(), smallest[comp].tolist()))
    got = {}
    with open(sys.argv[2]) as f:
        for i, line in enumerate(f, 1):
            v, label = map(int, line.split())
            if v in got:
                print(f"line {i}: vertex {v} listed twice")
                sys.exit(1)
            got[v] = label
    if got != expected:
        missing = set(expected) - set(got)
        extra = set(got) - set(expected)
        wrong = [v for v in expected if v in got and got[v] != expected[v]]
        print(f"mismatch: {len(missing)} missing, {len(extra)} extra, {len(wrong)} wrong")
        if wrong:
            v = wrong[0]
            print(f"vertex {v}: got {got[v]}, expected {expected[v]}")
        sys.exit(1)
    print(f"components equal to scipy: {k} components, {n} vertices")


main()
