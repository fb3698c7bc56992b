"""Word count over text files."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Optional, Union

from . import _native
from ._config import Config, _no_comm, _record, _resolve
from ._inputs import existing_file, is_path
from .errors import InvalidRequest

__all__ = ["word_count"]

PathLike = Union[str, "os.PathLike[str]"]


def word_count(
    paths: Union[PathLike, Iterable[PathLike]],
    *,
    config: Optional[Config] = None,
    comm: Any = None,
) -> Dict[str, int]:
    """How often each word occurs in the files, counted as MapReduce with a combiner.

    A word is a maximal run of bytes that are not ASCII whitespace (space, tab, newline,
    vertical tab, form feed, carriage return); bytes that are not UTF-8 are kept as
    surrogate escapes (``word.encode("utf-8", "surrogateescape")`` gives the bytes back).
    The files are read in parallel in bounded chunks; under ``config.mem_budget`` the counts
    spill to disk.

    Returns
    -------
    dict
        ``{word: count}`` for every word of all the files together.
    """
    _no_comm(comm)
    if is_path(paths):
        paths = [paths]  # type: ignore[list-item]
    try:
        given = list(paths)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"paths must be a path or a list of paths, not {type(paths).__name__}") from None
    if not given:
        raise InvalidRequest("paths: no file given")
    for p in given:
        if not is_path(p):
            raise TypeError(f"paths must hold paths, not {type(p).__name__}")
    files = [existing_file(p, "paths") for p in given]
    cfg = _resolve(config)
    words, counts, stats = _native.word_count_run(files, cfg)
    _record(stats)
    return {w.decode("utf-8", "surrogateescape"): int(c) for w, c in zip(words, counts)}
