"""Checking and converting the inputs of the calls (before any work is done)."""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple

import numpy as np

from .errors import InputError, InvalidRequest

_MAX_VERTICES = 1 << 32


def is_path(x: Any) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))


def existing_file(x: Any, name: str) -> str:
    path = os.fsdecode(os.fspath(x))
    if not os.path.exists(path):
        raise InputError(f"{name}: {path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{name}: {path}: is a directory")
    if not os.access(path, os.R_OK):
        raise InputError(f"{name}: {path}: not readable")
    return path


def is_sparse(x: Any) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:
        return False
    return bool(sp.issparse(x))


def number(x: Any, name: str, *, low: Optional[float] = None, high: Optional[float] = None,
           low_open: bool = False, high_open: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(x).__name__}")
    v = float(x)
    if not np.isfinite(v):
        raise InvalidRequest(f"{name}: {v} is not finite")
    if low is not None and (v < low or (low_open and v == low)):
        raise InvalidRequest(f"{name}: {v} is not {'above' if low_open else 'at least'} {low}")
    if high is not None and (v > high or (high_open and v == high)):
        raise InvalidRequest(f"{name}: {v} is not {'below' if high_open else 'at most'} {high}")
    return v


def integer(x: Any, name: str, *, low: Optional[int] = None) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(x).__name__}")
    v = int(x)
    if low is not None and v < low:
        raise InvalidRequest(f"{name}: {v} is not at least {low}")
    return v


def _ids(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise InvalidRequest(f"{name} must be 1-D, not of shape {arr.shape}")
    if arr.dtype == np.int32 or arr.dtype == np.int64:
        return np.ascontiguousarray(arr)
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.max() >= 1 << 63:
            raise InvalidRequest(f"{name}: id {int(arr.max())} is too large")
        return arr.astype(np.int64)
    raise TypeError(f"{name} must hold integers, not {arr.dtype}")


def graph_arg(G: Any, n: Optional[int], name: str, allow_file: bool = True) -> Tuple[Any, ...]:
    """The graph argument of the native calls: ``("csr", indptr, indices, n)``,
    ``("pairs", src, dst, n)`` or ``("file", path)``."""
    if is_path(G):
        if not allow_file:
            raise TypeError(f"{name} must be an array or a sparse matrix, not a path")
        if n is not None:
            raise InvalidRequest("n: not used with an edge-list file (the file's largest id + 1 is the vertex count)")
        return ("file", existing_file(G, name))
    if isinstance(G, tuple) and len(G) == 2:
        src, dst = _ids(G[0], f"{name}[0] (src)"), _ids(G[1], f"{name}[1] (dst)")
        if src.shape != dst.shape:
            raise InvalidRequest(f"{name}: src has {src.size} ids and dst {dst.size}; they must have the same length")
        if n is None:
            if src.size == 0:
                raise InvalidRequest("n: required for a graph without edges")
            n = int(max(src.max(), dst.max())) + 1
        n = integer(n, "n", low=1)
        if n > _MAX_VERTICES:
            raise InvalidRequest(f"n: {n} vertices; at most 2^32 are supported (32-bit ids)")
        return ("pairs", src, dst, n)
    if is_sparse(G):
        if G.ndim != 2 or G.shape[0] != G.shape[1]:
            raise InvalidRequest(f"{name} must be a square matrix (an adjacency matrix), not of shape {G.shape}")
        if n is not None and n != G.shape[0]:
            raise InvalidRequest(f"n: {n} differs from the matrix's {G.shape[0]} rows")
        csr = G.tocsr()
        if not csr.has_canonical_format:
            csr = csr.copy()
            csr.sum_duplicates()
        if csr.nnz and not np.all(csr.data != 0):
            csr = csr.copy()
            csr.eliminate_zeros()
        n = csr.shape[0]
        if n == 0:
            raise InvalidRequest(f"{name} has no vertices")
        if n > _MAX_VERTICES:
            raise InvalidRequest(f"{name}: {n} vertices; at most 2^32 are supported (32-bit ids)")
        return ("csr", np.ascontiguousarray(csr.indptr), np.ascontiguousarray(csr.indices), n)
    if isinstance(G, np.ndarray):
        if G.ndim != 2 or G.shape[0] != G.shape[1]:
            raise InvalidRequest(f"{name} must be a square matrix (an adjacency matrix), not of shape {G.shape}")
        if n is not None and n != G.shape[0]:
            raise InvalidRequest(f"n: {n} differs from the matrix's {G.shape[0]} rows")
        if G.shape[0] == 0:
            raise InvalidRequest(f"{name} has no vertices")
        src, dst = np.nonzero(G)
        return ("pairs", src.astype(np.int64), dst.astype(np.int64), G.shape[0])
    raise TypeError(
        f"{name} must be a scipy sparse matrix or array, a dense square numpy array, a pair "
        f"(src, dst) of integer arrays, or a path to an edge list; not {type(G).__name__}"
    )


def float_matrix(X: Any, name: str) -> np.ndarray:
    """A C-contiguous float64 matrix with finite values."""
    if is_sparse(X):
        raise TypeError(f"{name}: sparse input is not supported here; pass a dense array")
    try:
        arr = np.asarray(X)
    except Exception as e:  # noqa: BLE001 - numpy's own message says why
        raise TypeError(f"{name} must be array-like: {e}") from None
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{name} must hold numbers, not {arr.dtype}")
    if arr.ndim != 2:
        raise InvalidRequest(f"{name} must be 2-D (samples x features), not of shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidRequest(f"{name} is empty (shape {arr.shape})")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InvalidRequest(f"{name} holds NaN or infinite values")
    return arr
