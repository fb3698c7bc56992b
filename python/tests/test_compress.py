"""Error-bounded compression: the bound, shapes and types restored, the codec, and
property tests (hypothesis) of round trips."""

import numpy as np
import pytest

import spillway

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError:  # pragma: no cover
    given = None


def field(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 6, s) for s in shape], indexing="ij")
    f = sum(np.sin(g * (i + 1)) for i, g in enumerate(grids)) + 0.01 * rng.standard_normal(shape)
    return f.astype(dtype)


@pytest.mark.parametrize("shape", [(5000,), (60, 80), (20, 30, 40)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["predict", "sbd1", "rbd2"])
def test_bound_shape_and_dtype(shape, dtype, method):
    a = field(shape, dtype)
    for eps in (1e-1, 1e-3):
        buf = spillway.compress(a, abs=eps, method=method)
        back = spillway.decompress(buf)
        assert back.shape == a.shape and back.dtype == a.dtype
        assert np.all(np.abs(back.astype(np.float64) - a.astype(np.float64)) <= eps)
        assert len(buf) < a.nbytes


def test_relative_bound_and_non_finite_values():
    a = field((100, 100)) * 1000
    buf = spillway.compress(a, rel=1e-4)
    eps = 1e-4 * (a.max() - a.min())
    assert np.abs(spillway.decompress(buf) - a).max() <= eps
    b = a.copy()
    b[3, 4], b[5, 6], b[7, 8] = np.nan, np.inf, -np.inf
    back = spillway.decompress(spillway.compress(b, abs=1e-2))
    same = np.isnan(back) == np.isnan(b)
    assert same.all() and back[5, 6] == np.inf and back[7, 8] == -np.inf
    with pytest.raises(spillway.InvalidRequest):
        spillway.compress(b, abs=1e-2, method="sbd1")


def test_non_contiguous_input_and_bytes_like():
    a = field((64, 64))[::2, ::3]
    buf = spillway.compress(a, abs=1e-3)
    assert np.abs(spillway.decompress(bytearray(buf)) - a).max() <= 1e-3
    assert np.abs(spillway.decompress(memoryview(buf)) - a).max() <= 1e-3


def test_codec():
    codec = spillway.SpillwayCodec(abs=1e-3)
    a = field((4, 5, 6, 7))
    enc = codec.encode(a)
    dec = np.asarray(codec.decode(enc)).reshape(a.shape)
    assert np.abs(dec - a).max() <= 1e-3
    out = np.empty_like(a)
    codec.decode(enc, out=out)
    assert np.abs(out - a).max() <= 1e-3
    cfg = codec.get_config()
    assert cfg["id"] == "spillway" and spillway.SpillwayCodec.from_config(cfg) == codec


def test_corrupt_buffers_are_refused():
    buf = spillway.compress(field((1000,)), abs=1e-3)
    for bad in (b"", b"not a spillway buffer", buf[: len(buf) // 2]):
        with pytest.raises(spillway.InvalidRequest):
            spillway.decompress(bad)


def test_junk_buffers_raise_errors_naming_the_argument():
    a = field((1000,))
    buf = spillway.compress(a, abs=1e-3)
    changed = bytearray(buf)
    changed[len(buf) // 2] ^= 0xFF
    junk = [b"", b"x", b"not a spillway buffer", bytes(64), buf[: len(buf) // 2], bytes(changed)]
    codec = spillway.SpillwayCodec(abs=1e-3)
    for bad in junk:
        for decode in (spillway.decompress, codec.decode):
            with pytest.raises(spillway.InvalidRequest, match=r"^buf: "):
                decode(bad)
    with pytest.raises(spillway.InvalidRequest, match=r"^buf: .*magic"):
        spillway.decompress(b"not a spillway buffer")
    for decode in (spillway.decompress, codec.decode):
        with pytest.raises(TypeError, match=r"^buf "):
            decode(12345)
    with pytest.raises(spillway.InvalidRequest, match=r"^out: "):
        codec.decode(buf, out=np.empty(999))
    # A strided `out` receives the values (checked against the original array, not a copy).
    out = np.zeros(2000)[::2]
    codec.decode(buf, out=out)
    assert np.abs(out - a).max() <= 1e-3


if given is not None:
    finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=64)

    @settings(max_examples=60, deadline=None)
    @given(
        a=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12), elements=finite),
        eps=st.floats(1e-6, 10.0),
        method=st.sampled_from(["predict", "sbd1", "sbd2", "rbd1", "rbd2", "rbd3"]),
    )
    def test_round_trip_holds_the_bound(a, eps, method):
        back = spillway.decompress(spillway.compress(a, abs=eps, method=method))
        assert back.shape == a.shape and back.dtype == a.dtype
        assert np.all(np.abs(back - a) <= eps)

    @settings(max_examples=40, deadline=None)
    @given(
        a=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=10),
                     elements=st.floats(-1e4, 1e4, width=32)),
        eps=st.floats(1e-3, 10.0),
    )
    def test_round_trip_float32(a, eps):
        back = spillway.decompress(spillway.compress(a, abs=eps))
        assert back.dtype == np.float32
        assert np.all(np.abs(back.astype(np.float64) - a.astype(np.float64)) <= eps)
