#!/usr/bin/env python3
"""Checks a spillway K-means result against scikit-learn.

Usage: kmeans_ref.py POINTS_CSV INIT_CSV CENTROIDS_OUT ASSIGN_OUT

Runs sklearn.cluster.KMeans(n_clusters=k, init=<INIT_CSV rows>, n_init=1, algorithm="lloyd",
max_iter=1000, tol=0) on POINTS_CSV (one point per line, comma-separated, no header) and
compares with spillway's --out centroids (max abs difference <= 1e-6) and --assign labels
(exactly equal). Exit 1: mismatch; 2: unreadable input; 3: a required module is missing.

Note: scikit-learn relocates clusters that become empty, spillway keeps their centroid, so
inputs must not produce empty clusters.
"""

import sys

try:
    import numpy as np
    from sklearn.cluster import KMeans
except ImportError as e:  # pragma: no cover - environment problem
    print(
        f"kmeans_ref.py: missing Python module: {e} "
        "(needs numpy, scikit-learn; set SPILLWAY_PYTHON to an interpreter that has them)",
        file=sys.stderr,
    )
    sys.exit(3)

TOLERANCE = 1e-6


def fail(msg, code=1):
    print(f"kmeans_ref.py: {msg}", file=sys.stderr)
    sys.exit(code)


def load(path, ndmin=2, dtype=np.float64):
    try:
        return np.loadtxt(path, delimiter=",", ndmin=ndmin, dtype=dtype)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}", 2)


def main():
    if len(sys.argv) != 5:
        fail("usage: kmeans_ref.py POINTS_CSV INIT_CSV CENTROIDS_OUT ASSIGN_OUT", 2)
    points_path, init_path, centroids_path, assign_path = sys.argv[1:]
    points = load(points_path)
    init = load(init_path)
    centroids = load(centroids_path)
    labels = load(assign_path, ndmin=1, dtype=np.int64)
    k = init.shape[0]

    if centroids.shape != init.shape:
        fail(f"centroids have shape {centroids.shape}, expected {init.shape}")
    if labels.shape != (points.shape[0],):
        fail(f"{labels.shape[0]} labels for {points.shape[0]} points")

    km = KMeans(n_clusters=k, init=init, n_init=1, algorithm="lloyd", max_iter=1000, tol=0)
    km.fit(points)
    diff = float(np.abs(km.cluster_centers_ - centroids).max())
    wrong = int((km.labels_ != labels).sum())
    print(
        f"{points.shape[0]} points, {points.shape[1]} dims, k = {k}, sklearn iterations "
        f"{km.n_iter_}: max centroid difference {diff:.3e}, {wrong} labels differ"
    )
    if np.bincount(km.labels_, minlength=k).min() == 0:
        fail("scikit-learn ended with an empty cluster; choose other test data")
    if not diff <= TOLERANCE:
        fail(f"centroids differ by {diff:.3e} > {TOLERANCE:g}")
    if wrong:
        first = np.flatnonzero(km.labels_ != labels)[:10].tolist()
        fail(f"{wrong} labels differ (first points: {first})")


if __name__ == "__main__":
    main()
