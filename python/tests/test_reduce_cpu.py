"""tally.sum / reduce / dot on NumPy arrays (CPU backend) against references
computed independently (math.fsum, NumPy in higher precision)."""

import math

import numpy as np
import pytest

import tally

SIZES = [0, 1, 2, 31, 1000, 4097, 100003]


def bits(v):
    return np.asarray(v).tobytes()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_float_matches_exact_sum(rng, n, dtype):
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    s = tally.sum(x)
    assert isinstance(s, dtype)
    exact = math.fsum(x.astype(np.float64))
    scale = math.fsum(np.abs(x.astype(np.float64))) + 1e-300
    eps = np.finfo(dtype).eps
    assert abs(float(s) - exact) <= 2 * eps * scale * max(1, math.log2(n + 1)) + (0 if n else 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compensated_sum_is_nearly_exact(rng, dtype):
    n = 50000
    # Order-sensitive: large values that cancel plus small ones.
    big = rng.standard_normal(n // 2) * 1e6
    x = np.concatenate([big, -big, rng.standard_normal(n - 2 * (n // 2)) + 0.0]).astype(dtype)
    x = np.concatenate([x, rng.standard_normal(1000).astype(dtype)])
    rng.shuffle(x)
    exact = math.fsum(x.astype(np.float64))
    s = tally.sum(x, compensated=True)
    # Compensated summation in a tree: |error| <= 2u|S| + O(n u^2) sum|x| (u = eps / 2);
    # the second term, not |S|, dominates when large values cancel.
    eps = float(np.finfo(dtype).eps)
    bound = 2 * eps * max(abs(exact), 1.0) + len(x) * eps**2 * math.fsum(np.abs(x.astype(np.float64)))
    assert abs(float(s) - exact) <= bound


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_sum_integers_exact_in_int64(rng, dtype):
    x = rng.integers(-(2**30), 2**30, 100001).astype(dtype)
    s = tally.sum(x)
    assert isinstance(s, np.int64)
    assert int(s) == sum(int(v) for v in x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_is_bitwise_reproducible(rng, dtype):
    x = rng.standard_normal(300007).astype(dtype) * 1e3
    first = bits(tally.sum(x))
    for _ in range(5):
        assert bits(tally.sum(x)) == first


def test_sum_float16_accumulates_in_float32(rng):
    x = rng.uniform(0, 1, 20000).astype(np.float16)
    s = tally.sum(x)
    assert s.dtype == np.float16
    exact = math.fsum(x.astype(np.float64))
    assert abs(float(s) - exact) <= 1e-3 * exact  # float16 result rounding, not float16 accumulation


def test_sum_nan_and_inf():
    assert np.isnan(tally.sum(np.array([1.0, np.nan, 2.0])))
    assert tally.sum(np.array([1.0, np.inf, 2.0])) == np.inf
    assert np.isnan(tally.sum(np.array([np.inf, -np.inf])))


def test_sum_of_empty_is_zero():
    assert tally.sum(np.zeros(0)) == 0.0


def test_sum_takes_any_contiguous_shape(rng):
    x = rng.standard_normal((37, 29))
    assert abs(tally.sum(x) - math.fsum(x.ravel())) <= 1e-12 * np.abs(x).sum()


def test_sum_of_unaligned_view(rng):
    x = rng.standard_normal(10001)
    v = x[1:]  # offset by one element: not vector-aligned
    assert abs(tally.sum(v) - math.fsum(v)) <= 1e-12 * np.abs(v).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_min_max_argmin_argmax(rng, dtype):
    x = (rng.standard_normal(12345) * 1000).astype(dtype)
    x[[17, 9000]] = x.min() - 1  # a tie: the first index wins
    x[[5, 12000]] = x.max() + 1
    assert tally.reduce(x, "min") == x.min()
    assert tally.reduce(x, "max") == x.max()
    assert tally.reduce(x, "argmin") == 17 == np.argmin(x)
    assert tally.reduce(x, "argmax") == 5 == np.argmax(x)
    assert tally.reduce(x, "min").dtype == dtype


def test_min_max_propagate_nan(rng):
    x = rng.standard_normal(1000)
    x[300] = np.nan
    x[700] = np.nan
    assert np.isnan(tally.reduce(x, "min")) and np.isnan(tally.reduce(x, "max"))
    assert tally.reduce(x, "argmin") == 300 == np.argmin(x)
    assert tally.reduce(x, "argmax") == 300 == np.argmax(x)


def test_min_of_empty_is_the_identity():
    assert tally.reduce(np.zeros(0), "min") == np.inf
    assert tally.reduce(np.zeros(0, np.int32), "max") == np.iinfo(np.int32).min
    with pytest.raises(ValueError, match="'x'"):
        tally.reduce(np.zeros(0), "argmin")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_prod_and_bitwise(rng, dtype):
    x = rng.integers(1, 4, 40).astype(dtype)
    p = tally.reduce(x, "prod")
    assert p.dtype == np.int64
    wrapped = math.prod(int(v) for v in x) % 2**64  # int64 products wrap modulo 2^64
    assert int(p) == (wrapped - 2**64 if wrapped >= 2**63 else wrapped)
    y = rng.integers(0, 2**30, 999).astype(dtype)
    assert tally.reduce(y, "and") == np.bitwise_and.reduce(y)
    assert tally.reduce(y, "or") == np.bitwise_or.reduce(y)
    assert tally.reduce(y, "xor") == np.bitwise_xor.reduce(y)


def test_prod_float(rng):
    x = rng.uniform(0.9, 1.1, 5000)
    expected = math.exp(math.fsum(np.log(x)))
    assert abs(tally.reduce(x, "prod") - expected) <= 1e-12 * expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dot_matches_longdouble(rng, dtype):
    x = rng.standard_normal(77777).astype(dtype)
    y = rng.standard_normal(77777).astype(dtype)
    exact = float(np.dot(x.astype(np.longdouble), y.astype(np.longdouble)))
    scale = float(np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64)))
    d = tally.dot(x, y)
    assert d.dtype == dtype
    # Each product rounds once and the fixed tree adds ceil(log2 n) levels of
    # roundings: |error| <= (ceil(log2 n) + 1)·u·Σ|x·y| (u = eps/2).
    u = np.finfo(dtype).eps / 2
    assert abs(float(d) - exact) <= (math.ceil(math.log2(x.size)) + 1) * u * scale
    # Compensated: the sum of the rounded products is nearly exact; each product is rounded once.
    rounded_products = math.fsum((x * y).astype(np.float64))
    assert abs(float(tally.dot(x, y, compensated=True)) - rounded_products) <= 2 * np.finfo(dtype).eps * (
        abs(rounded_products) + 1e-3 * scale)


def test_out_parameter(rng):
    x = rng.standard_normal(1000)
    out = np.full((), np.nan)
    r = tally.sum(x, out=out)
    assert r is out and abs(out - math.fsum(x)) < 1e-12 * np.abs(x).sum()


# ---- errors: TypeError/ValueError naming the argument ------------------------


def test_error_unsupported_dtype_names_argument():
    with pytest.raises(TypeError, match=r"tally\.sum: argument 'x'.*bool"):
        tally.sum(np.zeros(4, dtype=bool))
    with pytest.raises(TypeError, match=r"argument 'x'.*uint"):
        tally.sum(np.zeros(4, dtype=np.uint8))
    with pytest.raises(TypeError, match=r"argument 'x'.*float16"):
        tally.reduce(np.zeros(4, dtype=np.float16), "max")
    with pytest.raises(TypeError, match=r"argument 'x'.*int32, int64"):
        tally.reduce(np.zeros(4), "xor")
    with pytest.raises(TypeError, match=r"argument 'compensated'"):
        tally.sum(np.zeros(4, np.int32), compensated=True)


def test_error_not_an_array_names_argument():
    with pytest.raises(TypeError, match=r"tally\.sum: argument 'x' must be an array.*list"):
        tally.sum([1.0, 2.0])


def test_error_non_contiguous_names_argument():
    x = np.arange(10.0)[::2]
    with pytest.raises(ValueError, match=r"tally\.sum: argument 'x' must be contiguous"):
        tally.sum(x)
    with pytest.raises(ValueError, match=r"argument 'x' must be contiguous"):
        tally.sum(np.ones((4, 4)).T)


def test_error_bad_operator_names_argument():
    with pytest.raises(ValueError, match=r"argument 'op'"):
        tally.reduce(np.ones(3), "mean")


def test_error_dot_mismatch_names_argument():
    with pytest.raises(ValueError, match=r"tally\.dot: argument 'y' has 3 elements"):
        tally.dot(np.ones(4), np.ones(3))
    with pytest.raises(TypeError, match=r"tally\.dot: argument 'y' has dtype float32"):
        tally.dot(np.ones(4), np.ones(4, np.float32))


def test_error_bad_out_names_argument():
    with pytest.raises(ValueError, match=r"argument 'out' must hold 1 element of dtype float64"):
        tally.sum(np.ones(4), out=np.zeros((), np.float32))
    ro = np.zeros(())
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 'out' is read-only"):
        tally.sum(np.ones(4), out=ro)
    x = np.ones(4)
    with pytest.raises(ValueError, match=r"argument 'out' overlaps"):
        tally.sum(x, out=x[1:2].reshape(()))


def test_gpu_status_without_gpu_is_explained():
    available, reason = tally.gpu_status()
    assert isinstance(available, bool) and isinstance(reason, str) and reason
    assert tally.gpu_available() == available
