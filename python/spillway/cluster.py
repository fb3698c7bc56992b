"""K-means (scikit-learn's ``KMeans``) and spherical K-means on sparse rows."""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

import numpy as np

from . import _native
from ._config import Config, _no_comm, _progress, _record, _resolve
from ._inputs import float_matrix, integer, is_sparse, number
from .errors import InvalidRequest

__all__ = ["KMeans", "SphericalKMeans"]


def _random_state(seed: Any) -> np.random.RandomState:
    if seed is None or isinstance(seed, (int, np.integer)):
        return np.random.RandomState(seed)
    if isinstance(seed, np.random.RandomState):
        return seed
    raise TypeError(f"random_state must be None, an int or a numpy RandomState, not {type(seed).__name__}")


def _kmeans_plus_plus(X: np.ndarray, k: int, rng: np.random.RandomState) -> np.ndarray:
    """Initial centres by greedy k-means++ (Arthur and Vassilvitskii, with 2 + log k trials
    per centre, each trial keeping the candidate that lowers the potential most)."""
    n = X.shape[0]
    trials = 2 + int(np.log(k))
    sq = np.einsum("ij,ij->i", X, X)
    centres = np.empty((k, X.shape[1]))
    first = rng.randint(n)
    centres[0] = X[first]
    closest = np.maximum(sq - 2 * X @ X[first] + sq[first], 0)
    potential = closest.sum()
    for c in range(1, k):
        if potential <= 0:
            pick = rng.randint(n, size=trials)
        else:
            pick = np.searchsorted(np.cumsum(closest), rng.uniform(size=trials) * potential)
            pick = np.minimum(pick, n - 1)
        d = np.maximum(sq[pick][:, None] - 2 * X[pick] @ X.T + sq[None, :], 0)
        np.minimum(closest[None, :], d, out=d)
        pots = d.sum(axis=1)
        best = int(np.argmin(pots))
        centres[c] = X[pick[best]]
        closest, potential = d[best], pots[best]
    return centres


def _tolerance(X: np.ndarray, tol: float) -> float:
    """``tol`` scaled as scikit-learn scales it for dense data: times the mean of the
    per-feature variances of ``X``."""
    if tol == 0:
        return 0.0
    return float(np.mean(np.var(X, axis=0)) * tol)


