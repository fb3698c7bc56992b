"""Shared helpers of the pytest suite of the Python package (run against the installed
package: `python -m pip install ./python` first)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import spillway


def rmat_edges(scale: int, edge_factor: int, seed: int = 1):
    """R-MAT-like edges (Graph500 probabilities) without duplicates or self loops."""
    rng = np.random.default_rng(seed)
    m = (1 << scale) * edge_factor
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(m)
        down = r >= 0.57 + 0.19
        right = ((r >= 0.57) & (r < 0.57 + 0.19)) | (r >= 0.57 + 0.19 + 0.19)
        src |= down.astype(np.int64) << bit
        dst |= right.astype(np.int64) << bit
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), 1 << scale


@pytest.fixture(params=[1, 2, 3], ids=lambda r: f"ranks{r}")
def config(request):
    """Every kernel at one, two and three ranks (three on two virtual nodes)."""
    r = request.param
    return spillway.Config(ranks=r, nodes=2 if r == 3 else 1)


def run_python(code: str, timeout: float = 120, **kwargs):
    """Runs `code` in a fresh interpreter (the installed package), returning the process."""
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)
