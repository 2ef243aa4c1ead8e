"""tally.index_add (row scatter) on NumPy arrays (CPU backend) against NumPy's
ufunc.at (np.add.at, np.multiply.at, np.minimum.at, np.maximum.at) on 2-D
arrays."""

import math

import numpy as np
import pytest

import tally


def hot_index(rng, rows, out_rows, dtype=np.int64):
    """Half of the rows on one key, the rest uniform."""
    index = rng.integers(0, out_rows, rows)
    index[rng.random(rows) < 0.5] = rng.integers(0, out_rows)
    return index.astype(dtype)


def reference_sum(out, index, src):
    """np.add.at in float64, with each element's row count and sum of |values|."""
    exact = out.astype(np.float64)
    np.add.at(exact, index, src.astype(np.float64))
    magnitude = np.abs(out.astype(np.float64))
    np.add.at(magnitude, index, np.abs(src.astype(np.float64)))
    count = np.zeros(out.shape[0])
    np.add.at(count, index, 1)
    return exact, magnitude, count[:, None]


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 5, 128])
def test_index_add_matches_np_add_at(rng, itype, dtype, cols):
    rows, out_rows = 3000, 50
    out = rng.uniform(-1, 1, (out_rows, cols)).astype(dtype)
    index = hot_index(rng, rows, out_rows, itype)
    src = rng.uniform(-1, 1, (rows, cols)).astype(dtype)
    exact, magnitude, count = reference_sum(out, index, src)
    assert tally.index_add(out, index, src) is out
    eps = np.finfo(dtype).eps
    if dtype == np.float16:
        # float32 accumulation, one rounding to float16 per element (the CPU backend's rule).
        bound = eps / 2 * np.abs(exact) + (count + 1) * 2.0**-24 * magnitude * (1 + eps)
    else:
        bound = (count + 1) * eps / 2 * magnitude
    assert np.all(np.abs(out.astype(np.float64) - exact) <= bound * 1.01)


def test_index_add_strided_out_and_src_leave_the_gaps(rng):
    rows, out_rows, cols = 500, 20, 7
    wide_out = rng.uniform(-1, 1, (out_rows, 12))
    before = wide_out.copy()
    out = wide_out[:, 2:2 + cols]  # rows 12 elements apart
    wide_src = rng.uniform(-1, 1, (rows, 10))
    src = wide_src[:, 3:3 + cols]
    index = rng.integers(0, out_rows // 2, rows)  # rows out_rows/2.. are never named
    exact = before[:, 2:2 + cols].copy()
    np.add.at(exact, index, src)
    tally.index_add(out, index, src)
    np.testing.assert_allclose(out, exact, rtol=0, atol=1e-12)
    untouched = np.ones_like(before, dtype=bool)
    untouched[: out_rows // 2, 2:2 + cols] = False
    assert np.array_equal(wide_out[untouched], before[untouched])


@pytest.mark.parametrize("reduce,ufunc", [("amin", np.minimum), ("amax", np.maximum)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_index_add_extrema_are_exact(rng, reduce, ufunc, dtype, itype):
    rows, out_rows, cols = 2000, 30, 9
    out = rng.integers(-100, 100, (out_rows, cols)).astype(dtype)
    index = hot_index(rng, rows, out_rows, itype)
    src = (rng.integers(-400, 400, (rows, cols)) / 4).astype(dtype)
    src[17, 3] = np.nan
    expected = out.copy()
    ufunc.at(expected, index, src)
    tally.index_add(out, index, src, reduce=reduce)
    np.testing.assert_array_equal(out, expected)  # NaN where NumPy has NaN
    assert np.isnan(out[index[17], 3])


def power_of_two_factors(rng, index, out_rows, cols, most=6):
    """(out, src) in float64: ±1, ±2 and ±1/2, each (index, column) given at
    most `most` factors of 2 and, apart, `most` of 1/2, out one more of
    either: every partial product of an element, in any order of the rows,
    lies in [2^-(most+1), 2^(most+1)] and is exact in every dtype. One src
    value is -0 (its element's product is a zero whose sign the others set)."""
    n = len(index)
    order = np.argsort(index, kind="stable")  # each index's rows together, in row order
    starts = np.flatnonzero(np.r_[True, np.diff(index[order]) != 0])
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))

    def capped(flags):
        """flags (rows × cols) where fewer than `most` earlier rows of the same index are flagged too."""
        grouped = flags[order]
        seen = np.cumsum(grouped, axis=0)
        seen -= (seen - grouped)[starts][group]  # counts within each index's rows
        kept = np.empty_like(flags)
        kept[order] = grouped & (seen <= most)
        return kept

    pick = rng.integers(0, 10, (n, cols))
    magnitude = np.where(capped(pick == 0), 2.0, np.where(capped(pick == 1), 0.5, 1.0))
    src = rng.choice([-1.0, 1.0], (n, cols)) * magnitude
    src[n // 3, cols - 1] = -0.0
    out = rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], (out_rows, cols))
    return out, src


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 5, 40])
def test_index_add_products_of_powers_of_two_are_exact(rng, itype, dtype, cols):
    rows, out_rows = 3000, 50
    index = hot_index(rng, rows, out_rows, itype)
    out, src = power_of_two_factors(rng, index, out_rows, cols)
    expected = out.copy()
    np.multiply.at(expected, index, src)  # float64: exact, as is its cast to dtype
    got = out.astype(dtype)
    assert tally.index_add(got, index, src.astype(dtype), reduce="prod") is got
    assert got.tobytes() == expected.astype(dtype).tobytes()  # signed zeros included


