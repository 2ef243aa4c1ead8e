"""tally.histogram / bincount on NumPy arrays (CPU backend) against NumPy."""

import math

import numpy as np
import pytest

import tally


@pytest.mark.parametrize("bins", [1, 2, 7, 100, 1000])
def test_even_bins_match_numpy_float64(rng, bins):
    x = rng.standard_normal(100003)
    counts, edges = tally.histogram(x, bins=bins)  # range from the data: the max sample sits on hi
    ref_counts, ref_edges = np.histogram(x, bins=bins)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(edges, ref_edges)
    assert counts.sum() == x.size


def test_even_bins_samples_on_every_edge(rng):
    # Order-sensitive data: every edge value (and its neighbours) as a sample.
    lo, hi, bins = -1.3, 2.9, 97
    edges = np.linspace(lo, hi, bins + 1)
    x = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf),
                        rng.uniform(lo - 1, hi + 1, 10000), [np.nan, np.inf, -np.inf]])
    rng.shuffle(x)
    counts, _ = tally.histogram(x, bins=bins, range=(lo, hi))
    np.testing.assert_array_equal(counts, np.histogram(x, bins=bins, range=(lo, hi))[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_even_bins_integers(rng, dtype):
    x = rng.integers(-50, 50, 20001).astype(dtype)
    np.testing.assert_array_equal(tally.histogram(x, bins=13)[0], np.histogram(x, bins=13)[0])
    np.testing.assert_array_equal(tally.histogram(x, bins=10, range=(0, 10))[0],
                                  np.histogram(x, bins=10, range=(0, 10))[0])


def test_float32_samples_compare_in_float64(rng):
    x = rng.uniform(0, 1, 50000).astype(np.float32)
    np.testing.assert_array_equal(tally.histogram(x, bins=64, range=(0, 1))[0],
                                  np.histogram(x.astype(np.float64), bins=64, range=(0, 1))[0])


def test_equal_range_widens_like_numpy():
    x = np.full(10, 3.0)
    counts, edges = tally.histogram(x, bins=4)
    ref_counts, ref_edges = np.histogram(x, bins=4)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_array_equal(edges, ref_edges)


def test_explicit_edges_match_numpy(rng):
    x = rng.standard_normal(30001)
    edges = np.array([-3.0, -1.0, -0.5, 0.0, 0.0, 0.25, 1.0, 2.5, 2.5])  # repeated edges, last one too
    x[:5] = [2.5, -3.0, 0.0, 0.25, np.nan]
    counts, out_edges = tally.histogram(x, bins=edges)
    np.testing.assert_array_equal(counts, np.histogram(x, bins=edges)[0])
    np.testing.assert_array_equal(out_edges, edges)
    counts = tally.histogram(x, bins=list(edges[:4]), return_edges=False)
    np.testing.assert_array_equal(counts, np.histogram(x, bins=edges[:4])[0])


@pytest.mark.parametrize("xtype, wtype", [(np.float32, np.float32), (np.float64, np.float64),
                                          (np.float64, np.float32), (np.float32, np.float64),
                                          (np.int64, np.float32), (np.int32, np.float64)])
def test_weighted_histogram(rng, xtype, wtype):
    # Any pair of sample and weight dtypes, as NumPy takes them; the counts in
    # the weights' dtype.
    if np.issubdtype(xtype, np.integer):
        x = rng.integers(-3, 4, 40000).astype(xtype)
    else:
        x = rng.standard_normal(40000).astype(xtype)
    w = rng.uniform(-1, 2, x.size).astype(wtype)
    counts, _ = tally.histogram(x, bins=50, range=(-3, 3), weights=w)
    assert counts.dtype == wtype
    # Reference: each sample's bin by a search of NumPy's float64 edges (the
    # last bin closed), each bin's weights summed exactly (math.fsum). The
    # bound is derived: a sum of m values in any order in a type of unit
    # roundoff u is within (m - 1)·u·Σ|w| of the exact sum, and the result's
    # own rounding adds u·|exact|. (np.histogram's weighted counts are
    # differences of one running sum over all samples, whose error grows with
    # every sample, not with the bin's: it is no reference at this precision.)
    edges = np.linspace(-3.0, 3.0, 51)
    xd = x.astype(np.float64)
    k = np.searchsorted(edges, xd, side="right") - 1
    k[xd == edges[-1]] = 49
    inside = (xd >= edges[0]) & (xd <= edges[-1])
    u = np.finfo(wtype).eps / 2
    for b in range(50):
        wb = w[inside & (k == b)].astype(np.float64)
        exact = math.fsum(wb)
        bound = max(wb.size - 1, 0) * u * np.abs(wb).sum() + u * abs(exact)
        assert abs(float(counts[b]) - exact) <= bound, (b, float(counts[b]), exact, bound)


@pytest.mark.parametrize("wtype", [None, np.float32, np.float64])
def test_float16_samples_bin_as_their_exact_values(rng, wtype):
    # float16 samples are binned as float32 (float64 with float64 weights),
    # exactly: the counts are NumPy's for the same values in float64.
    x = rng.uniform(-2, 2, 5000).astype(np.float16)
    w = None if wtype is None else rng.uniform(0, 1, x.size).astype(wtype)
    counts, edges = tally.histogram(x, bins=37, range=(-1.5, 1.75), weights=w)
    want, want_edges = np.histogram(x.astype(np.float64), bins=37, range=(-1.5, 1.75),
                                    weights=None if w is None else w.astype(np.float64))
    np.testing.assert_array_equal(edges, want_edges)
    if w is None:
        np.testing.assert_array_equal(counts, want)
    else:
        assert counts.dtype == wtype
        np.testing.assert_allclose(counts, want, rtol=1e-4 if wtype == np.float32 else 1e-12)


def test_integer_samples_with_float32_weights_bin_as_numpy():
    # Integer samples were once converted to the weights' float32, so 2^24 + 1
    # became 2^24 and left its bin; they are binned as float64 values, as in NumPy.
    x = np.array([2**24 + 1, 2**24 + 3, -(2**40) - 1], dtype=np.int64)
    w = np.array([1.0, 2.0, 4.0], np.float32)
    cases = ((1, (2**24 + 0.5, 2**24 + 1.5)), (2, (2**24 + 0.5, 2**24 + 3.5)),
             (1, (-(2**40) - 1.5, -(2**40) - 0.5)))
    for bins, range_ in cases:
        counts, edges = tally.histogram(x, bins=bins, range=range_, weights=w)
        want, want_edges = np.histogram(x, bins=bins, range=range_, weights=w)
        np.testing.assert_array_equal(counts, want.astype(np.float32))
        np.testing.assert_array_equal(edges, want_edges)


def test_weighted_deterministic_is_bitwise_stable_and_accurate(rng):
    x = rng.standard_normal(200003)
    w = rng.standard_normal(x.size) * 1e3
    first = tally.histogram(x, bins=37, range=(-2, 2), weights=w, deterministic=True)[0]
    perm = rng.permutation(x.size)  # a different order of the same updates
    for xs, ws in [(x, w), (x[perm], w[perm])]:
        again = tally.histogram(xs, bins=37, range=(-2, 2), weights=ws, deterministic=True)[0]
        assert again.tobytes() == first.tobytes()
    keys = np.histogram(x, bins=37, range=(-2, 2))[0]
    assert keys.sum() > 0
    bin_of = np.clip(((x + 2) / 4 * 37).astype(np.int64), 0, 36)
    inside = (x >= -2) & (x <= 2)
    for k in range(37):
        exact = math.fsum(w[inside & (bin_of == k)])
        assert abs(first[k] - exact) <= 1e-9 * np.abs(w).sum()


def test_weighted_deterministic_rejects_nan_weight(rng):
    x = rng.standard_normal(100)
    x[7] = 0.25  # inside the range: a NaN weight on an ignored sample is never inspected
    w = np.ones(100)
    w[7] = np.nan
    with pytest.raises(ValueError, match="tally.histogram: argument 'weights' holds NaN"):
        tally.histogram(x, bins=5, range=(-1, 1), weights=w, deterministic=True)


def test_weighted_deterministic_unchecked_gives_the_checked_bits(rng):
    """check_weights=False with deterministic=True (histogram and bincount):
    no check is forced (on the GPU: no wait), the checked call's bits, and
    with a NaN and an infinite weight the sums with those weights as 0."""
    x = rng.uniform(-1, 1, 20000)
    keys = rng.integers(0, 300, x.size)
    w = rng.uniform(-1, 1, x.size) * 2.0 ** rng.integers(-20, 20, x.size)
    calls = {
        "histogram": lambda w, **kw: tally.histogram(x, bins=37, range=(-1, 1), weights=w, deterministic=True,
                                                     return_edges=False, **kw),
        "bincount": lambda w, **kw: tally.bincount(keys, weights=w, deterministic=True, **kw),
    }
    bad = w.copy()
    bad[[13, 4000]] = [np.nan, -np.inf]
    zeroed = w.copy()
    zeroed[[13, 4000]] = 0.0
    for name, call in calls.items():
        assert call(w, check_weights=False).tobytes() == call(w).tobytes(), name
        with pytest.raises(ValueError, match=f"tally.{name}: argument 'weights' holds"):
            call(bad)
        unchecked = call(bad, check_weights=False)
        assert not np.isnan(unchecked).any() and np.isfinite(unchecked).all(), name
        assert unchecked.tobytes() == call(zeroed).tobytes(), name


def test_histogram_errors_name_the_argument():
    x = np.ones(10)
    with pytest.raises(ValueError, match="argument 'bins' must be positive"):
        tally.histogram(x, bins=0)
    with pytest.raises(ValueError, match="argument 'range'"):
        tally.histogram(x, bins=3, range=(2, 1))
    with pytest.raises(ValueError, match="argument 'range' is not finite"):
        tally.histogram(x, bins=3, range=(0, np.inf))
    with pytest.raises(ValueError, match="argument 'bins' must increase monotonically"):
        tally.histogram(x, bins=[0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="argument 'x' gives the non-finite range"):
        tally.histogram(np.array([1.0, np.nan]), bins=3)
    with pytest.raises(ValueError, match="argument 'weights' has shape"):
        tally.histogram(x, bins=3, weights=np.ones(9))
    with pytest.raises(TypeError, match="argument 'weights' has dtype int64"):
        tally.histogram(x, bins=3, weights=np.ones(10, np.int64))
    with pytest.raises(TypeError, match="argument 'x'.*bool"):
        tally.histogram(np.ones(10, bool), bins=3, range=(0, 1))
    # bins that are neither a count nor edges: a float, a bool, a 0-d float array
    for bins in (2.5, True, np.array(3.0)):
        with pytest.raises(TypeError, match="argument 'bins' must be an int or a 1-D array of bin edges"):
            tally.histogram(x, bins=bins, range=(0, 1))
    # NumPy's byte order other than the machine's: DLPack cannot carry it
    with pytest.raises(TypeError, match="argument 'x' has a non-native byte order"):
        tally.histogram(x.astype(x.dtype.newbyteorder(">" if x.dtype.byteorder in "=<" else "<")), bins=3)


def test_histogram_count_as_0d_integer_array(rng):
    x = rng.uniform(0, 1, 1000)
    for bins in (np.int64(7), np.array(7), np.array(7, np.int32)):
        counts, edges = tally.histogram(x, bins=bins, range=(0, 1))
        want, want_edges = np.histogram(x, bins=7, range=(0, 1))
        np.testing.assert_array_equal(counts, want)
        np.testing.assert_array_equal(edges, want_edges)


# ---- bincount -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_bincount_matches_numpy(rng, dtype):
    x = rng.integers(0, 1000, 100001).astype(dtype)
    counts = tally.bincount(x)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, np.bincount(x))
    np.testing.assert_array_equal(tally.bincount(x, minlength=2000), np.bincount(x, minlength=2000))


@pytest.mark.parametrize("wtype", [np.float32, np.float64])
def test_bincount_weighted(rng, wtype):
    x = rng.integers(0, 10, 50000)
    w = rng.uniform(0, 1, x.size).astype(wtype)
    counts = tally.bincount(x, weights=w)
    assert counts.dtype == wtype
    np.testing.assert_allclose(counts, np.bincount(x, weights=w.astype(np.float64)),
                               rtol=50 * np.finfo(wtype).eps * math.log2(x.size))


def test_bincount_deterministic_bits(rng):
    x = rng.integers(0, 7, 100000)
    w = rng.standard_normal(x.size)
    first = tally.bincount(x, weights=w, deterministic=True)
    perm = rng.permutation(x.size)
    assert tally.bincount(x[perm], weights=w[perm], deterministic=True).tobytes() == first.tobytes()
    np.testing.assert_allclose(first, [math.fsum(w[x == k]) for k in range(7)], rtol=0, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 1023, 1024, 1025, 65537])
def test_bincount_length_and_minimum_from_one_pass(rng, dtype, n):
    # bincount's length (max + 1) and its negative-value check (min) come from
    # one pass over x (_core.extrema): the extremes at random positions,
    # sizes across the tree's boundaries; the error names the true minimum.
    x = rng.integers(0, 50, n).astype(dtype)
    x[rng.integers(n)] = 77
    assert tally.bincount(x).size == 78
    x[rng.integers(n)] = -3 - rng.integers(5)
    with pytest.raises(ValueError, match=f"its minimum is {x.min()}"):
        tally.bincount(x)
    # The full range of the dtype, through the core function itself.
    info = np.iinfo(dtype)
    y = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    out = np.full(2, 7, dtype)
    tally._core.extrema(y, out, 0, "bincount")
    np.testing.assert_array_equal(out, [y.min(), y.max()])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 33, 1025, 65537])
