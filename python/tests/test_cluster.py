"""KMeans against scikit-learn, spherical K-means against a numpy reference."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs

import spillway


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=6000, n_features=4, centers=5, cluster_std=2.0, random_state=0)
    return X


def test_kmeans_labels_equal_scikit_learn_with_the_same_centres(blobs, config):
    for k, pick in ((5, [0, 1, 2, 3, 4]), (8, range(100, 900, 100))):
        init = blobs[list(pick)].copy()
        ours = spillway.KMeans(k, init=init, max_iter=300, tol=0, config=config).fit(blobs)
        ref = SkKMeans(k, init=init, n_init=1, max_iter=300, tol=0, algorithm="lloyd").fit(blobs)
        assert np.array_equal(ours.labels_, ref.labels_)
        assert ours.n_iter_ == ref.n_iter_
        np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10, atol=1e-10)
        assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)
        assert np.array_equal(ours.predict(blobs[:500]), ref.predict(blobs[:500]))
        assert ours.score(blobs) == pytest.approx(ref.score(blobs), rel=1e-10)


@pytest.mark.parametrize("tol", [1e-4, 1e-3, 1e-2])
def test_kmeans_tol_stops_where_scikit_learn_stops(blobs, config, tol):
    init = blobs[list(range(100, 900, 100))].copy()
    ref = SkKMeans(8, init=init, n_init=1, algorithm="lloyd", tol=tol).fit(blobs)
    strict = SkKMeans(8, init=init, n_init=1, algorithm="lloyd", tol=0).fit(blobs)
    assert ref.n_iter_ < strict.n_iter_  # the tolerance decides the stop on these data
    ours = spillway.KMeans(8, init=init, tol=tol, config=config).fit(blobs)
    assert ours.n_iter_ == ref.n_iter_
    assert np.array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10, atol=1e-10)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)


def test_kmeans_given_centres_go_in_memory(monkeypatch, tmp_path):
    # No file carries the centres: the temporary directory stays empty while the job runs
    # (looked at from the progress callback), and the labels are scikit-learn's from the same
    # centres, passed bit for bit.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    X = np.random.default_rng(4).random((400_000, 4))
    init = X[:16] * (1 + 1e-15)
    seen = []
    ours = spillway.KMeans(16, init=init, tol=0, max_iter=25, config=spillway.Config(ranks=2),
                           progress=lambda *a: seen.append(sorted(os.listdir(tmp_path)))).fit(X)
    assert seen and all(names == [] for names in seen)
    ref = SkKMeans(16, init=init, n_init=1, algorithm="lloyd", tol=0, max_iter=25).fit(X)
    assert np.array_equal(ours.labels_, ref.labels_) and ours.n_iter_ == ref.n_iter_


def test_kmeans_inits_and_attributes(blobs):
    for init in ("k-means++", "random"):
        km = spillway.KMeans(5, init=init, random_state=0).fit(blobs)
        assert km.cluster_centers_.shape == (5, 4) and km.labels_.shape == (6000,)
        assert km.n_features_in_ == 4 and km.n_iter_ >= 1
        assert np.array_equal(km.fit_predict(blobs), km.labels_)
        # As good as scikit-learn's own start on well-separated blobs.
        ref = SkKMeans(5, init=init, random_state=0, n_init="auto").fit(blobs)
        assert km.inertia_ <= ref.inertia_ * 1.05
        assert km.stats_["iterations"] == km.n_iter_
    again = spillway.KMeans(5, random_state=3).fit(blobs)
    assert np.array_equal(again.labels_, spillway.KMeans(5, random_state=3).fit(blobs).labels_)


def reference_spherical(X, init_rows, max_iter):
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    Xn = sp.diags_array(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ X
    C = Xn[init_rows].toarray()
    labels = np.full(X.shape[0], -1)
    for it in range(max_iter):
        sims = (Xn @ C.T)
        new = np.asarray(sims.argmax(axis=1)).ravel()
        if np.array_equal(new, labels):
            break
        labels = new
        S = np.zeros_like(C)
        for c in range(C.shape[0]):
            rows = Xn[labels == c]
            if rows.shape[0]:
                s = np.asarray(rows.sum(axis=0)).ravel()
                nrm = np.linalg.norm(s)
                S[c] = s / nrm if nrm > 0 else C[c]
            else:
                S[c] = C[c]
        C = S
    return labels


def test_spherical_kmeans_matches_a_numpy_reference(config):
    rng = np.random.default_rng(5)
    topics = rng.random((4, 300)) ** 8
    rows = []
    for i in range(800):
        t = topics[i % 4] + 0.05 * rng.random(300) ** 20
        rows.append(np.where(rng.random(300) < 0.2, t, 0.0))
    X = sp.csr_matrix(np.array(rows))
    km = spillway.SphericalKMeans(4, init="first", config=config).fit(X)
    ref = reference_spherical(X, [0, 1, 2, 3], 100)
    assert np.array_equal(km.labels_, ref)
    norms = np.linalg.norm(km.cluster_centers_, axis=1)
    assert np.allclose(norms[norms > 0], 1.0)
    dense = spillway.SphericalKMeans(4, init="first", config=config).fit(X.toarray())
    assert np.array_equal(dense.labels_, km.labels_)
