#!/usr/bin/env python3
"""Checks a spillway colouring and compares its number of colours with networkx's greedy one.

Usage: colour_ref.py GRAPH COLOURS [--largest-first | --at-most-largest-first]

GRAPH is a SNAP edge list ("src dst" per line, '#' comments; vertices 0 .. 1 + largest id) or a
Matrix Market coordinate file (.mtx, 1-based; vertices 0 .. max(rows, cols) - 1). Edges are
undirected; self loops are ignored. COLOURS is the `run colour --out` file, "vertex colour" per
line. Checks: every vertex appears once, colours are 0 .. c-1 (all used), no edge joins two
vertices of one colour, and c <= max degree + 1. Prints c and the colour counts of
networkx.greedy_color with the largest_first and smallest_last strategies. The vertices are
added to the networkx graph by increasing id, so largest_first breaks ties of degree by the
smaller id. With --largest-first the colouring must be networkx's largest_first colouring,
vertex by vertex; with --at-most-largest-first it must use at most as many colours.
Exit 1: invalid colouring; 2: unreadable input; 3: a required module is missing.
"""

import sys

try:
    import networkx as nx
except ImportError as e:  # pragma: no cover - environment problem
    print(
        f"colour_ref.py: missing Python module: {e} "
        "(needs networkx; set SPILLWAY_PYTHON to an interpreter that has it)",
        file=sys.stderr,
    )
    sys.exit(3)


def fail(msg, code=1):
    print(f"colour_ref.py: {msg}", file=sys.stderr)
    sys.exit(code)


def read_graph(path):
    g = nx.Graph()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"{path}: {e}", 2)
    if path.endswith(".mtx"):
        body = [l for l in lines if l.strip() and not l.lstrip().startswith("%")]
        rows, cols, _ = (int(x) for x in body[0].split())
        n = max(rows, cols)
        g.add_nodes_from(range(n))
        for l in body[1:]:
            f = l.split()
            g.add_edge(int(f[0]) - 1, int(f[1]) - 1)
    else:
        edges = []
        for l in lines:
            l = l.strip()
            if not l or l.startswith("#"):
                continue
            u, v = (int(x) for x in l.split())
            edges.append((u, v))
        n = 1 + max((max(e) for e in edges), default=-1)
        g.add_nodes_from(range(n))
        g.add_edges_from(edges)
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    return g, n


def main():
    modes = ("--largest-first", "--at-most-largest-first")
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in modes):
        fail("usage: colour_ref.py GRAPH COLOURS [--largest-first | --at-most-largest-first]", 2)
    mode = sys.argv[3] if len(sys.argv) == 4 else None
    g, n = read_graph(sys.argv[1])
    colour = {}
    try:
        with open(sys.argv[2]) as f:
            for l in f:
                v, c = (int(x) for x in l.split())
                if v in colour:
                    fail(f"vertex {v} listed twice")
                colour[v] = c
    except (OSError, ValueError) as e:
        fail(f"{sys.argv[2]}: {e}", 2)
    if sorted(colour) != list(range(n)):
        fail(f"expected vertices 0..{n - 1}, found {len(colour)} vertices")
    used = set(colour.values())
    c = len(used)
    if used != set(range(c)):
        fail(f"colours are not 0..{c - 1}: {sorted(used)[:20]}")
    bad = [(u, v) for u, v in g.edges() if colour[u] == colour[v]]
    if bad:
        fail(f"{len(bad)} edges join vertices of one colour, e.g. {bad[:5]}")
    maxdeg = max((d for _, d in g.degree()), default=0)
    if c > maxdeg + 1:
        fail(f"{c} colours > max degree + 1 = {maxdeg + 1}")
    lf_colouring = nx.greedy_color(g, strategy="largest_first")
    lf = 1 + max(lf_colouring.values(), default=-1)
    if mode == "--largest-first":
        differ = [v for v in range(n) if colour[v] != lf_colouring[v]]
        if differ:
            v = differ[0]
            fail(f"{len(differ)} vertices differ from networkx's largest_first colouring, "
                 f"e.g. vertex {v}: {colour[v]} against {lf_colouring[v]}")
    if mode == "--at-most-largest-first" and c > lf:
        fail(f"{c} colours > networkx largest_first's {lf}")
    sl = 1 + max(nx.greedy_color(g, strategy="smallest_last").values(), default=-1)
    print(
        f"{n} vertices, {g.number_of_edges()} edges, max degree {maxdeg}: spillway "
        f"{c} colours, networkx greedy largest_first {lf}, smallest_last {sl}"
    )


if __name__ == "__main__":
    main()
