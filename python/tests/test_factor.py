"""SGD matrix factorisation against a plain numpy/Python SGD written here."""

import numpy as np
import pytest
import scipy.sparse as sp

import spillway

LR, REG, EPOCHS, K = 0.05, 0.05, 10, 10


@pytest.fixture(scope="module")
def low_rank():
    """A 1000 x 500 matrix of rank 5 with 10% of its entries observed."""
    rng = np.random.default_rng(0)
    m, n, r = 1000, 500, 5
    A = rng.standard_normal((m, r)) @ rng.standard_normal((r, n)) / np.sqrt(r)
    users, items = np.nonzero(rng.random((m, n)) < 0.1)
    return users, items, A[users, items], (m, n)


def reference_sgd(users, items, values, shape, k, lr, reg, epochs, seed):
    """Sequential SGD: every epoch visits the ratings in a random order, each making the
    update e = r - u.v, u += lr (e v - reg u), v += lr (e u - reg v) from the values before
    it; initial factors uniform in [0, 1/sqrt(k)). Returns the training RMSE per epoch."""
    g = np.random.default_rng(seed)
    U = (g.random((shape[0], k)) / np.sqrt(k)).tolist()
    V = (g.random((shape[1], k)) / np.sqrt(k)).tolist()
    us, its, vs = users.tolist(), items.tolist(), values.tolist()
    rmse = []
    for _ in range(epochs):
        for j in g.permutation(len(vs)).tolist():
            u, v = U[us[j]], V[its[j]]
            e = vs[j] - sum(a * b for a, b in zip(u, v))
            for f in range(k):
                uf, vf = u[f], v[f]
                u[f] = uf + lr * (e * vf - reg * uf)
                v[f] = vf + lr * (e * uf - reg * vf)
        pred = (np.array(U)[users] * np.array(V)[items]).sum(axis=1)
        rmse.append(float(np.sqrt(np.mean((pred - values) ** 2))))
    return rmse


@pytest.fixture(scope="module")
def reference_rmse(low_rank):
    return reference_sgd(*low_rank, K, LR, REG, EPOCHS, seed=3)


@pytest.mark.parametrize("ranks,nodes", [(1, 1), (4, 2)])
def test_sgd_error_falls_as_a_reference_sgd(low_rank, reference_rmse, ranks, nodes):
    users, items, values, shape = low_rank
    R = sp.csr_matrix((values, (users, items)), shape=shape)
    cfg = spillway.Config(ranks=ranks, nodes=nodes)
    U, V = spillway.sgd_factorize(R, K, learning_rate=LR, regularisation=REG, max_iter=EPOCHS, config=cfg)
    assert U.shape == (shape[0], K) and V.shape == (shape[1], K) and U.dtype == np.float64
    rmse = spillway.run_stats()["train_rmse"]
    # It falls while far from convergence; near it, SGD at a constant rate wobbles (the
    # reference here rises 0.1145 -> 0.1149 at its last epoch), by well under 1%.
    assert len(rmse) == EPOCHS and all(b < a for a, b in zip(rmse[:6], rmse[1:6]))
    assert all(b < 1.01 * a for a, b in zip(rmse, rmse[1:]))
    # The last value is the RMSE of the factors returned, recomputed here with numpy.
    pred = (U[users] * V[items]).sum(axis=1)
    assert rmse[-1] == pytest.approx(np.sqrt(np.mean((pred - values) ** 2)), rel=1e-9)
    # As good as the sequential reference (within 10%), and far below the first epoch's.
    assert rmse[-1] <= 1.1 * reference_rmse[-1]
    assert rmse[-1] < 0.2 * reference_rmse[0]
    # The triple form holds the same ratings in the same order: the same run.
    U3, V3 = spillway.sgd_factorize((users, items, values), K, shape=shape, learning_rate=LR,
                                    regularisation=REG, max_iter=EPOCHS, config=cfg)
    assert np.array_equal(U3, U) and np.array_equal(V3, V)


def test_sgd_progress_and_defaults(low_rank):
    users, items, values, shape = low_rank
    seen = []
    U, V = spillway.sgd_factorize((users, items, values), 4, max_iter=2, config=spillway.Config(ranks=1),
                                  progress=lambda i, n, rmse: seen.append((i, n, rmse)))
    assert U.shape == (shape[0], 4) and V.shape == (shape[1], 4)
    assert all(n == 2 for _, n, _ in seen)
    # Without a config, the largest square number of ranks not above the CPUs.
    spillway.sgd_factorize((users, items, values), 2, max_iter=1)
    ranks = spillway.run_stats()["ranks"]
    assert int(np.sqrt(ranks)) ** 2 == ranks
