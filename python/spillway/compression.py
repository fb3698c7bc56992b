"""Error-bounded lossy compression of float arrays, and a numcodecs-style codec."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from . import _native
from ._inputs import number
from .errors import InvalidRequest

__all__ = ["compress", "decompress", "SpillwayCodec", "register_codec"]

_METHODS = ("predict", "sbd1", "sbd2", "rbd1", "rbd2", "rbd3")


def _epsilon(values: np.ndarray, abs: Optional[float], rel: Optional[float]) -> float:
    if (abs is None) == (rel is None):
        raise InvalidRequest("give exactly one of abs= (an absolute bound) and rel= (relative to the value range)")
    if abs is not None:
        return number(abs, "abs", low=0.0, low_open=True)
    r = number(rel, "rel", low=0.0, low_open=True)
    finite = values[np.isfinite(values)]
    span = float(finite.max()) - float(finite.min()) if finite.size else 0.0
    eps = r * span if span > 0 else r
    if not np.isfinite(eps) or eps <= 0:
        raise InvalidRequest(f"rel: {rel} times the value range {span} is not a usable bound")
    return eps


def _grid(array: Any, name: str) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        try:
            array = np.asarray(array)
        except Exception as e:  # noqa: BLE001
            raise TypeError(f"{name} must be a numpy array: {e}") from None
    if array.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, not {array.dtype}")
    if array.ndim < 1 or array.ndim > 3:
        raise InvalidRequest(f"{name} must have 1 to 3 dimensions, not {array.ndim} (reshape it first)")
    if array.size == 0:
        raise InvalidRequest(f"{name} is empty")
    return np.ascontiguousarray(array)


def compress(
    array: Any,
    *,
    abs: Optional[float] = None,
    rel: Optional[float] = None,
    method: str = "predict",
) -> bytes:
    """Compresses a float32/float64 array of 1 to 3 dimensions so that every value comes
    back within the bound: ``|x - x'| <= abs`` (or ``rel * (max - min)`` with ``rel=``).

    The bound is checked as values are encoded and holds exactly, in the array's own type.
    NaN and infinities are kept bit for bit by ``method="predict"`` (the default:
    interpolation prediction, quantisation, entropy coding, as SZ3); the decompositions
    (``"sbd1"``, ``"sbd2"``, ``"rbd1"``, ``"rbd2"``, ``"rbd3"``) refuse them. The result is
    the file format of ``spillway compress``, which records shape, type and bound.
    """
    values = _grid(array, "array")
    eps = _epsilon(values, abs, rel)
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, not {type(method).__name__}")
    if method not in _METHODS:
        raise InvalidRequest(f"method: '{method}' is not one of {', '.join(_METHODS)}")
    dims = list(reversed(values.shape))
    return _native.compress_values(values.reshape(-1), dims, eps, method)


def decompress(buf: Any) -> np.ndarray:
    """The array of a buffer written by :func:`compress` (or ``spillway compress``), with
    its shape and dtype.

    A buffer that is not one (wrong magic bytes, cut short, changed: the checksum does not
    match) raises :class:`InvalidRequest` whose message starts with ``buf:``; a buffer that
    is not bytes-like raises :class:`TypeError`."""
    if isinstance(buf, np.ndarray):
        buf = buf.tobytes()
    if isinstance(buf, (bytearray, memoryview)):
        buf = bytes(buf)
    if not isinstance(buf, bytes):
        raise TypeError(f"buf must be bytes-like, not {type(buf).__name__}")
    values, dims, _eps = _native.decompress_values(buf)
    return values.reshape(tuple(reversed(dims)))


try:  # numcodecs is optional: the codec works without it, and registers with it when present.
    from numcodecs.abc import Codec as _CodecBase  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _CodecBase = object


class SpillwayCodec(_CodecBase):  # type: ignore[misc, valid-type]
    """A numcodecs-style codec (``codec_id = "spillway"``) for zarr chunks.

    ``SpillwayCodec(abs=1e-3)`` or ``SpillwayCodec(rel=1e-4)``; chunks of more than three
    dimensions are coded as three (the leading axes merged), which zarr reshapes back.
    Works without numcodecs; :func:`register_codec` makes numcodecs (and zarr) know it.
    """

    codec_id = "spillway"

    def __init__(self, abs: Optional[float] = None, rel: Optional[float] = None, method: str = "predict") -> None:
        if (abs is None) == (rel is None):
            raise InvalidRequest("give exactly one of abs= and rel=")
        if abs is not None:
            number(abs, "abs", low=0.0, low_open=True)
        if rel is not None:
            number(rel, "rel", low=0.0, low_open=True)
        if method not in _METHODS:
            raise InvalidRequest(f"method: '{method}' is not one of {', '.join(_METHODS)}")
        self.abs, self.rel, self.method = abs, rel, method

    def encode(self, buf: Any) -> bytes:
        a = np.asarray(buf)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim > 3:
            a = a.reshape((-1,) + a.shape[-2:])
        return compress(a, abs=self.abs, rel=self.rel, method=self.method)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The array of ``buf`` (errors name ``buf``), written into ``out`` when given
        (an array or buffer of the same number of bytes; errors name ``out``)."""
        values = decompress(buf)
        if out is None:
            return values
        target = np.asarray(out)
        if target.nbytes != values.nbytes:
            raise InvalidRequest(
                f"out: holds {target.nbytes} bytes; the decoded chunk {values.shape} of {values.dtype} needs {values.nbytes}"
            )
        if not target.flags.writeable:
            raise InvalidRequest("out: is read-only")
        if target.dtype == values.dtype:
            target[...] = values.reshape(target.shape)
        elif target.flags.c_contiguous:
            target.reshape(-1)[...] = values.reshape(-1).view(target.dtype)
        else:
            raise InvalidRequest(f"out: of {target.dtype}, not {values.dtype}, must be C-contiguous")
        return out

    def get_config(self) -> Dict[str, Any]:
        return {"id": self.codec_id, "abs": self.abs, "rel": self.rel, "method": self.method}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "SpillwayCodec":
        config = dict(config)
        config.pop("id", None)
        return cls(**config)

    def __repr__(self) -> str:
        bound = f"abs={self.abs!r}" if self.abs is not None else f"rel={self.rel!r}"
        return f"SpillwayCodec({bound}, method={self.method!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpillwayCodec) and self.get_config() == other.get_config()

    __hash__ = None  # type: ignore[assignment]


def register_codec() -> None:
    """Registers :class:`SpillwayCodec` with numcodecs (raises ImportError without it)."""
    import numcodecs  # type: ignore[import-not-found]

    numcodecs.register_codec(SpillwayCodec)