class KMeans:
    """Lloyd's K-means with scikit-learn's interface (``sklearn.cluster.KMeans``).

    Parameters
    ----------
    n_clusters : int, default 8
    init : {"k-means++", "random"} or ndarray of shape (n_clusters, n_features)
        Initial centres: greedy k-means++, ``n_clusters`` distinct samples chosen at random,
        or the given centres. With the same given centres and ``tol``, the labels and
        ``n_iter_`` equal scikit-learn's ``KMeans(init=centres, n_init=1, algorithm="lloyd",
        tol=tol)``.
    n_init : "auto" or int, default "auto"
        Runs from different initial centres; the one of lowest inertia is kept. ``"auto"``
        is 1 for k-means++ and given centres, 10 for random.
    max_iter : int, default 300
    tol : float, default 1e-4
        scikit-learn's tolerance: a run also stops after an iteration whose update moved the
        centres by at most ``tol`` times the mean of the per-feature variances of ``X`` (the
        sum over centres of their squared movements); it stops anyway when an iteration
        moves no point (strict convergence) or at ``max_iter``. After a stop on ``tol`` or
        ``max_iter`` the labels are those of the centres returned. ``tol=0`` stops only
        when no point moves (or the centres did not move at all).
    random_state : None, int or numpy RandomState
    config : Config, optional
    progress : bool or callable, optional

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray of int32, shape (n_samples,)
    inertia_ : float
        Sum of squared distances of the samples to their centres.
    n_iter_ : int
        Iterations of the kept run (assignment passes before the stop, scikit-learn's
        ``n_iter_``).
    n_features_in_ : int
    stats_ : dict
        The report of the kept run (see :func:`spillway.run_stats`).

    Notes
    -----
    Distances are exact squared Euclidean sums; an empty cluster keeps its centre
    (scikit-learn moves it to a far point), so runs with empty clusters can differ.
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Union[str, np.ndarray] = "k-means++",
        n_init: Union[str, int] = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        random_state: Any = None,
        config: Optional[Config] = None,
        progress: Any = None,
        comm: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.config = config
        self.progress = progress
        self.comm = comm

    def _check(self, X: np.ndarray) -> int:
        _no_comm(self.comm)
        k = integer(self.n_clusters, "n_clusters", low=1)
        integer(self.max_iter, "max_iter", low=1)
        number(self.tol, "tol", low=0.0)
        if k > X.shape[0]:
            raise InvalidRequest(f"n_clusters: {k} is more than the {X.shape[0]} samples")
        if isinstance(self.init, str):
            if self.init not in ("k-means++", "random"):
                raise InvalidRequest(f"init: '{self.init}' is not 'k-means++', 'random' or an array")
        else:
            init = np.asarray(self.init)
            if init.shape != (k, X.shape[1]):
                raise InvalidRequest(
                    f"init has shape {init.shape}; it must be (n_clusters, n_features) = {(k, X.shape[1])}"
                )
            if not np.isfinite(init.astype(np.float64)).all():
                raise InvalidRequest("init holds NaN or infinite values")
        if self.n_init == "auto":
            return 10 if isinstance(self.init, str) and self.init == "random" else 1
        runs = integer(self.n_init, "n_init", low=1)
        if not isinstance(self.init, str) and runs != 1:
            raise InvalidRequest("n_init: must be 1 (or 'auto') with given initial centres")
        return runs

    def _initial(self, X: np.ndarray, k: int, rng: np.random.RandomState) -> np.ndarray:
        if isinstance(self.init, str):
            if self.init == "random":
                return np.ascontiguousarray(X[rng.permutation(X.shape[0])[:k]])
            return _kmeans_plus_plus(X, k, rng)
        return np.ascontiguousarray(self.init, dtype=np.float64)

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "KMeans":
        """Clusters ``X`` (n_samples x n_features); ``y`` is ignored."""
        if sample_weight is not None:
            raise InvalidRequest("sample_weight: weighted K-means is not supported")
        X = float_matrix(X, "X")
        runs = self._check(X)
        cfg = _resolve(self.config)
        rng = _random_state(self.random_state)
        callback = _progress(self.progress, "kmeans")
        tol = _tolerance(X, float(self.tol))
        best: Optional[tuple] = None
        for _ in range(runs):
            init = self._initial(X, self.n_clusters, rng)
            out = _native.kmeans_run(X, init, self.max_iter, tol, cfg, callback)
            if best is None or out[4] < best[4]:
                best = out
        assert best is not None
        centres, labels, n_iter, _converged, inertia, stats = best
        self.cluster_centers_ = centres
        self.labels_ = labels
        self.n_iter_ = int(n_iter)
        self.inertia_ = float(inertia)
        self.n_features_in_ = X.shape[1]
        self.stats_: Dict[str, Any] = _record(stats)
        return self

    def fit_predict(self, X: Any, y: Any = None, sample_weight: Any = None) -> np.ndarray:
        """Fits and returns ``labels_``."""
        return self.fit(X, y, sample_weight).labels_

    def predict(self, X: Any) -> np.ndarray:
        """The nearest centre of every sample (int32)."""
        centres = self._fitted()
        X = float_matrix(X, "X")
        labels, _ = _native.nearest_centres(X, centres)
        return labels

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the inertia of ``X`` against the centres (scikit-learn's ``score``)."""
        centres = self._fitted()
        _, inertia = _native.nearest_centres(float_matrix(X, "X"), centres)
        return -float(inertia)

    def _fitted(self) -> np.ndarray:
        centres = getattr(self, "cluster_centers_", None)
        if centres is None:
            raise InvalidRequest("this KMeans is not fitted yet: call fit first")
        return centres

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor's parameters (scikit-learn's convention)."""
        return {k: getattr(self, k) for k in
                ("n_clusters", "init", "n_init", "max_iter", "tol", "random_state", "config", "progress", "comm")}

    def set_params(self, **params: Any) -> "KMeans":
        """Sets constructor parameters (scikit-learn's convention)."""
        for k, v in params.items():
            if k not in self.get_params():
                raise InvalidRequest(f"{k}: not a parameter of KMeans")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return f"KMeans(n_clusters={self.n_clusters!r}, init={self.init if isinstance(self.init, str) else 'array'!r})"


def _csr_rows(X: Any, name: str):  # type: ignore[no-untyped-def]
    """(indptr int64, indices int32, data float64, n_rows, n_cols) of X's rows, sorted."""
    if is_sparse(X):
        if X.ndim != 2:
            raise InvalidRequest(f"{name} must be 2-D")
        csr = X.tocsr().astype(np.float64)
        if not csr.has_canonical_format:
            csr = csr.copy()
            csr.sum_duplicates()
        rows, cols = csr.shape
        indptr, indices, data = csr.indptr.astype(np.int64), csr.indices.astype(np.int32), csr.data
    else:
        dense = float_matrix(X, name)
        rows, cols = dense.shape
        nz = dense != 0
        indptr = np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int64)
        r, c = np.nonzero(nz)
        indices, data = c.astype(np.int32), dense[r, c]
    if rows == 0 or cols == 0:
        raise InvalidRequest(f"{name} is empty (shape {(rows, cols)})")
    if cols >= 1 << 31:
        raise InvalidRequest(f"{name}: {cols} columns; at most 2^31 - 1 are supported")
    if not np.isfinite(data).all():
        raise InvalidRequest(f"{name} holds NaN or infinite values")
    return (np.ascontiguousarray(indptr), np.ascontiguousarray(indices), np.ascontiguousarray(data), rows, cols)


