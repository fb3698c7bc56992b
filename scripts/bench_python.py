#!/usr/bin/env python3
"""Python calls of spillway against the tool each one mirrors, measured in the same run.

Each row times the whole call from Python, including the conversion of its inputs (scipy's
CSR arrays checked and copied into the ranks' memory), against:

* pagerank: a scipy power iteration (the transition matrix built from the same CSR input,
  the same start, damping, dangling rule and stopping test) and networkx's ``pagerank``
  (on a DiGraph; the call converts it to scipy itself);
* KMeans: scikit-learn's ``KMeans`` (lloyd, float64, the same initial centres, tol=0, one
  init), whose labels must be the same;
* connected_components: ``scipy.sparse.csgraph.connected_components`` (weak), the same
  labels;
* compress: ``pysz`` (SZ3) when installed, and zlib on the raw bytes (lossless, for scale),
  with the same absolute bound, on a synthetic smooth 3-D field (float32).

It also runs the CLI (``spillway run pagerank``, the release binary) on the same graph
written as an edge list and compares the Python call's wall time with the CLI's compute
time (what it reports after loading the file): the overhead of calling from Python.

Usage: python scripts/bench_python.py [--scale 18] [--reps 3] [--cli target/release/spillway]
Prints a Markdown table; ratios are the baseline's time over spillway's (above 1: faster).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components as scipy_cc

import spillway


def timed(fn, reps):
    """(median seconds, last result) of `reps` calls."""
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def rmat(scale, edge_factor, seed=1):
    rng = np.random.default_rng(seed)
    m = (1 << scale) * edge_factor
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(m)
        down = r >= 0.76
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)
        src |= down.astype(np.int64) << bit
        dst |= right.astype(np.int64) << bit
    keep = src != dst
    n = 1 << scale
    A = sp.csr_array((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1.0
    return A


def scipy_pagerank(A, alpha=0.85, tol=1e-6, max_iter=100):
    """Power iteration with scipy.sparse, networkx's formulation and stopping test."""
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    P = (sp.diags_array(inv) @ A).T.tocsr()
    dangling = out == 0
    x = np.full(n, 1.0 / n)
    for i in range(max_iter):
        last = x
        x = alpha * (P @ x + x[dangling].sum() / n) + (1 - alpha) / n
        if np.abs(x - last).sum() < n * tol:
            return x, i + 1
    return x, max_iter


def row(rows, name, ours, base_name, base, note=""):
    rows.append((name, f"{ours:.3f} s", base_name, f"{base:.3f} s", f"{base / ours:.2f}x", note))
    print(f"  {name}: spillway {ours:.3f} s, {base_name} {base:.3f} s -> {base / ours:.2f}x {note}", flush=True)


def bench_pagerank(args, rows):
    A = rmat(args.scale, 16)
    n, m = A.shape[0], A.nnz
    print(f"pagerank: R-MAT scale {args.scale}, {n} vertices, {m} edges", flush=True)
    t_ours, ours = timed(lambda: spillway.pagerank(A, tol=1e-6, max_iter=100), args.reps)
    iters = spillway.run_stats()["iterations"]
    t_sc, (ref, sc_iters) = timed(lambda: scipy_pagerank(A), args.reps)
    l1 = np.abs(ours - ref).sum()
    row(rows, f"pagerank, {m / 1e6:.1f}M edges", t_ours, "scipy power iteration", t_sc,
        f"{iters} / {sc_iters} iterations, L1 {l1:.1e}")
    # The same work on both sides: 20 iterations, no stopping test.
    t_ours20, ours20 = timed(lambda: spillway.pagerank(A, tol=0, max_iter=20), args.reps)
    t_sc20, (ref20, _) = timed(lambda: scipy_pagerank(A, tol=0, max_iter=20), args.reps)
    row(rows, f"pagerank, {m / 1e6:.1f}M edges, 20 iterations", t_ours20, "scipy power iteration", t_sc20,
        f"L1 {np.abs(ours20 - ref20).sum():.1e}")
    if not args.no_networkx:
        import networkx as nx

        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        src, dst = A.nonzero()
        G.add_edges_from(zip(src.tolist(), dst.tolist()))
        t = time.perf_counter()
        pr = nx.pagerank(G, tol=1e-6, max_iter=100)
        t_nx = time.perf_counter() - t
        l1 = np.abs(ours - np.array([pr[i] for i in range(n)])).sum()
        row(rows, f"pagerank, {m / 1e6:.1f}M edges", t_ours, "networkx pagerank", t_nx, f"L1 {l1:.1e}")
        del G
    cli = args.cli
    if cli and os.path.exists(cli):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "edges.txt")
            src, dst = A.nonzero()
            with open(path, "w") as f:
                for k in range(0, len(src), 1 << 20):
                    f.write("\n".join(f"{a} {b}" for a, b in zip(src[k:k + (1 << 20)].tolist(), dst[k:k + (1 << 20)].tolist())))
                    f.write("\n")
            ranks = spillway.Config().ranks
            for label, iters, tol, t_py in (("", 100, n * 1e-6, t_ours), (", 20 iterations", 20, 0.0, t_ours20)):
                computes = []
                for _ in range(args.reps):
                    p = subprocess.run([cli, "run", "pagerank", "--input", path, "--ranks", str(ranks),
                                        "--iterations", str(iters), "--tolerance", repr(tol), "--json"],
                                       capture_output=True, text=True, check=True)
                    report = json.loads(p.stdout)
                    computes.append(report["compute_seconds"])
                compute = statistics.median(computes)
                rows.append((f"pagerank, {m / 1e6:.1f}M edges{label}", f"{t_py:.3f} s", "CLI compute time",
                             f"{compute:.3f} s", f"{compute / t_py:.2f}x",
                             f"Python call overhead {100 * (t_py / compute - 1):+.1f}% ({report['iterations']} iterations)"))
                print(f"  CLI compute {compute:.3f} s ({report['iterations']} iterations), python {t_py:.3f} s", flush=True)


