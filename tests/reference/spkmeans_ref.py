#!/usr/bin/env python3
"""Checks a spillway spherical K-means result against a numpy/scipy implementation.

Usage: spkmeans_ref.py INPUT K MAX_ITER CENTROIDS ASSIGN

INPUT is a Matrix Market coordinate file (.mtx, read with scipy.io.mmread; duplicates add up)
or an SVMlight file (any other name, read with sklearn.datasets.load_svmlight_file, 1-based
indices). The reference: rows scaled to unit L2 norm (zero rows stay zero); initial centroids
are the first K rows; each iteration assigns every row to the centroid of largest dot product
(ties to the lower index: numpy.argmax) and stops if no row moved; otherwise each centroid is
its cluster's sum scaled to unit norm (a zero sum keeps the old centroid). After MAX_ITER
iterations without convergence the rows are assigned once more. Compares with spillway's
`--out` (max abs difference <= 1e-9) and `--assign` (equal).
Exit 1: mismatch; 2: unreadable input; 3: a required module is missing.
"""

import sys

try:
    import numpy as np
    import scipy.io
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file
except ImportError as e:  # pragma: no cover - environment problem
    print(
        f"spkmeans_ref.py: missing Python module: {e} "
        "(needs numpy, scipy, scikit-learn; set SPILLWAY_PYTHON to an interpreter that has them)",
        file=sys.stderr,
    )
    sys.exit(3)

TOLERANCE = 1e-9


def fail(msg, code=1):
    print(f"spkmeans_ref.py: {msg}", file=sys.stderr)
    sys.exit(code)


def load(path):
    try:
        if path.endswith(".mtx"):
            x = sp.csr_matrix(scipy.io.mmread(path))
        else:
            x, _ = load_svmlight_file(path, zero_based=False)
            x = sp.csr_matrix(x)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}", 2)
    x.sum_duplicates()
    x.sort_indices()
    return x.astype(np.float64)


def spherical_kmeans(x, k, max_iter):
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    x = sp.csr_matrix(sp.diags(scale) @ x)
    centroids = x[:k].toarray()
    labels = np.full(x.shape[0], -1)
    converged = False
    for it in range(max_iter):
        new = np.asarray(x @ centroids.T).argmax(axis=1)
        moved = int((new != labels).sum())
        labels = new
        if moved == 0:
            converged = True
            break
        for c in range(k):
            s = np.asarray(x[labels == c].sum(axis=0)).ravel()
            n = np.sqrt(np.dot(s, s))
            if n > 0:
                centroids[c] = s / n
    if not converged and max_iter > 0:
        labels = np.asarray(x @ centroids.T).argmax(axis=1)
    return centroids, labels, it + 1, converged


def main():
    if len(sys.argv) != 6:
        fail("usage: spkmeans_ref.py INPUT K MAX_ITER CENTROIDS ASSIGN", 2)
    path, k, max_iter, centroids_path, assign_path = sys.argv[1:]
    k, max_iter = int(k), int(max_iter)
    x = load(path)
    try:
        got = np.loadtxt(centroids_path, delimiter=",", ndmin=2)
        got_labels = np.loadtxt(assign_path, ndmin=1, dtype=np.int64)
    except (OSError, ValueError) as e:
        fail(f"{e}", 2)
    centroids, labels, iters, converged = spherical_kmeans(x, k, max_iter)
    if got.shape[0] != k:
        fail(f"{got.shape[0]} centroids, expected {k}")
    # spillway's centroids have as many columns as the matrix; an SVMlight matrix read by
    # scikit-learn has as many as its largest index.
    width = max(got.shape[1], centroids.shape[1])
    pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])))
    diff = float(np.abs(pad(got) - pad(centroids)).max())
    wrong = int((labels != got_labels).sum()) if got_labels.shape == labels.shape else -1
    print(
        f"{x.shape[0]} rows, {x.shape[1]} columns, {x.nnz} non-zeros, k = {k}: reference "
        f"{iters} iterations (converged: {converged}), max centroid difference {diff:.3e}, "
        f"{wrong} labels differ"
    )
    if wrong != 0:
        fail(f"labels differ ({got_labels.shape[0]} labels for {labels.shape[0]} rows)")
    if not diff <= TOLERANCE:
        fail(f"centroids differ by {diff:.3e} > {TOLERANCE:g}")


if __name__ == "__main__":
    main()
