"""Arguments are checked before any work, with ValueError / TypeError naming the argument;
errors follow the SpillwayError hierarchy."""

import numpy as np
import pytest
import scipy.sparse as sp

import spillway

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

SRC, DST = np.array([0, 1, 2]), np.array([1, 2, 0])


def raises(exc, *names):
    """pytest.raises that also checks the message names every one of `names`."""

    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *a):
            out = self.ctx.__exit__(*a)
            for n in names:
                assert n in str(self.info.value), f"{n!r} not in {self.info.value!r}"
            return out

    return Check()


def test_hierarchy():
    assert issubclass(spillway.InvalidRequest, ValueError)
    assert issubclass(spillway.InputError, spillway.InvalidRequest)
    assert issubclass(spillway.JobFailed, RuntimeError)
    for e in (spillway.InvalidRequest, spillway.InputError, spillway.JobFailed):
        assert issubclass(e, spillway.SpillwayError)


def test_pagerank_arguments(tmp_path):
    with raises(spillway.InvalidRequest, "alpha"):
        spillway.pagerank((SRC, DST), alpha=1.0)
    with raises(spillway.InvalidRequest, "alpha"):
        spillway.pagerank((SRC, DST), alpha=-0.1)
    with raises(TypeError, "alpha"):
        spillway.pagerank((SRC, DST), alpha="0.85")
    with raises(spillway.InvalidRequest, "tol"):
        spillway.pagerank((SRC, DST), tol=-1)
    with raises(spillway.InvalidRequest, "max_iter"):
        spillway.pagerank((SRC, DST), max_iter=0)
    with raises(TypeError, "G"):
        spillway.pagerank([[0, 1], [1, 0]])
    with raises(spillway.InvalidRequest, "square"):
        spillway.pagerank(sp.csr_matrix((3, 4)))
    with raises(spillway.InvalidRequest, "src", "dst"):
        spillway.pagerank((np.array([0, 1]), np.array([1])))
    with raises(spillway.InvalidRequest, "dst", "0..2"):
        spillway.pagerank((np.array([0, 1]), np.array([1, 5])), n=2)
    with raises(spillway.InvalidRequest, "src"):
        spillway.pagerank((np.array([-1, 1]), np.array([1, 0])), n=2)
    with raises(TypeError, "src"):
        spillway.pagerank((np.array([0.5]), np.array([1.0])))
    with raises(spillway.InputError, "no such file"):
        spillway.pagerank(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 two\n")
    with raises(spillway.InputError, "bad.txt", "2"):
        spillway.pagerank(str(bad))
    with raises(NotImplementedError, "comm"):
        spillway.pagerank((SRC, DST), comm=object())


def test_config_arguments(tmp_path):
    with raises(spillway.InvalidRequest, "mem_budget"):
        spillway.Config(mem_budget="lots")
    with raises(spillway.InvalidRequest, "mem_budget"):
        spillway.Config(mem_budget=0)
    with raises(spillway.InvalidRequest, "ranks"):
        spillway.Config(ranks=0)
    with raises(TypeError, "ranks"):
        spillway.Config(ranks="4")
    with raises(spillway.InvalidRequest, "nodes"):
        spillway.Config(ranks=2, nodes=3)
    with raises(spillway.InvalidRequest, "policy"):
        spillway.Config(policy="sometimes")
    with raises(spillway.InvalidRequest, "spill_dir"):
        spillway.Config(spill_dir=tmp_path / "absent")
    with raises(TypeError, "config"):
        spillway.pagerank((SRC, DST), config={"ranks": 2})


def test_components_and_colour_arguments():
    A = sp.csr_matrix(np.eye(3))
    with raises(spillway.InvalidRequest, "connection"):
        spillway.connected_components(A, connection="strong")
    with raises(spillway.InvalidRequest, "connection"):
        spillway.connected_components(A, connection="sideways")
    with raises(TypeError, "directed"):
        spillway.connected_components(A, directed="yes")
    with raises(spillway.InvalidRequest, "strategy"):
        spillway.greedy_color(A, strategy="smallest_last")
    with raises(spillway.InvalidRequest, "seed"):
        spillway.greedy_color(A, seed=3)
    with raises(spillway.InvalidRequest, "passes"):
        spillway.greedy_color(A, passes=-1)


def test_kmeans_arguments():
    X = np.random.default_rng(0).random((50, 3))
    with raises(spillway.InvalidRequest, "n_clusters"):
        spillway.KMeans(0).fit(X)
    with raises(spillway.InvalidRequest, "n_clusters"):
        spillway.KMeans(51).fit(X)
    with raises(spillway.InvalidRequest, "init"):
        spillway.KMeans(3, init="kmeans||").fit(X)
    with raises(spillway.InvalidRequest, "init"):
        spillway.KMeans(3, init=np.zeros((2, 3))).fit(X)
    with raises(spillway.InvalidRequest, "X"):
        spillway.KMeans(3).fit(np.where(X > 0.5, np.nan, X))
    with raises(spillway.InvalidRequest, "X"):
        spillway.KMeans(3).fit(X[0])
    with raises(TypeError, "X"):
        spillway.KMeans(3).fit(np.array([["a", "b"]]))
    with raises(spillway.InvalidRequest, "max_iter"):
        spillway.KMeans(3, max_iter=0).fit(X)
    with raises(spillway.InvalidRequest, "tol"):
        spillway.KMeans(3, tol=-1).fit(X)
    with raises(spillway.InvalidRequest, "sample_weight"):
        spillway.KMeans(3).fit(X, sample_weight=np.ones(50))
    with raises(spillway.InvalidRequest, "fitted"):
        spillway.KMeans(3).predict(X)
    km = spillway.KMeans(3, random_state=0).fit(X)
    with raises(spillway.InvalidRequest, "features"):
        km.predict(np.zeros((4, 2)))


def test_sgd_arguments():
    u, i, v = np.array([0, 1, 2]), np.array([1, 0, 1]), np.array([5.0, 3.0, 4.0])
    one = spillway.Config(ranks=1)
    with raises(spillway.InvalidRequest, "config.ranks", "square"):
        spillway.sgd_factorize((u, i, v), config=spillway.Config(ranks=2))
    with raises(spillway.InvalidRequest, "n_factors"):
        spillway.sgd_factorize((u, i, v), 0, config=one)
    with raises(TypeError, "n_factors"):
        spillway.sgd_factorize((u, i, v), 2.5, config=one)
    with raises(spillway.InvalidRequest, "learning_rate"):
        spillway.sgd_factorize((u, i, v), learning_rate=0, config=one)
    with raises(spillway.InvalidRequest, "regularisation"):
        spillway.sgd_factorize((u, i, v), regularisation=-1, config=one)
    with raises(spillway.InvalidRequest, "max_iter"):
        spillway.sgd_factorize((u, i, v), max_iter=0, config=one)
    with raises(spillway.InvalidRequest, "random_state"):
        spillway.sgd_factorize((u, i, v), random_state=-1, config=one)
    with raises(TypeError, "ratings"):
        spillway.sgd_factorize(np.ones((3, 2)), config=one)
    with raises(spillway.InvalidRequest, "ratings", "length"):
        spillway.sgd_factorize((u, i[:2], v), config=one)
    with raises(spillway.InvalidRequest, "users"):
        spillway.sgd_factorize((u - 1, i, v), config=one)
    with raises(spillway.InvalidRequest, "items", "0..1"):
        spillway.sgd_factorize((u, i, v), shape=(3, 1), config=one)
    with raises(TypeError, "items"):
        spillway.sgd_factorize((u, i.astype(float), v), config=one)
    with raises(spillway.InvalidRequest, "finite"):
        spillway.sgd_factorize((u, i, np.array([1.0, np.nan, 2.0])), config=one)
    with raises(spillway.InvalidRequest, "no ratings"):
        spillway.sgd_factorize(sp.csr_matrix((3, 2)), config=one)
    with raises(spillway.InvalidRequest, "shape"):
        spillway.sgd_factorize(sp.csr_matrix((3, 2)), shape=(2, 3), config=one)
    with raises(TypeError, "shape"):
        spillway.sgd_factorize((u, i, v), shape=5, config=one)
    with raises(spillway.JobFailed, "learning rate"):
        spillway.sgd_factorize((u, i, v * 1e200), learning_rate=10.0, config=one)
    with raises(NotImplementedError, "comm"):
        spillway.sgd_factorize((u, i, v), comm=object())


def test_other_arguments(tmp_path):
    a = np.linspace(0, 1, 100)
    with raises(spillway.InvalidRequest, "abs", "rel"):
        spillway.compress(a)
    with raises(spillway.InvalidRequest, "abs", "rel"):
        spillway.compress(a, abs=1e-3, rel=1e-3)
    with raises(spillway.InvalidRequest, "abs"):
        spillway.compress(a, abs=0)
    with raises(TypeError, "float32 or float64"):
        spillway.compress(np.arange(10), abs=1)
    with raises(spillway.InvalidRequest, "dimensions"):
        spillway.compress(np.zeros((2, 2, 2, 2)), abs=1)
    with raises(spillway.InvalidRequest, "method"):
        spillway.compress(a, abs=1e-3, method="zfp")
    with raises(TypeError, "buf"):
        spillway.decompress(3)
    with raises(spillway.InputError, "no such file"):
        spillway.word_count(str(tmp_path / "absent.txt"))
    with raises(spillway.InvalidRequest, "paths"):
        spillway.word_count([])
    with raises(spillway.InvalidRequest, "NaN"):
        spillway.sort(np.array([1.0, np.nan]))
    with raises(spillway.InvalidRequest, "power of two"):
        spillway.fft(np.ones(12))
    with raises(spillway.InvalidRequest, "ranks"):
        spillway.fft(np.ones(8), config=spillway.Config(ranks=4))


if given is not None:

    @settings(max_examples=80, deadline=None)
    @given(
        alpha=st.one_of(st.floats(allow_nan=True), st.integers(-5, 5), st.text(max_size=3), st.none()),
        tol=st.one_of(st.floats(allow_nan=True), st.integers(-5, 5)),
        max_iter=st.one_of(st.integers(-3, 3), st.floats(-1, 3)),
    )
    def test_pagerank_arguments_never_crash(alpha, tol, max_iter):
        """Any argument is either accepted or refused with ValueError / TypeError."""
        try:
            r = spillway.pagerank((SRC, DST), alpha=alpha, tol=tol, max_iter=max_iter)
        except (ValueError, TypeError):
            return
        assert np.isfinite(r).all()

    @settings(max_examples=60, deadline=None)
    @given(src=st.lists(st.integers(-3, 12), max_size=8), dst=st.lists(st.integers(-3, 12), max_size=8),
           n=st.one_of(st.none(), st.integers(-2, 12)))
    def test_graph_arguments_never_crash(src, dst, n):
        for call in (spillway.pagerank, spillway.connected_components, spillway.greedy_color):
            try:
                if call is spillway.pagerank:
                    call((np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)), n=n)
                elif n is None:
                    call((np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)))
            except (ValueError, TypeError):
                pass
