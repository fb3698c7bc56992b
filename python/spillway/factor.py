"""Matrix factorisation by stochastic gradient descent (the CLI's ``run sgd``)."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from . import _native
from ._config import Config, _cpus, _no_comm, _progress, _record, _resolve
from ._inputs import integer, is_sparse, number
from .errors import InvalidRequest

__all__ = ["sgd_factorize"]

_MAX_IDS = 1 << 32


def _ratings(ratings: Any, shape: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """(users, items, values, n_users, n_items) of a sparse matrix or a triple of arrays."""
    if is_sparse(ratings):
        if ratings.ndim != 2:
            raise InvalidRequest(f"ratings must be 2-D (users x items), not of shape {ratings.shape}")
        if shape is not None and tuple(shape) != tuple(ratings.shape):
            raise InvalidRequest(f"shape: {tuple(shape)} differs from the matrix's {ratings.shape}")
        coo = ratings.tocoo()
        users, items = coo.row, coo.col
        if ratings.dtype.kind not in "fiub":
            raise TypeError(f"ratings must hold numbers, not {ratings.dtype}")
        values = np.asarray(coo.data, dtype=np.float64)
        n_users, n_items = (int(x) for x in ratings.shape)
    elif isinstance(ratings, tuple) and len(ratings) == 3:
        names = ("ratings[0] (users)", "ratings[1] (items)", "ratings[2] (values)")
        users, items = (np.asarray(a) for a in ratings[:2])
        for a, name in zip((users, items), names):
            if a.ndim != 1:
                raise InvalidRequest(f"{name} must be 1-D, not of shape {a.shape}")
            if a.dtype.kind not in "iu" and a.size:
                raise TypeError(f"{name} must hold integers, not {a.dtype}")
        values = np.asarray(ratings[2])
        if values.ndim != 1:
            raise InvalidRequest(f"{names[2]} must be 1-D, not of shape {values.shape}")
        if values.dtype.kind not in "fiub" and values.size:
            raise TypeError(f"{names[2]} must hold numbers, not {values.dtype}")
        if not users.size == items.size == values.size:
            raise InvalidRequest(
                f"ratings: {users.size} users, {items.size} items and {values.size} values; "
                "they must have the same length"
            )
        values = values.astype(np.float64, copy=False)
        for a, name in zip((users, items), names):
            if a.size and int(a.min()) < 0:
                raise InvalidRequest(f"{name}: id {int(a.min())} is negative")
        if shape is None:
            if users.size == 0:
                raise InvalidRequest("shape: required for ratings without entries")
            shape = (int(users.max()) + 1, int(items.max()) + 1)
        if not isinstance(shape, (tuple, list)) or len(shape) != 2:
            raise TypeError(f"shape must be a pair (n_users, n_items), not {shape!r}")
        n_users, n_items = integer(shape[0], "shape[0]", low=1), integer(shape[1], "shape[1]", low=1)
        for a, n, name in ((users, n_users, names[0]), (items, n_items, names[1])):
            if a.size and int(a.max()) >= n:
                raise InvalidRequest(f"{name}: id {int(a.max())} is not in 0..{n} (shape {(n_users, n_items)})")
    else:
        raise TypeError(
            "ratings must be a scipy sparse matrix or array (users x items, the stored entries "
            f"are the ratings) or a triple (users, items, values) of arrays; not {type(ratings).__name__}"
        )
    if n_users == 0 or n_items == 0:
        raise InvalidRequest(f"ratings: the matrix is empty (shape {(n_users, n_items)})")
    if n_users > _MAX_IDS or n_items > _MAX_IDS:
        raise InvalidRequest(f"ratings: shape {(n_users, n_items)}; at most 2^32 users and 2^32 items (32-bit ids)")
    if values.size == 0:
        raise InvalidRequest("ratings: there are no ratings")
    bad = ~np.isfinite(values)
    if bad.any():
        j = int(np.argmax(bad))
        raise InvalidRequest(f"ratings: value {j} is {values[j]}; ratings must be finite")
    return _ids(users), _ids(items), np.ascontiguousarray(values), n_users, n_items


def _ids(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.int32 or a.dtype == np.int64:
        return np.ascontiguousarray(a)
    return a.astype(np.int64)


def _square_config(config: Optional[Config]) -> Config:
    """The configuration: a given one must have a square number of ranks; the default takes
    the largest square not above the CPUs."""
    if config is None:
        return Config(ranks=math.isqrt(_cpus()) ** 2)
    cfg = _resolve(config)
    q = math.isqrt(cfg.ranks)
    if q * q != cfg.ranks:
        raise InvalidRequest(
            f"config.ranks: {cfg.ranks} ranks; SGD runs on a square grid of blocks and needs a "
            f"square number of ranks (1, 4, 9, 16, ...), for example Config(ranks={q * q})"
        )
    return cfg


def sgd_factorize(
    ratings: Any,
    n_factors: int = 10,
    *,
    shape: Optional[Tuple[int, int]] = None,
    learning_rate: float = 0.01,
    regularisation: float = 0.05,
    max_iter: int = 10,
    random_state: Optional[int] = None,
    config: Optional[Config] = None,
    progress: Any = None,
    comm: Any = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Factorises a ratings matrix ``R`` (users x items) as ``U @ V.T`` by stochastic
    gradient descent over the observed ratings (the CLI's ``run sgd``, BDMPI's benchmark).

    Parameters
    ----------
    ratings : scipy sparse matrix or array, or a triple (users, items, values)
        The observed ratings: the stored entries of a sparse matrix (explicit zeros are
        ratings of 0; repeated entries of a COO matrix are separate ratings), or rating
        ``k`` is ``values[k]`` given by user ``users[k]`` to item ``items[k]``.
    n_factors : int, default 10
        Columns of ``U`` and ``V``.
    shape : (int, int), optional
        ``(n_users, n_items)`` for the triple form (default: the largest ids + 1).
    learning_rate : float, default 0.01
        Step of every update, above 0.
    regularisation : float, default 0.05
        L2 penalty of the factors, at least 0.
    max_iter : int, default 10
        Iterations, each a pass over every rating.
    random_state : int, optional
        Seed of the initial factors and of the order of the updates (default 1): the same
        seed and ranks give the same result, bit for bit.
    config : Config, optional
        Its ranks must be a square number (1, 4, 9, ...): the ratings are cut into a grid of
        ``sqrt(ranks)`` x ``sqrt(ranks)`` blocks. The default takes the largest square not
        above the CPUs.
    progress : bool or callable, optional
        ``True`` shows a bar; a callable gets ``(iteration, max_iter, training RMSE)``.

    Returns
    -------
    U : ndarray of float64, shape (n_users, n_factors)
    V : ndarray of float64, shape (n_items, n_factors)
        ``U[u] @ V[i]`` predicts the rating of item ``i`` by user ``u``. The training RMSE
        after each iteration is ``spillway.run_stats()["train_rmse"]`` (a list).

    Notes
    -----
    Every rating ``(u, i, r)``, in a random order within each block, makes the update
    ``e = r - U[u] @ V[i]``, ``U[u] += lr (e V[i] - reg U[u])``, ``V[i] += lr (e U[u] - reg
    V[i])`` (both from the values before it); the initial factors are uniform in
    ``[0, 1 / sqrt(n_factors))``. A learning rate too large for the data makes the error
    overflow: the call then raises :class:`JobFailed`.
    """
    _no_comm(comm)
    k = integer(n_factors, "n_factors", low=1)
    lr = number(learning_rate, "learning_rate", low=0.0, low_open=True)
    reg = number(regularisation, "regularisation", low=0.0)
    iters = integer(max_iter, "max_iter", low=1)
    if random_state is None:
        seed = 1
    else:
        seed = integer(random_state, "random_state", low=0)
        if seed >= 1 << 64:
            raise InvalidRequest(f"random_state: {seed} is not below 2^64")
    cfg = _square_config(config)
    users, items, values, n_users, n_items = _ratings(ratings, shape)
    callback = _progress(progress, "sgd")
    U, V, stats = _native.sgd_run(users, items, values, n_users, n_items, k, lr, reg, iters, seed, cfg, callback)
    _record(stats)
    return U, V