class SphericalKMeans:
    """Spherical K-means on sparse rows (documents as term vectors), as BDMPI's.

    Rows are scaled to unit length; a row goes to the centroid of largest dot product; a
    centroid is the normalised sum of its rows. It stops when no row moves or at
    ``max_iter``.

    Parameters
    ----------
    n_clusters : int, default 8
    init : {"random", "first"}, default "random"
        Initial centroids: ``n_clusters`` distinct rows chosen with ``random_state``, or the
        first ``n_clusters`` rows.
    max_iter : int, default 100
    random_state : int, optional
        The seed of ``"random"`` (default 1).
    config : Config, optional
    progress : bool or callable, optional

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), unit rows (or zero)
    labels_ : ndarray of int32
    n_iter_ : int
    converged_ : bool
    stats_ : dict
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: str = "random",
        max_iter: int = 100,
        random_state: Optional[int] = None,
        config: Optional[Config] = None,
        progress: Any = None,
        comm: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.max_iter = max_iter
        self.random_state = random_state
        self.config = config
        self.progress = progress
        self.comm = comm

    def fit(self, X: Any, y: Any = None) -> "SphericalKMeans":
        """Clusters the rows of ``X`` (a scipy sparse matrix or a dense array)."""
        _no_comm(self.comm)
        k = integer(self.n_clusters, "n_clusters", low=1)
        max_iter = integer(self.max_iter, "max_iter", low=1)
        if self.init not in ("random", "first"):
            raise InvalidRequest(f"init: '{self.init}' is not 'random' or 'first'")
        seed = None
        if self.init == "random":
            seed = 1 if self.random_state is None else integer(self.random_state, "random_state", low=0)
        indptr, indices, data, rows, cols = _csr_rows(X, "X")
        if k > rows:
            raise InvalidRequest(f"n_clusters: {k} is more than the {rows} rows")
        cfg = _resolve(self.config)
        centres, labels, n_iter, converged, stats = _native.spkmeans_run(
            indptr, indices, data, cols, k, seed, max_iter, cfg, _progress(self.progress, "spkmeans")
        )
        self.cluster_centers_ = centres
        self.labels_ = labels
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.n_features_in_ = cols
        self.stats_ = _record(stats)
        return self

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fits and returns ``labels_``."""
        return self.fit(X).labels_
