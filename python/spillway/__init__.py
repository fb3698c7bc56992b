"""spillway: the algorithms of a BSP/MPI runtime for data larger than memory, from numpy.

Each call mirrors the tool its users know, and adds a memory budget, many ranks and inputs
larger than memory through :class:`Config`:

* :func:`pagerank` (networkx), :func:`connected_components` (scipy.sparse.csgraph),
  :func:`greedy_color` (networkx);
* :class:`KMeans` (scikit-learn), :class:`SphericalKMeans`;
* :func:`sgd_factorize` (matrix factorisation of ratings by SGD);
* :func:`word_count`;
* :func:`compress` / :func:`decompress` (error-bounded, as zfpy/pysz) and
  :class:`SpillwayCodec` (numcodecs);
* :func:`sort` and :func:`fft` (numpy).

The work runs in Rust with the GIL released; Ctrl-C raises ``KeyboardInterrupt`` within a
second and leaves no spill file. :func:`run_stats` gives the report of the last call.

>>> import numpy as np, spillway
>>> src, dst = np.array([0, 1, 2]), np.array([1, 2, 0])
>>> spillway.pagerank((src, dst), n=3).round(3).tolist()
[0.333, 0.333, 0.333]
"""

from ._config import Config, parse_size, run_stats
from .bsp import fft, sort
from .cluster import KMeans, SphericalKMeans
from .compression import SpillwayCodec, compress, decompress, register_codec
from .errors import ConvergenceWarning, InputError, InvalidRequest, JobFailed, SpillwayError
from .factor import sgd_factorize
from .graph import connected_components, greedy_color, pagerank
from .text import word_count
from ._native import __version__

__all__ = [
    "Config",
    "parse_size",
    "run_stats",
    "pagerank",
    "connected_components",
    "greedy_color",
    "KMeans",
    "SphericalKMeans",
    "sgd_factorize",
    "word_count",
    "compress",
    "decompress",
    "SpillwayCodec",
    "register_codec",
    "sort",
    "fft",
    "SpillwayError",
    "InvalidRequest",
    "InputError",
    "JobFailed",
    "ConvergenceWarning",
    "__version__",
]
