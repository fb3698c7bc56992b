"""The BSP algorithms: sample sort and the FFT of Inda and Bisseling."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _native
from ._config import Config, _no_comm, _record, _resolve
from .errors import InvalidRequest

__all__ = ["sort", "fft"]

_TOP = np.uint64(1 << 63)


def sort(a: Any, *, config: Optional[Config] = None, comm: Any = None) -> np.ndarray:
    """A sorted copy of a 1-D array of integers or floats (``np.sort(a)``), by BSP sample
    sort over the ranks (regular sampling, one all-to-all). NaN is refused."""
    _no_comm(comm)
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise InvalidRequest(f"a must be 1-D, not of shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "u":
        keys = arr.astype(np.uint64)
    elif kind in "ib":
        keys = arr.astype(np.int64).view(np.uint64) ^ _TOP
    elif kind == "f":
        f = arr.astype(np.float64)
        if np.isnan(f).any():
            raise InvalidRequest("a holds NaN, which has no place in the order")
        bits = f.view(np.uint64)
        keys = np.where(bits & _TOP, ~bits, bits | _TOP)
    else:
        raise TypeError(f"a must hold integers or floats, not {arr.dtype}")
    cfg = _resolve(config)
    out, stats = _native.sort_keys(np.ascontiguousarray(keys), cfg)
    _record(stats)
    if kind == "u":
        return out.astype(arr.dtype)
    if kind in "ib":
        return (out ^ _TOP).view(np.int64).astype(arr.dtype)
    bits = np.where(out & _TOP, out ^ _TOP, ~out)
    return bits.view(np.float64).astype(arr.dtype)


def fft(x: Any, *, config: Optional[Config] = None, comm: Any = None) -> np.ndarray:
    """The discrete Fourier transform of a 1-D array (``np.fft.fft(x)``), by the BSP FFT
    over the ranks: the length must be a power of two and a multiple of ``ranks**2``."""
    _no_comm(comm)
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise InvalidRequest(f"x must be 1-D, not of shape {arr.shape}")
    if arr.dtype.kind not in "fciub":
        raise TypeError(f"x must hold numbers, not {arr.dtype}")
    n = arr.shape[0]
    cfg = _resolve(config)
    if n == 0 or n & (n - 1):
        raise InvalidRequest(f"x: length {n} is not a power of two")
    if n % (cfg.ranks * cfg.ranks):
        raise InvalidRequest(f"x: length {n} is not a multiple of ranks**2 = {cfg.ranks ** 2} (use fewer ranks)")
    out, stats = _native.fft_run(np.ascontiguousarray(arr, dtype=np.complex128), cfg)
    _record(stats)
    return out
