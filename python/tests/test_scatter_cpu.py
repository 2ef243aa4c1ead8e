"""tally.scatter_add / scatter_reduce on NumPy arrays (CPU backend) against
NumPy's ufunc.at."""

import math

import numpy as np
import pytest

import tally


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("vtype", [np.int32, np.int64])
def test_scatter_add_integers_exact(rng, itype, vtype):
    out = rng.integers(-100, 100, 1000).astype(vtype)
    index = rng.integers(0, 1000, 50000).astype(itype)
    src = rng.integers(-1000, 1000, index.size).astype(vtype)
    expected = out.copy()
    np.add.at(expected, index, src)
    assert tally.scatter_add(out, index, src) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("vtype", [np.float32, np.float64])
@pytest.mark.parametrize("bins", [1, 10, 100000])
def test_scatter_add_floats(rng, vtype, bins):
    out = rng.standard_normal(bins).astype(vtype)
    index = rng.integers(0, bins, 60000)
    src = rng.standard_normal(index.size).astype(vtype)
    expected = out.astype(np.float64)
    np.add.at(expected, index, src.astype(np.float64))
    tally.scatter_add(out, index, src)
    per_bin = np.bincount(index, weights=np.abs(src.astype(np.float64)), minlength=bins) + 1
    assert np.all(np.abs(out - expected) <= 4 * np.finfo(vtype).eps * per_bin * math.log2(index.size))


@pytest.mark.parametrize("vtype", [np.float32, np.float64])
def test_scatter_add_deterministic_is_order_independent(rng, vtype):
    index = rng.integers(0, 50, 100000)
    src = (rng.standard_normal(index.size) * 10.0 ** rng.integers(-4, 4, index.size)).astype(vtype)
    base = rng.standard_normal(50).astype(vtype)
    first = tally.scatter_add(base.copy(), index, src, deterministic=True)
    for _ in range(2):
        perm = rng.permutation(index.size)
        again = tally.scatter_add(base.copy(), index[perm], src[perm], deterministic=True)
        assert again.tobytes() == first.tobytes()
    exact = np.array([math.fsum([float(base[k])] + list(src[index == k].astype(np.float64))) for k in range(50)])
    assert np.all(np.abs(first - exact) <= 1e-6 * np.abs(src).astype(np.float64).sum() / 50 + np.abs(exact) * np.finfo(vtype).eps)


@pytest.mark.parametrize("op,ufunc", [("prod", np.multiply), ("amin", np.minimum), ("amax", np.maximum)])
@pytest.mark.parametrize("vtype", [np.float64, np.int64, np.int32, np.float32])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_scatter_reduce_ops(rng, op, ufunc, vtype, itype):
    out = rng.integers(1, 5, 300).astype(vtype)
    index = rng.integers(0, 300, 3000).astype(itype)
    src = (rng.integers(1, 3, index.size) if op == "prod" else rng.integers(-10**6, 10**6, index.size)).astype(vtype)
    expected = out.copy()
    ufunc.at(expected, index, src)
    tally.scatter_reduce(out, index, src, op)
    if op == "prod" and vtype in (np.float32, np.float64):
        np.testing.assert_allclose(out, expected, rtol=1e-5)
    else:
        np.testing.assert_array_equal(out, expected)


def test_scatter_out_of_range_index_is_reported():
    out = np.zeros(10)
    with pytest.raises(ValueError, match=r"argument 'index'.*\[2\] = 10 is outside"):
        tally.scatter_add(out, np.array([1, 2, 10, 3]), np.ones(4))
    with pytest.raises(ValueError, match=r"argument 'index'.*-1"):
        tally.scatter_add(np.zeros(10), np.array([-1]), np.ones(1))
    # Unchecked: out-of-range updates are skipped, the others applied.
    out = np.zeros(10)
    tally.scatter_add(out, np.array([1, 2, 10, 3, -5]), np.ones(5), check_indices=False)
    np.testing.assert_array_equal(out, [0, 1, 1, 1, 0, 0, 0, 0, 0, 0])


def test_scatter_errors_name_the_argument():
    out = np.zeros(10)
    with pytest.raises(ValueError, match="argument 'src' has 3 elements"):
        tally.scatter_add(out, np.zeros(4, np.int64), np.ones(3))
    with pytest.raises(TypeError, match="argument 'src' has dtype float32"):
        tally.scatter_add(out, np.zeros(4, np.int64), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="argument 'index' has dtype float64"):
        tally.scatter_add(out, np.zeros(4), np.ones(4))
    with pytest.raises(ValueError, match="argument 'out' must be one-dimensional"):
        tally.scatter_add(np.zeros((2, 5)), np.zeros(4, np.int64), np.ones(4))
    with pytest.raises(ValueError, match="argument 'out' must be contiguous"):
        tally.scatter_add(np.zeros(20)[::2], np.zeros(4, np.int64), np.ones(4))
    with pytest.raises(ValueError, match="argument 'out' overlaps 'src'"):
        buf = np.zeros(20)
        tally.scatter_add(buf[:10], np.zeros(4, np.int64), buf[8:12])
    with pytest.raises(ValueError, match="argument 'reduce'"):
        tally.scatter_reduce(out, np.zeros(4, np.int64), np.ones(4), "mean")
    with pytest.raises(ValueError, match="argument 'deterministic'"):
        tally.scatter_reduce(out, np.zeros(4, np.int64), np.ones(4), "prod", deterministic=True)
    ro = np.zeros(10)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        tally.scatter_add(ro, np.zeros(4, np.int64), np.ones(4))


def test_scatter_deterministic_unchecked_gives_the_checked_bits(rng):
    """check_indices=False with deterministic=True: no check is forced (on the
    GPU: no wait), the checked call's bits, and with bad data what the checked
    call leaves before raising: bad indices skipped, NaN counted as 0."""
    n, bins = 20000, 300
    index = rng.integers(0, bins, n)
    src = rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-20, 20, n)
    base = rng.uniform(-1, 1, bins)
    checked = tally.scatter_add(base.copy(), index, src, deterministic=True)
    unchecked = tally.scatter_add(base.copy(), index, src, deterministic=True, check_indices=False)
    assert unchecked.tobytes() == checked.tobytes()
    index[[5, 77]] = [bins, -4]
    src[13] = np.nan
    bad_checked = base.copy()
    with pytest.raises(ValueError, match="argument 'index'"):
        tally.scatter_add(bad_checked, index, src, deterministic=True)
    bad_unchecked = tally.scatter_add(base.copy(), index, src, deterministic=True, check_indices=False)
    assert bad_unchecked.tobytes() == bad_checked.tobytes()
    assert not np.isnan(bad_unchecked).any()


def test_scatter_deterministic_rejects_nan(rng):
    with pytest.raises(ValueError, match="tally.scatter_add: argument 'src' holds NaN"):
        tally.scatter_add(np.zeros(4), np.array([0, 1]), np.array([1.0, np.nan]), deterministic=True)
