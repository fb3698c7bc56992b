"""Graph algorithms: PageRank, connected components and greedy colouring."""

from __future__ import annotations

import warnings
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _native
from ._config import Config, _no_comm, _progress, _record, _resolve
from ._inputs import graph_arg, integer, number
from .errors import ConvergenceWarning, InvalidRequest

__all__ = ["pagerank", "connected_components", "greedy_color"]


def pagerank(
    G: Any,
    alpha: float = 0.85,
    tol: float = 1e-6,
    max_iter: int = 100,
    *,
    n: Optional[int] = None,
    config: Optional[Config] = None,
    progress: Any = None,
    comm: Any = None,
) -> np.ndarray:
    """PageRank of a directed graph, as networkx's ``pagerank`` computes it.

    Parameters
    ----------
    G : scipy sparse matrix or array, pair of int arrays, or path
        The graph: an adjacency matrix (``G[i, j] != 0`` is an edge ``i -> j``, as networkx's
        ``to_scipy_sparse_array`` makes it; the values are not weights), a pair
        ``(src, dst)`` of integer arrays (edge ``src[k] -> dst[k]``; repeated edges count
        as parallel edges), or the path of a SNAP edge list (``"src dst"`` per line, ``#``
        comments) or a Matrix Market file (``.mtx``), read in parallel and out of core under
        ``config.mem_budget``.
    alpha : float, default 0.85
        Damping factor, in [0, 1).
    tol : float, default 1e-6
        Stop when the L1 change of an iteration falls below ``N * tol`` (networkx's test);
        0 runs ``max_iter`` iterations.
    max_iter : int, default 100
        Iteration limit; reaching it with ``tol > 0`` warns (:class:`ConvergenceWarning`).
    n : int, optional
        Vertices, for the ``(src, dst)`` form (default: the largest id + 1).
    config : Config, optional
    progress : bool or callable, optional
        ``True`` shows a progress bar; a callable gets ``(iteration, max_iter, change)``.

    Returns
    -------
    ndarray of float64, shape (N,)
        The rank of every vertex (they sum to 1). Dangling vertices spread their rank
        uniformly; the iteration starts from ``1/N``.
    """
    _no_comm(comm)
    alpha = number(alpha, "alpha", low=0.0, high=1.0, high_open=True)
    tol = number(tol, "tol", low=0.0)
    max_iter = integer(max_iter, "max_iter", low=1)
    cfg = _resolve(config)
    arg = graph_arg(G, n, "G")
    callback = _progress(progress, "pagerank")
    ranks, iters, delta, stats = _native.pagerank_run(arg, alpha, tol, max_iter, cfg, callback)
    _record(stats)
    if tol > 0 and delta >= len(ranks) * tol:
        warnings.warn(
            f"pagerank: {iters} iterations did not reach the tolerance (L1 change {delta:.3e} "
            f">= N * tol = {len(ranks) * tol:.3e})",
            ConvergenceWarning,
            stacklevel=2,
        )
    return ranks


def connected_components(
    csgraph: Any,
    directed: bool = True,
    connection: str = "weak",
    return_labels: bool = True,
    *,
    config: Optional[Config] = None,
    comm: Any = None,
) -> Union[int, Tuple[int, np.ndarray]]:
    """Connected components, as ``scipy.sparse.csgraph.connected_components``.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, dense square array, pair of int arrays, or path
        The graph (``csgraph[i, j] != 0`` is an edge), a pair ``(src, dst)``, or an edge
        list file (read out of core).
    directed : bool, default True
        As scipy; with ``connection="weak"`` both give the same components.
    connection : {"weak"}, default "weak"
        Weak components (edges taken both ways). ``"strong"`` is not supported.
    return_labels : bool, default True

    Returns
    -------
    n_components : int
    labels : ndarray of int32, shape (N,)
        Components numbered from 0 in the order of their smallest vertex (scipy's
        numbering); a vertex without edges is a component of its own.
    """
    _no_comm(comm)
    if not isinstance(directed, (bool, np.bool_)):
        raise TypeError(f"directed must be a bool, not {type(directed).__name__}")
    if not isinstance(connection, str):
        raise TypeError(f"connection must be a str, not {type(connection).__name__}")
    if connection.lower() == "strong" and directed:
        raise InvalidRequest("connection: 'strong' components are not supported; use connection='weak'")
    if connection.lower() not in ("weak", "strong"):
        raise InvalidRequest(f"connection: '{connection}' is not 'weak' or 'strong'")
    cfg = _resolve(config)
    arg = graph_arg(csgraph, None, "csgraph")
    count, labels, stats = _native.components_run(arg, cfg)
    _record(stats)
    if return_labels:
        return int(count), labels
    return int(count)


_STRATEGIES = ("largest_first", "random_sequential")


def greedy_color(
    csgraph: Any,
    strategy: str = "largest_first",
    *,
    seed: Optional[int] = None,
    passes: int = 0,
    config: Optional[Config] = None,
    comm: Any = None,
) -> np.ndarray:
    """A greedy colouring, as networkx's ``greedy_color``, computed by Jones-Plassmann.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, pair of int arrays, or path
        The graph; edges are taken both ways, self loops and repeated edges ignored.
    strategy : {"largest_first", "random_sequential"}
        ``"largest_first"`` is networkx's order (degree, larger first, ties to the smaller
        vertex) and gives networkx's colouring; ``"random_sequential"`` orders by a hash of
        ``seed`` and the vertex (not networkx's random order).
    seed : int, optional
        For ``"random_sequential"`` (default 1).
    passes : int, default 0
        Recolouring passes (iterated greedy) after the first colouring; each never adds a
        colour and often removes some.

    Returns
    -------
    ndarray of int64, shape (N,)
        The colour of every vertex, from 0 (networkx returns a dict ``{vertex: colour}``).
    """
    _no_comm(comm)
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a str, not {type(strategy).__name__}")
    if strategy not in _STRATEGIES:
        raise InvalidRequest(f"strategy: '{strategy}' is not one of {', '.join(_STRATEGIES)}")
    if seed is not None and strategy != "random_sequential":
        raise InvalidRequest("seed: only used with strategy='random_sequential'")
    seed = 1 if seed is None else integer(seed, "seed", low=0)
    passes = integer(passes, "passes", low=0)
    if passes > 64:
        raise InvalidRequest(f"passes: {passes} is more than 64")
    cfg = _resolve(config)
    arg = graph_arg(csgraph, None, "csgraph")
    colours, stats = _native.colour_run(arg, strategy, seed, passes, cfg)
    _record(stats)
    return colours