def test_index_add_products_have_no_deterministic_mode():
    out = np.ones((2, 2))
    with pytest.raises(ValueError, match="tally.index_add: argument 'deterministic' applies to sums"):
        tally.index_add(out, np.array([0, 1]), np.full((2, 2), 2.0), reduce="prod", deterministic=True)
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("sums", ["fixed_point", "ordered"])
def test_index_add_deterministic_unchecked_gives_the_checked_bits(rng, sums):
    """check_indices=False with deterministic=True: no check is forced (on the
    GPU: no wait), the same bits as the checked call, and, where the data are
    bad, what the checked call leaves before raising: bad rows skipped,
    (fixed point) values outside the range counted as 0, silently."""
    rows, out_rows, cols = 5000, 40, 12
    index = hot_index(rng, rows, out_rows)
    src = rng.uniform(-1, 1, (rows, cols)) * 2.0 ** rng.integers(-20, 20, (rows, cols))
    base = rng.uniform(-1, 1, (out_rows, cols))
    det = dict(deterministic=True, sums=sums)
    checked = tally.index_add(base.copy(), index, src, **det)
    unchecked = tally.index_add(base.copy(), index, src, check_indices=False, **det)
    assert unchecked.tobytes() == checked.tobytes()
    index[[7, 900]] = [out_rows, -1]
    src[11, 3] = np.nan
    bad_checked = base.copy()
    with pytest.raises(ValueError, match="argument 'index'"):
        tally.index_add(bad_checked, index, src, **det)
    bad_unchecked = tally.index_add(base.copy(), index, src, check_indices=False, **det)
    assert bad_unchecked.tobytes() == bad_checked.tobytes()
    assert np.isnan(bad_unchecked[index[11], 3]) == (sums == "ordered")  # fixed point: the NaN counted as 0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_index_add_deterministic_is_order_independent_and_rounded_once(rng, dtype):
    rows, out_rows, cols = 4000, 6, 3
    index = hot_index(rng, rows, out_rows)
    # Multiples of 2^-20 below 4: every fixed-point sum is exact, so each
    # element must be the exact sum (fsum, then cast) rounded once.
    src = (rng.integers(-2**22, 2**22, (rows, cols)) * 2.0**-20).astype(dtype)
    if dtype == np.float16:
        src = (rng.integers(-2**10, 2**10, (rows, cols)) * 2.0**-10).astype(dtype)
    first = tally.index_add(np.zeros((out_rows, cols), dtype), index, src, deterministic=True)
    for _ in range(2):
        perm = rng.permutation(rows)
        again = tally.index_add(np.zeros((out_rows, cols), dtype), index[perm], src[perm], deterministic=True)
        assert again.tobytes() == first.tobytes()
    for k in range(out_rows):
        for j in range(cols):
            exact = math.fsum(src[index == k, j].astype(np.float64))  # exact: a multiple of 2^-20 below 2^33
            assert first[k, j] == dtype(exact), (k, j)


