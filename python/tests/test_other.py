"""word_count, sort and fft against plain Python and numpy; Config and run_stats."""

import collections

import numpy as np
import pytest

import spillway


def test_word_count_equals_python(tmp_path, config):
    rng = np.random.default_rng(0)
    vocab = ["alpha", "beta", "γάμμα", "δ", "x" * 40, "a\x00b"]
    files, expected = [], collections.Counter()
    for f in range(3):
        words = [vocab[i] for i in rng.integers(0, len(vocab), 5000)]
        seps = [" ", "\n", "\t", "  ", "\r\n"]
        text = "".join(w + seps[i % 5] for i, w in enumerate(words))
        p = tmp_path / f"t{f}.txt"
        p.write_bytes(text.encode() + b"\xff\xfe raw\n")
        files.append(str(p))
        expected.update(words)
        expected.update(["\udcff\udcfe", "raw"])
    got = spillway.word_count(files, config=config)
    assert got == dict(expected)
    assert spillway.word_count(files[0]) == spillway.word_count([files[0]])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.uint8, np.float64, np.float32])
def test_sort_equals_numpy(dtype, config):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind == "f":
        a = (rng.standard_normal(50_000) * 1e6).astype(dtype)
        a[:5] = [0.0, -0.0, np.inf, -np.inf, 1e-300]
    elif np.dtype(dtype).kind == "u":
        a = rng.integers(0, np.iinfo(dtype).max, 50_000, dtype=dtype, endpoint=True)
    else:
        a = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 50_000, dtype=dtype, endpoint=True)
    got = spillway.sort(a, config=config)
    assert got.dtype == a.dtype and np.array_equal(got, np.sort(a))


def test_fft_equals_numpy():
    rng = np.random.default_rng(2)
    for ranks, n in ((1, 1 << 10), (2, 1 << 12), (4, 1 << 14)):
        x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        got = spillway.fft(x, config=spillway.Config(ranks=ranks))
        np.testing.assert_allclose(got, np.fft.fft(x), rtol=1e-9, atol=1e-9 * np.sqrt(n))


def test_config_and_sizes():
    assert spillway.parse_size("256M") == 256 << 20
    assert spillway.parse_size("1.5G") == 3 << 29
    assert spillway.parse_size("64KiB") == 64 << 10
    assert spillway.parse_size(4096) == 4096
    c = spillway.Config(ranks=4, nodes=2, running=1, mem_budget="64M", policy="lrlw")
    assert (c.ranks, c.nodes, c.running, c.mem_budget, c.policy) == (4, 2, 1, 64 << 20, "lrlw")
    assert "ranks=4" in repr(c)


def test_run_stats_report():
    spillway.pagerank((np.array([0, 1]), np.array([1, 0])), config=spillway.Config(ranks=2, mem_budget="8M"))
    s = spillway.run_stats()
    for key in ("elapsed", "peak_rss", "bytes_spilled", "bytes_read_back", "iteration_times", "messages_sent"):
        assert key in s
    assert s["ranks"] == 2 and s["mem_budget"] == 8 << 20
