"""The runtime configuration accepted by every call, and the report of the last run."""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Callable, Dict, Optional, Union

from .errors import InvalidRequest

__all__ = ["Config", "run_stats", "parse_size"]

_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40, "P": 50}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([KMGTP]?)(?:I?B)?\s*$", re.IGNORECASE)
_POLICIES = ("araw", "arlw", "lrlw")


def parse_size(value: Union[int, str], name: str = "mem_budget") -> int:
    """Bytes from an int or a size as the CLI writes it: ``"256M"``, ``"2G"``, ``"1.5GiB"``.

    Units are binary (``1K`` = 1024 bytes); a fraction is rounded down to whole bytes.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a size such as '256M', not bool")
    if isinstance(value, int):
        if value <= 0:
            raise InvalidRequest(f"{name}: {value} is not a positive number of bytes")
        return value
    if not isinstance(value, str):
        raise TypeError(f"{name} must be an int or a size such as '256M', not {type(value).__name__}")
    m = _SIZE.match(value)
    if not m:
        raise InvalidRequest(f"{name}: '{value}' is not a size (examples: 4096, 64K, 256M, 1.5G)")
    number, unit = m.group(1), m.group(2).upper()
    if "." in number:
        whole, frac = number.split(".")
        scale = 1 << _UNITS[unit]
        size = int(whole) * scale + (int(frac or "0") * scale) // (10 ** len(frac or "0"))
    else:
        size = int(number) << _UNITS[unit]
    if size <= 0:
        raise InvalidRequest(f"{name}: '{value}' is not a positive size")
    if size >= 1 << 64:
        raise InvalidRequest(f"{name}: '{value}' is beyond 2^64 bytes")
    return size


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if value < 1:
        raise InvalidRequest(f"{name}: {value} is not at least 1")
    return value


class Config:
    """How a call runs: ranks, nodes, the memory budget and where spilled data goes.

    Parameters
    ----------
    ranks : int, optional
        Ranks of the job (default: the CPUs this process may use). More ranks than cores is
        normal out of core: at most ``running`` of them execute at once.
    nodes : int, default 1
        Virtual nodes the ranks are spread over (each with its own budget).
    running : int, optional
        Ranks of a node that execute at once (default: the cores; under a memory budget, as
        many as memory allows).
    mem_budget : int or str, optional
        The memory budget of a node, in bytes or as ``"256M"``, ``"2G"``. Rank data beyond it
        is spilled to ``spill_dir``.
    spill_dir : str or os.PathLike, optional
        Where spill files go (default: the system's temporary directory). They have no
        names and disappear with the job, also when it is interrupted.
    policy : {"araw", "arlw", "lrlw"}, default "araw"
        When a blocked rank's memory is unloaded (see the CLI's ``--policy``).
    """

    __slots__ = ("ranks", "nodes", "running", "mem_budget", "spill_dir", "policy")

    def __init__(
        self,
        ranks: Optional[int] = None,
        nodes: int = 1,
        running: Optional[int] = None,
        mem_budget: Optional[Union[int, str]] = None,
        spill_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        policy: str = "araw",
    ) -> None:
        self.ranks = _cpus() if ranks is None else _positive_int(ranks, "ranks")
        self.nodes = _positive_int(nodes, "nodes")
        if self.nodes > self.ranks:
            raise InvalidRequest(f"nodes: {self.nodes} nodes for {self.ranks} ranks (at most one node per rank)")
        self.running = None if running is None else _positive_int(running, "running")
        self.mem_budget = None if mem_budget is None else parse_size(mem_budget)
        if spill_dir is not None:
            if not isinstance(spill_dir, (str, os.PathLike)):
                raise TypeError(f"spill_dir must be a path, not {type(spill_dir).__name__}")
            spill_dir = os.fspath(spill_dir)
            if not os.path.isdir(spill_dir):
                raise InvalidRequest(f"spill_dir: '{spill_dir}' is not a directory")
            if not os.access(spill_dir, os.W_OK | os.X_OK):
                raise InvalidRequest(f"spill_dir: '{spill_dir}' is not writable")
        self.spill_dir = spill_dir
        if not isinstance(policy, str):
            raise TypeError(f"policy must be a str, not {type(policy).__name__}")
        if policy not in _POLICIES:
            raise InvalidRequest(f"policy: '{policy}' is not one of {', '.join(_POLICIES)}")
        self.policy = policy

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Config({fields})"


def _resolve(config: Optional[Config]) -> Config:
    if config is None:
        return Config()
    if not isinstance(config, Config):
        raise TypeError(f"config must be a spillway.Config, not {type(config).__name__}")
    return config


def _no_comm(comm: Any) -> None:
    if comm is not None:
        raise NotImplementedError(
            "comm= (an mpi4py communicator) is not supported by this build: spillway's "
            "Python package runs its ranks in this process; use the CLI under mpirun"
        )


_last = threading.local()


def _record(stats: Dict[str, Any]) -> Dict[str, Any]:
    _last.stats = stats
    return stats


def run_stats() -> Optional[Dict[str, Any]]:
    """The report of the last call made by this thread, or ``None`` before the first.

    A dict with what the CLI's report holds: ``elapsed`` (seconds), ``ranks``, ``nodes``,
    ``mem_budget``, ``peak_rss`` and ``peak_resident`` (bytes), ``bytes_spilled`` and
    ``bytes_read_back`` (spill I/O), ``messages_sent``, ``bytes_sent``, ``iterations`` and
    ``iteration_times`` (seconds, the slowest rank's each).
    """
    return getattr(_last, "stats", None)


def _progress(progress: Any, desc: str) -> Optional[Callable[[int, int, float], None]]:
    """A callback ``(iteration, max_iterations, delta)`` for ``progress``: ``True`` shows a
    bar (tqdm when installed, else a line on stderr), a callable is called as it is."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress is not True:
        raise TypeError("progress must be True, False, None or a callable(iteration, max_iterations, delta)")
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]

        state: Dict[str, Any] = {}

        def show(iteration: int, total: int, delta: float) -> None:
            bar = state.get("bar")
            if bar is None:
                bar = state["bar"] = tqdm(total=total, desc=desc)
            bar.update(iteration - bar.n)
            bar.set_postfix(delta=f"{delta:.3e}")

        return show
    except ImportError:
        import sys

        def line(iteration: int, total: int, delta: float) -> None:
            sys.stderr.write(f"\r{desc}: iteration {iteration}/{total}, change {delta:.3e}")
            sys.stderr.flush()

        return line
