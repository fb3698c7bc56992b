"""PageRank, connected components and colouring against networkx and scipy."""

import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components as scipy_cc

import spillway
from conftest import rmat_edges


def nx_pagerank_vector(G, n, **kw):
    pr = nx.pagerank(G, **kw)
    return np.array([pr[i] for i in range(n)])


@pytest.fixture(scope="module")
def rmat():
    src, dst, n = rmat_edges(12, 8)
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(src.tolist(), dst.tolist()))
    return src, dst, n, G


def test_pagerank_matches_networkx(rmat, config):
    src, dst, n, G = rmat
    ref = nx_pagerank_vector(G, n, alpha=0.85, tol=1e-6, max_iter=100)
    A = nx.to_scipy_sparse_array(G, nodelist=range(n))
    for given in (A, sp.csr_matrix(A), A.tocoo(), (src, dst)):
        ours = spillway.pagerank(given, alpha=0.85, tol=1e-6, max_iter=100, n=n if isinstance(given, tuple) else None, config=config)
        assert ours.dtype == np.float64 and ours.shape == (n,)
        assert np.abs(ours - ref).sum() <= 1e-9


def test_pagerank_tight_tolerance_and_damping(rmat):
    src, dst, n, G = rmat
    for alpha in (0.5, 0.9):
        ref = nx_pagerank_vector(G, n, alpha=alpha, tol=1e-10, max_iter=500)
        ours = spillway.pagerank((src, dst), alpha=alpha, tol=1e-10, max_iter=500, n=n)
        assert np.abs(ours - ref).sum() <= 1e-9
        assert abs(ours.sum() - 1) < 1e-12


def test_pagerank_against_scipy_power_iteration(rmat):
    src, dst, n, _ = rmat
    A = sp.csr_array((np.ones(len(src)), (src, dst)), shape=(n, n))
    out = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    P = (sp.diags_array(inv) @ A).T.tocsr()
    dangling = out == 0
    x = np.full(n, 1.0 / n)
    for _ in range(30):
        x = 0.85 * (P @ x + x[dangling].sum() / n) + 0.15 / n
    ours = spillway.pagerank((src, dst), n=n, tol=0, max_iter=30)
    assert np.abs(ours - x).sum() <= 1e-9


def test_pagerank_edge_list_file(tmp_path, rmat):
    src, dst, n, G = rmat
    path = tmp_path / "edges.txt"
    with open(path, "w") as f:
        f.write("# an R-MAT graph\n")
        f.writelines(f"{a} {b}\n" for a, b in zip(src.tolist(), dst.tolist()))
    n_file = int(max(src.max(), dst.max())) + 1
    ref = nx_pagerank_vector(G, n, tol=1e-6)[:n_file]
    cfg = spillway.Config(ranks=4, mem_budget="2M", spill_dir=tmp_path)
    ours = spillway.pagerank(str(path), config=cfg)
    assert ours.shape == (n_file,)
    # Vertices above the file's largest id are absent from the file's graph: compare on a
    # graph that has none (R-MAT at this size uses nearly every id).
    if n_file == n:
        assert np.abs(ours - ref).sum() <= 1e-9
    stats = spillway.run_stats()
    assert stats["mem_budget"] == 2 << 20 and stats["iterations"] >= 1


def test_pagerank_warns_at_the_iteration_limit(rmat):
    src, dst, n, _ = rmat
    with pytest.warns(spillway.ConvergenceWarning):
        spillway.pagerank((src, dst), n=n, tol=1e-12, max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spillway.pagerank((src, dst), n=n, tol=0, max_iter=3)


def test_pagerank_progress_callback(rmat):
    src, dst, n, _ = rmat
    seen = []
    spillway.pagerank((src, dst), n=n, tol=0, max_iter=40, progress=lambda i, m, d: seen.append((i, m)))
    # The callback sees the newest iteration every 50 ms: on a fast run at least the last.
    assert all(m == 40 for _, m in seen)


def test_components_same_partition_as_scipy(config):
    rng = np.random.default_rng(3)
    for n, density in ((3000, 0.0003), (2000, 0.0008), (500, 0.0)):
        A = sp.random(n, n, density=density, format="csr", random_state=rng)
        ref_n, ref = scipy_cc(A, directed=True, connection="weak")
        got_n, got = spillway.connected_components(A, config=config)
        assert got_n == ref_n
        assert np.array_equal(got, ref)  # the same numbering, not only the same partition
        assert spillway.connected_components(A, directed=False, return_labels=False, config=config) == ref_n


def test_components_pairs_dense_and_file(tmp_path):
    src, dst = np.array([0, 2, 5, 6]), np.array([1, 3, 6, 7])
    n_comp, labels = spillway.connected_components((src, dst))
    assert n_comp == 4 and labels.tolist() == [0, 0, 1, 1, 2, 3, 3, 3]
    dense = np.zeros((8, 8))
    dense[src, dst] = 1
    assert spillway.connected_components(dense)[1].tolist() == labels.tolist()
    path = tmp_path / "e.txt"
    path.write_text("".join(f"{a} {b}\n" for a, b in zip(src, dst)))
    assert spillway.connected_components(str(path))[1].tolist() == labels.tolist()


def test_greedy_color_valid_and_no_more_colours_than_networkx(config):
    for seed in (1, 2):
        Gn = nx.gnm_random_graph(1500, 6000, seed=seed)
        A = nx.to_scipy_sparse_array(Gn, nodelist=range(1500))
        colours = spillway.greedy_color(A, config=config)
        u, v = A.nonzero()
        assert (colours[u] != colours[v]).all()
        ref = nx.greedy_color(Gn, strategy="largest_first")
        assert colours.max() + 1 <= max(ref.values()) + 1
        # largest_first is networkx's order: the same colouring.
        assert colours.tolist() == [ref[i] for i in range(1500)]
        fewer = spillway.greedy_color(A, passes=3, config=config)
        assert (fewer[u] != fewer[v]).all() and fewer.max() <= colours.max()
        rnd = spillway.greedy_color(A, strategy="random_sequential", seed=7, config=config)
        assert (rnd[u] != rnd[v]).all()
