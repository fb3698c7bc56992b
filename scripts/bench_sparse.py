#!/usr/bin/env python3
"""Spherical K-means and SGD matrix factorisation: spillway against sequential numpy/scipy and
Python references on the same generated files, in one run.

Spherical K-means: `spillway run spkmeans` against a numpy/scipy implementation of the same
iteration (rows normalised; X @ C^T, argmax, centroid sums as one sparse product, normalised),
same first-k initial centroids, a fixed number of iterations; assignments must be identical.
SGD: `spillway run sgd` against a sequential Python loop over the same schedule (the one of
tests/reference/sgd_ref.py, the same for p = 1); U and V must be identical bit for bit. The
loop is plain Python (SGD applies one rating at a time; numpy per-rating calls are slower than
plain floats at these factor counts), so it is an interpreter-bound baseline.

Times: spillway's per-iteration times from its JSON report (mean); the references' times per
iteration (mean), set-up (normalising, building CSR) excluded on both sides.

Usage: bench_sparse.py --spillway BIN [--rows N --cols D --nnz Z --k K --iterations I]
       [--users U --items M --density F --factors R --sgd-iterations J] [--ranks 1,2]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "reference"))
import sgd_ref  # noqa: E402  (the same schedule, written from the module documentation)


def run_spillway(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def spkmeans_numpy(x, k, iterations):
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    x = sp.csr_matrix(sp.diags(scale) @ x)
    c = x[:k].toarray()
    labels = np.full(x.shape[0], -1)
    n = x.shape[0]
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        new = np.asarray(x @ c.T).argmax(axis=1)
        moved = int((new != labels).sum())
        labels = new
        if moved == 0:
            times.append(time.perf_counter() - t)
            break
        m = sp.csr_matrix((np.ones(n), (labels, np.arange(n))), shape=(k, n))
        sums = (m @ x).toarray()
        nrm = np.sqrt((sums * sums).sum(axis=1))
        ok = nrm > 0
        c[ok] = sums[ok] / nrm[ok, None]
        times.append(time.perf_counter() - t)
    else:
        labels = np.asarray(x @ c.T).argmax(axis=1)
    return labels, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cols", type=int, default=10_000)
    ap.add_argument("--nnz", type=int, default=40)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--factors", type=int, default=10)
    ap.add_argument("--sgd-iterations", type=int, default=3)
    ap.add_argument("--ranks", default="1,2")
    a = ap.parse_args()
    ranks = [int(r) for r in a.ranks.split(",")]
    rng = np.random.default_rng(2026)
    tmp = tempfile.mkdtemp(prefix="bench-sparse-")

    # Spherical K-means input: rows around k topics of columns, plus noise columns.
    topic = rng.integers(0, a.k, a.rows)
    width = a.cols // a.k
    per = rng.integers(a.nnz // 2, a.nnz * 3 // 2, a.rows)
    r = np.repeat(np.arange(a.rows), per)
    near = rng.random(r.size) < 0.7
    cols = np.where(
        near,
        np.repeat(topic, per) * width + rng.integers(0, width, r.size),
        rng.integers(0, a.cols, r.size),
    )
    x = sp.csr_matrix((rng.random(r.size) + 0.05, (r, cols)), shape=(a.rows, a.cols))
    x.sum_duplicates()
    x.sort_indices()
    mtx = os.path.join(tmp, "rows.mtx")
    scipy.io.mmwrite(mtx, x, precision=17)
    print(f"spherical K-means: {a.rows} rows, {a.cols} columns, {x.nnz} non-zeros, k = {a.k}, "
          f"{a.iterations} iterations")
    labels, times = spkmeans_numpy(x, a.k, a.iterations)
    ref = sum(times) / len(times)
    print(f"| numpy/scipy (sequential) | {ref * 1e3:.1f} ms | 1.00x | |")
    for p in ranks:
        assign = os.path.join(tmp, f"assign-{p}.txt")
        rep = run_spillway([a.spillway, "run", "spkmeans", "--input", mtx, "--k", str(a.k),
                            "--iterations", str(a.iterations), "--ranks", str(p), "--running",
                            str(min(p, 2)), "--assign", assign, "--json"])
        got = np.loadtxt(assign, dtype=np.int64)
        wrong = int((got != labels).sum())
        it = sum(rep["iteration_seconds"]) / len(rep["iteration_seconds"])
        print(f"| spillway {p} rank(s) | {it * 1e3:.1f} ms | {ref / it:.2f}x | {wrong} |")
        if wrong:
            sys.exit(f"{wrong} assignments differ")

    # SGD input: a rank-5 matrix plus noise, a share observed.
    m, n = a.users, a.items
    uu = rng.normal(size=(m, 5))
    vv = rng.normal(size=(n, 5))
    obs = np.argwhere(rng.random((m, n)) < a.density)
    rng.shuffle(obs)
    vals = (uu[obs[:, 0]] * vv[obs[:, 1]]).sum(axis=1) + 3 + 0.1 * rng.normal(size=len(obs))
    train = os.path.join(tmp, "train.mtx")
    with open(train, "w") as f:
        f.write(f"%%MatrixMarket matrix coordinate real general\n{m} {n} {len(obs)}\n")
        for (i, j), v in zip(obs, vals):
            f.write(f"{i + 1} {j + 1} {float(v)!r}\n")
    print(f"\nSGD: {m} users, {n} items, {len(obs)} ratings, {a.factors} factors, "
          f"{a.sgd_iterations} iterations")
    users, items, ratings = sgd_ref.read_mtx(train)
    k, lr, reg, seed = a.factors, 0.01, 0.05, 1
    U = [[sgd_ref.initial_factor(seed, 1, u, f, k) for f in range(k)] for u in range(users)]
    V = [[sgd_ref.initial_factor(seed, 2, i, f, k) for f in range(k)] for i in range(items)]
    block = sgd_ref.shuffled(sorted(ratings), seed, sgd_ref.SHUFFLE, 0)
    t = time.perf_counter()
    for it in range(a.sgd_iterations):
        for o in sgd_ref.update_order(seed, it, 0, len(block)):
            u, i, _, rv = block[o]
            a_, b_ = U[u], V[i]
            s = [0.0, 0.0, 0.0, 0.0]
            for f in range(k):
                s[f % 4] += a_[f] * b_[f]
            e = rv - ((s[0] + s[2]) + (s[1] + s[3]))
            for f in range(k):
                uf, vf = a_[f], b_[f]
                a_[f] = uf + lr * (e * vf - reg * uf)
                b_[f] = vf + lr * (e * uf - reg * vf)
    ref = (time.perf_counter() - t) / a.sgd_iterations
    print(f"| Python loop (sequential, p = 1 schedule) | {ref * 1e3:.1f} ms | 1.00x | |")
    for p in sorted(set([1] + [q * q for q in (1, 2) if q * q <= max(ranks) * 2])):
        out_u, out_v = os.path.join(tmp, f"u{p}.csv"), os.path.join(tmp, f"v{p}.csv")
        rep = run_spillway([a.spillway, "run", "sgd", "--input", train, "--factors", str(k),
                            "--iterations", str(a.sgd_iterations), "--ranks", str(p),
                            "--running", str(min(p, 2)), "--out-u", out_u, "--out-v", out_v,
                            "--json"])
        it = sum(rep["iteration_seconds"]) / len(rep["iteration_seconds"])
        same = ""
        if p == 1:
            got = [[float(v) for v in l.split(",")] for l in open(out_u).read().splitlines()]
            got_v = [[float(v) for v in l.split(",")] for l in open(out_v).read().splitlines()]
            same = "identical" if got == U and got_v == V else "DIFFERENT"
            if same != "identical":
                sys.exit("U or V differ from the Python loop")
        print(f"| spillway p = {p} | {it * 1e3:.1f} ms | {ref / it:.1f}x | {same} |")


if __name__ == "__main__":
    main()