def bench_kmeans(args, rows):
    from sklearn.cluster import KMeans as SkKMeans

    rng = np.random.default_rng(4)
    n, d, k = args.points, 16, 16
    centres = rng.normal(0, 10, (k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(0, 3, (n, d))
    init = X[rng.choice(n, k, replace=False)].copy()
    print(f"kmeans: {n} points, {d} dimensions, k = {k}", flush=True)
    t_ours, ours = timed(lambda: spillway.KMeans(k, init=init, max_iter=args.kmeans_iter, tol=0).fit(X), args.reps)
    t_sk, ref = timed(lambda: SkKMeans(k, init=init, n_init=1, max_iter=args.kmeans_iter, tol=0,
                                        algorithm="lloyd").fit(X), args.reps)
    same = np.array_equal(ours.labels_, ref.labels_)
    row(rows, f"KMeans, {n / 1e6:.0f}M x {d}, k={k}", t_ours, "scikit-learn KMeans (float64)", t_sk,
        f"{ours.n_iter_} / {ref.n_iter_} iterations, labels {'equal' if same else 'DIFFER'}")


def bench_components(args, rows):
    rng = np.random.default_rng(5)
    n = 1 << args.scale
    m = 4 * n
    A = sp.csr_array((np.ones(m), (rng.integers(0, n, m), rng.integers(0, n, m))), shape=(n, n))
    A.sum_duplicates()
    print(f"connected_components: {n} vertices, {A.nnz} edges", flush=True)
    t_ours, (c1, l1) = timed(lambda: spillway.connected_components(A), args.reps)
    t_sc, (c2, l2) = timed(lambda: scipy_cc(A, directed=True, connection="weak"), args.reps)
    row(rows, f"connected_components, {A.nnz / 1e6:.1f}M edges", t_ours, "scipy csgraph", t_sc,
        f"{c1} components, labels {'equal' if np.array_equal(l1, l2) else 'DIFFER'}")


def bench_compress(args, rows):
    s = args.grid
    z, y, x = np.meshgrid(*[np.linspace(0, 4 * np.pi, s)] * 3, indexing="ij")
    rng = np.random.default_rng(6)
    f = (np.sin(x) * np.cos(y) + 0.5 * np.sin(0.5 * z + x) + 0.001 * rng.standard_normal((s, s, s))).astype(np.float32)
    span = float(f.max() - f.min())
    print(f"compress: {s}^3 float32 field ({f.nbytes / 2**20:.0f} MiB)", flush=True)
    for rel in (1e-3, 1e-4):
        eps = rel * span
        t_ours, buf = timed(lambda: spillway.compress(f, abs=eps), args.reps)
        back = spillway.decompress(buf)
        assert np.abs(back.astype(np.float64) - f).max() <= eps
        try:
            import pysz

            cfg = pysz.szConfig(f.shape)
            cfg.errorBoundMode = pysz.szErrorBoundMode.ABS
            cfg.absErrorBound = eps
            t_sz, (sz_buf, _) = timed(lambda: pysz.sz.compress(f, cfg), args.reps)
            row(rows, f"compress {f.nbytes / 2**20:.0f} MiB, bound {rel:g} x range", t_ours, "pysz (SZ3)", t_sz,
                f"size {len(buf) / 2**20:.2f} vs {sz_buf.nbytes / 2**20:.2f} MiB ({len(buf) / sz_buf.nbytes:.2f}x SZ3's)")
        except ImportError:
            print("  pysz is not installed: skipped", flush=True)
        if rel == 1e-3:
            raw = f.tobytes()
            t_z, zbuf = timed(lambda: zlib.compress(raw, 6), 1)
            row(rows, f"compress {f.nbytes / 2**20:.0f} MiB, bound {rel:g} x range", t_ours, "zlib level 6 (lossless)",
                t_z, f"size {len(buf) / 2**20:.2f} vs {len(zbuf) / 2**20:.2f} MiB")


def machine():
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=18, help="R-MAT scale of the graphs (default 18: 4M edges)")
    ap.add_argument("--points", type=int, default=1_000_000, help="K-means points (default 1M)")
    ap.add_argument("--kmeans-iter", type=int, default=30, help="K-means iteration limit (default 30)")
    ap.add_argument("--grid", type=int, default=256, help="side of the compressed 3-D grid (default 256)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (medians; default 3)")
    ap.add_argument("--cli", default="target/release/spillway", help="the CLI binary, for the overhead row")
    ap.add_argument("--no-networkx", action="store_true", help="skip networkx (slow, several GB)")
    ap.add_argument("--only", choices=["pagerank", "kmeans", "cc", "compress"], action="append")
    args = ap.parse_args()
    print(f"spillway {spillway.__version__}, {machine()}, ranks {spillway.Config().ranks}", flush=True)
    rows = []
    benches = {"pagerank": bench_pagerank, "kmeans": bench_kmeans, "cc": bench_components, "compress": bench_compress}
    for name, fn in benches.items():
        if not args.only or name in args.only:
            fn(args, rows)
    print()
    print(f"Measured {datetime.date.today()} on {machine()}; `python {' '.join(sys.argv)}`")
    print()
    print("| call | spillway | baseline | baseline time | ratio | notes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