def tree_of(values):
    """The balanced tree over `values`, padded to a power of two with empty leaves."""
    def node(first, size):
        if first >= len(values):
            return None
        if size == 1:
            return values[first]
        left, right = node(first, size // 2), node(first + size // 2, size // 2)
        return left if right is None else left + right
    padded = 1
    while padded < len(values):
        padded *= 2
    return node(0, padded)


def ordered_reference(out, index, src):
    """Ordered sums from their definition: each index's rows in row order, cut
    at every multiple of 256 of their positions among the rows sorted by
    (index, row), pieces summed left to right in float32 (float64 for
    float64), combined by the balanced tree, added to out, rounded once."""
    acc = np.float64 if out.dtype == np.float64 else np.float32
    result = out.copy()
    order = np.argsort(index, kind="stable")
    keys = index[order]
    for k in np.unique(keys):
        positions = np.nonzero(keys == k)[0]
        for j in range(out.shape[1]):
            pieces = []
            for r, i in enumerate(order[positions]):
                v = acc(src[i, j])
                if r == 0 or (positions[0] + r) % 256 == 0:
                    pieces.append(v)
                else:
                    pieces[-1] = acc(pieces[-1] + v)
            result[k, j] = out.dtype.type(acc(acc(out[k, j]) + tree_of(pieces)))
    return result


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_index_add_ordered_sums_follow_their_definition(rng, dtype):
    rows, out_rows, cols = 3000, 40, 3
    index = hot_index(rng, rows, out_rows)
    # Values over many exponents: any other order of the additions shows in the bits.
    src = (rng.uniform(-1, 1, (rows, cols)) * 2.0 ** rng.integers(-10, 3 if dtype == np.float16 else 16,
                                                                   (rows, cols))).astype(dtype)
    out = rng.uniform(-1, 1, (out_rows, cols)).astype(dtype)
    want = ordered_reference(out, index, src)
    got = tally.index_add(out.copy(), index, src, deterministic=True, sums="ordered")
    assert got.tobytes() == want.tobytes()
    fixed = tally.index_add(out.copy(), index, src, deterministic=True, sums="fixed_point")
    assert fixed.tobytes() == tally.index_add(out.copy(), index, src, deterministic=True).tobytes()  # small: fixed point
    assert fixed.tobytes() != got.tobytes()


def test_index_add_sums_argument_is_checked():
    out, index, src = np.zeros((2, 2)), np.array([0, 1]), np.ones((2, 2))
    with pytest.raises(ValueError, match="argument 'sums'.*'automatic', 'fixed_point', 'ordered'"):
        tally.index_add(out, index, src, deterministic=True, sums="exact")
    with pytest.raises(ValueError, match="argument 'sums' applies only with deterministic=True"):
        tally.index_add(out, index, src, sums="ordered")
    with pytest.raises(ValueError, match="fixed_point_bits.*ordered"):
        tally.index_add(out, index, src, deterministic=True, sums="ordered", fixed_point_bits=20)
    assert out.tolist() == [[0, 0], [0, 0]]


def test_index_add_nan_and_inf_propagate():
    out = np.zeros((3, 2))
    src = np.array([[1.0, np.nan], [np.inf, 2.0], [-np.inf, 1.0], [5.0, 5.0]])
    tally.index_add(out, np.array([0, 1, 1, 2]), src)
    assert np.isnan(out[0, 1]) and out[0, 0] == 1.0
    assert np.isnan(out[1, 0]) and out[1, 1] == 3.0
    assert out[2].tolist() == [5.0, 5.0]


def test_index_add_out_of_range_index_is_reported_after_the_rest():
    out = np.zeros((4, 2))
    src = np.ones((5, 2))
    with pytest.raises(ValueError, match=r"argument 'index'.*\[2\] = 4 is outside \[0, out_rows = 4\)"):
        tally.index_add(out, np.array([1, 2, 4, 3, -1]), src)
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [1, 1], [1, 1]])  # the rows in range were applied
    with pytest.raises(ValueError, match=r"argument 'index'.*-1"):
        tally.index_add(np.zeros((4, 2)), np.array([-1]), np.ones((1, 2)), deterministic=True)
    out = np.zeros((4, 2))
    tally.index_add(out, np.array([1, 2, 4, 3, -1]), src, check_indices=False)
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [1, 1], [1, 1]])


def test_index_add_deterministic_rejects_nan_naming_src():
    out = np.zeros((2, 2))
    with pytest.raises(ValueError, match="argument 'src'"):
        tally.index_add(out, np.array([0, 1]), np.array([[1.0, np.nan], [2.0, 3.0]]), deterministic=True)
    assert out.tolist() == [[1.0, 0.0], [2.0, 3.0]]  # the NaN counted as 0, the rest applied


