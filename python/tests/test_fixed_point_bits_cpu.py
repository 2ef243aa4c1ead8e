"""fixed_point_bits: the deterministic mode's given scale (tally's
histogram_options.fixed_point_bits), on the CPU backend with NumPy arrays, for
every function that has the deterministic mode. References are exact sums
computed here (math.fsum of dyadic values, or of values rounded to the scale)."""

import math

import numpy as np
import pytest

import tally


def dyadic(rng, shape, bits=10, top=4):
    """Values k·2^-bits with |value| < top: exact in fixed point at `bits`."""
    return rng.integers(-top * 2**bits + 1, top * 2**bits, shape) * 2.0**-bits


# Each case: (name, call(values, deterministic, bits) -> result, keys, rows) where
# result[k] (or result[k, j]) sums the values whose key is k.
def _cases(rng, n=3000, bins=7):
    keys = rng.integers(0, bins, n)
    samples = (keys + rng.uniform(0.1, 0.9, n)) / bins  # sample in bin `keys` of 7 equal bins over [0, 1)
    edges = np.linspace(0.0, 1.0, bins + 1)
    return keys, {
        "scatter_add": lambda v, det, bits: tally.scatter_add(np.zeros(bins), keys, v, deterministic=det,
                                                              fixed_point_bits=bits),
        "scatter_reduce": lambda v, det, bits: tally.scatter_reduce(np.zeros(bins), keys, v, "sum", deterministic=det,
                                                                    fixed_point_bits=bits),
        "bincount": lambda v, det, bits: tally.bincount(keys, weights=v, minlength=bins, deterministic=det,
                                                        fixed_point_bits=bits),
        "histogram even": lambda v, det, bits: tally.histogram(samples, bins=bins, range=(0.0, 1.0), weights=v,
                                                               deterministic=det, fixed_point_bits=bits)[0],
        "histogram edges": lambda v, det, bits: tally.histogram(samples, bins=edges, weights=v, deterministic=det,
                                                                fixed_point_bits=bits)[0],
        "index_add": lambda v, det, bits: tally.index_add(np.zeros((bins, 1)), keys, v[:, None], deterministic=det,
                                                          fixed_point_bits=bits)[:, 0],
    }


FUNCTIONS = ["scatter_add", "scatter_reduce", "bincount", "histogram even", "histogram edges", "index_add"]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_given_scale_that_holds_the_values_gives_the_exact_sums(rng, function):
    keys, calls = _cases(rng)
    values = dyadic(rng, keys.size)
    got = calls[function](values, True, 10)
    want = [math.fsum(values[keys == k]) for k in range(got.size)]
    assert got.tolist() == want
    # The derived scale keeps these values exactly too: the same bits.
    assert got.tobytes() == calls[function](values, True, None).tobytes()


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_coarse_given_scale_rounds_each_value_to_it(rng, function):
    """At s = 0 each value is rounded to an integer before the sum (no ties
    here): ±0.75 counts ±1, ±0.25 counts 0. A scale left unapplied (or
    derived) would give the sums of the values themselves."""
    keys, calls = _cases(rng)
    values = rng.choice([-0.75, -0.25, 0.25, 0.75], keys.size)
    got = calls[function](values, True, 0)
    rounded = np.where(np.abs(values) > 0.5, np.sign(values), 0.0)
    assert got.tolist() == [math.fsum(rounded[keys == k]) for k in range(got.size)]
    assert got.tolist() != [math.fsum(values[keys == k]) for k in range(got.size)]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_value_too_large_for_the_given_scale_is_an_error_naming_it(rng, function):
    keys, calls = _cases(rng)
    values = dyadic(rng, keys.size)
    values[keys.size // 2] = 2.0**60  # |v|·2^10 far past 2^(62 - ceil(log2 n))
    argument = "weights" if function.startswith(("bincount", "histogram")) else "src"
    with pytest.raises(ValueError, match=f"argument '{argument}'"):
        calls[function](values, True, 10)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_fixed_point_bits_is_checked(rng, function):
    keys, calls = _cases(rng, n=10)
    values = dyadic(rng, keys.size)
    with pytest.raises(ValueError, match="argument 'fixed_point_bits' applies only with deterministic=True"):
        calls[function](values, False, 10)
    for bad in (1024, -1023):
        with pytest.raises(ValueError, match=r"argument 'fixed_point_bits' must lie in \[-1022, 1023\]"):
            calls[function](values, True, bad)
    for bad in (True, 10.0, "10"):
        with pytest.raises(TypeError, match="argument 'fixed_point_bits' must be an int or None"):
            calls[function](values, True, bad)


def test_fixed_point_bits_is_ignored_where_no_fixed_point_sum_is_made():
    out = np.zeros((2, 2))
    tally.index_add(out, np.array([0, 1, 0]), np.array([[1.0, 5.0], [2.0, 3.0], [4.0, -1.0]]), reduce="amax",
                    deterministic=True, fixed_point_bits=0)
    assert out.tolist() == [[4.0, 5.0], [2.0, 3.0]]
    counts = np.zeros(3, np.int64)
    tally.scatter_add(counts, np.array([0, 2, 2]), np.array([5, 6, 7]), deterministic=True, fixed_point_bits=0)
    assert counts.tolist() == [5, 0, 13]