def test_histogram_automatic_range_from_one_pass(rng, dtype, n):
    # histogram's automatic range: min and max in one pass (_core.extrema),
    # the extremes at random positions; NumPy's edges from them.
    x = rng.uniform(-1, 1, n).astype(dtype)
    x[rng.integers(n)] = dtype(-7.25)
    x[rng.integers(n)] = dtype(9.5)
    counts, edges = tally.histogram(x, bins=16)
    want, want_edges = np.histogram(x.astype(np.float64), bins=16)
    np.testing.assert_array_equal(edges, want_edges)
    np.testing.assert_array_equal(counts, want)
    # A NaN wins both ends (as in tally.reduce's min and max); infinities are extremes.
    out = np.zeros(2, dtype)
    y = x.copy()
    y[rng.integers(n)] = -np.inf
    tally._core.extrema(y, out, 0, "histogram")
    assert out[0] == -np.inf and out[1] == y.max()
    y[rng.integers(n)] = np.nan
    tally._core.extrema(y, out, 0, "histogram")
    assert np.isnan(out).all()


def test_bincount_empty_and_errors():
    np.testing.assert_array_equal(tally.bincount(np.zeros(0, np.int64), minlength=3), [0, 0, 0])
    with pytest.raises(ValueError, match="argument 'x' must be non-negative"):
        tally.bincount(np.array([1, -1, 2]))
    with pytest.raises(TypeError, match="argument 'x' has dtype float64"):
        tally.bincount(np.ones(3))
    with pytest.raises(ValueError, match="argument 'x' must be one-dimensional"):
        tally.bincount(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match="argument 'minlength'"):
        tally.bincount(np.ones(3, np.int64), minlength=-1)
    with pytest.raises(ValueError, match="argument 'weights' has 2 elements"):
        tally.bincount(np.ones(3, np.int64), weights=np.ones(2))