def test_index_add_errors_name_the_argument():
    out = np.zeros((10, 3))
    index = np.zeros(4, np.int64)
    src = np.ones((4, 3))
    with pytest.raises(ValueError, match="argument 'src' has 3 rows; it must have one per index"):
        tally.index_add(out, index, np.ones((3, 3)))
    with pytest.raises(ValueError, match="argument 'src' has 2 columns; it must match 'out'"):
        tally.index_add(out, index, np.ones((4, 2)))
    with pytest.raises(TypeError, match="argument 'src' has dtype float32"):
        tally.index_add(out, index, src.astype(np.float32))
    with pytest.raises(TypeError, match="argument 'index' has dtype float64"):
        tally.index_add(out, np.zeros(4), src)
    with pytest.raises(TypeError, match="argument 'out' has dtype int64"):
        tally.index_add(np.zeros((10, 3), np.int64), index, src.astype(np.int64))
    with pytest.raises(ValueError, match=r"argument 'src' has rows of shape \(3,\); they must match out's rows, \(\)"):
        tally.index_add(np.zeros(10), index, src)
    with pytest.raises(ValueError, match=r"argument 'src' has rows of shape \(\); they must match out's rows, \(3,\)"):
        tally.index_add(out, index, np.ones(4))
    with pytest.raises(ValueError, match=r"argument 'src' has rows of shape \(3, 2\); they must match out's rows, "
                                         r"\(2, 3\)"):
        tally.index_add(np.zeros((10, 2, 3)), index, np.ones((4, 3, 2)))
    with pytest.raises(ValueError, match="argument 'out' has shape .* rows whose elements are not contiguous"):
        tally.index_add(np.zeros((10, 3, 2)).transpose(0, 2, 1), index, np.ones((4, 2, 3)))
    with pytest.raises(ValueError, match="argument 'out' must be two-dimensional"):
        tally.index_add(np.zeros(()), index, src)
    with pytest.raises(ValueError, match="argument 'index' must be one-dimensional"):
        tally.index_add(out, np.zeros((4, 1), np.int64), src)
    with pytest.raises(ValueError, match="argument 'out' must have contiguous columns"):
        tally.index_add(np.zeros((10, 6))[:, ::2], index, src)
    with pytest.raises(ValueError, match="argument 'src' must have contiguous columns"):
        tally.index_add(out, index, np.ones((4, 6))[:, ::2])
    with pytest.raises(ValueError, match="argument 'out' overlaps 'src'"):
        buf = np.zeros((20, 3))
        tally.index_add(buf[:10], index, buf[8:12])
    with pytest.raises(ValueError, match="argument 'reduce' is 'mean'"):
        tally.index_add(out, index, src, reduce="mean")
    ro = np.zeros((10, 3))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        tally.index_add(ro, index, src)
    with pytest.raises(TypeError, match="argument 'out' must be"):
        tally.index_add([[0.0] * 3] * 10, index, src)


@pytest.mark.parametrize("shape", [(), (1,), (2, 3), (2, 1, 4)])
def test_index_add_rows_of_any_shape_as_pytorch_along_dim_0(rng, shape):
    # out (rows, *shape) and src (n, *shape): rows of prod(shape) elements, a
    # view of each array without a copy (so out is updated in place).
    out = rng.uniform(-1, 1, (6, *shape))
    src = rng.uniform(-1, 1, (40, *shape))
    index = hot_index(rng, 40, 6)
    exact = out.copy()
    np.add.at(exact, index, src)
    assert tally.index_add(out, index, src) is out
    np.testing.assert_allclose(out, exact, rtol=0, atol=1e-13)
    amax = rng.uniform(-1, 1, (6, *shape))
    want = amax.copy()
    np.maximum.at(want, index, src)
    tally.index_add(amax, index, src, reduce="amax")
    assert np.array_equal(amax, want)


def test_index_add_empty_is_a_no_op():
    out = np.arange(6.0).reshape(3, 2)
    tally.index_add(out, np.zeros(0, np.int64), np.zeros((0, 2)))
    tally.index_add(np.zeros((3, 0)), np.zeros(4, np.int64), np.zeros((4, 0)))
    assert out.tolist() == [[0, 1], [2, 3], [4, 5]]
