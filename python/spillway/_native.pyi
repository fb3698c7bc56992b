# Type stubs of the extension module (crates/python). Private: use the functions of the
# package `spillway`, which check their arguments and hold the conventions.
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

_Progress = Optional[Callable[[int, int, float], Any]]
_Report = Dict[str, Any]

def pagerank_run(
    graph: Tuple[Any, ...], alpha: float, tol: float, max_iter: int, config: Any, progress: _Progress = ...
) -> Tuple[npt.NDArray[np.float64], int, float, _Report]: ...
def components_run(graph: Tuple[Any, ...], config: Any) -> Tuple[int, npt.NDArray[np.int32], _Report]: ...
def colour_run(
    graph: Tuple[Any, ...], strategy: str, seed: int, passes: int, config: Any
) -> Tuple[npt.NDArray[np.int64], _Report]: ...
def kmeans_run(
    x: npt.NDArray[np.float64],
    init: npt.NDArray[np.float64],
    max_iter: int,
    tol: Optional[float],
    config: Any,
    progress: _Progress = ...,
) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.int32], int, bool, float, _Report]: ...
def nearest_centres(
    x: npt.NDArray[np.float64], centres: npt.NDArray[np.float64]
) -> Tuple[npt.NDArray[np.int32], float]: ...
def spkmeans_run(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int32],
    data: npt.NDArray[np.float64],
    n_cols: int,
    k: int,
    seed: Optional[int],
    max_iter: int,
    config: Any,
    progress: _Progress = ...,
) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.int32], int, bool, _Report]: ...
def sgd_run(
    users: npt.NDArray[Any],
    items: npt.NDArray[Any],
    values: npt.NDArray[np.float64],
    n_users: int,
    n_items: int,
    factors: int,
    learning_rate: float,
    regularisation: float,
    max_iter: int,
    seed: int,
    config: Any,
    progress: _Progress = ...,
) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], _Report]: ...
def word_count_run(paths: List[str], config: Any) -> Tuple[List[bytes], List[int], _Report]: ...
def compress_values(values: npt.NDArray[Any], dims: List[int], epsilon: float, method: str) -> bytes: ...
def decompress_values(buf: bytes) -> Tuple[npt.NDArray[Any], List[int], float]: ...
def header_of(buf: bytes) -> Tuple[str, List[int], float, str]: ...
def sort_keys(keys: npt.NDArray[np.uint64], config: Any) -> Tuple[npt.NDArray[np.uint64], _Report]: ...
def fft_run(x: npt.NDArray[np.complex128], config: Any) -> Tuple[npt.NDArray[np.complex128], _Report]: ...
