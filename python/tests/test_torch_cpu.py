"""tally.sum / reduce on torch CPU tensors: the path that reads a tensor, its
stream and a new output through torch's DLPack exchange table (PyTorch 2.11
on), against references computed without tally and against the NumPy path
(the same CPU backend, so the same bits). Skips where torch is not installed
(CI); the GPU machine and a developer's machine with torch run it."""

import math

import numpy as np
import pytest

import tally
from tally import _core

torch = pytest.importorskip("torch")

HAS_EXCHANGE_TABLE = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


def bits(v):
    if isinstance(v, torch.Tensor):
        v = v.detach().view(torch.int16 if v.dtype in (torch.float16, torch.bfloat16) else v.dtype).numpy()
    return np.asarray(v).tobytes()


def tensor(values, dtype):
    return torch.from_numpy(np.ascontiguousarray(values)).to(dtype)


SIZES = [0, 1, 31, 1024, 4097, 100003]


@pytest.mark.skipif(not HAS_EXCHANGE_TABLE, reason="torch before 2.11 has no DLPack exchange table")
def test_fast_path_is_taken_for_plain_tensors_only(rng):
    x = tensor(rng.standard_normal(100), torch.float32)
    assert isinstance(_core.reduce_current(x, None, "sum", False, "sum"), torch.Tensor)
    assert isinstance(_core.reduce_current(torch.nn.Parameter(x), None, "sum", False, "sum"), torch.Tensor)
    assert _core.reduce_current(x.numpy(), None, "sum", False, "sum") is None
    assert _core.reduce_current(x.as_subclass(_Subclass), None, "sum", False, "sum") is None
    assert _core.reduce_current(x, None, "argmax", False, "reduce") is None  # its result is a view
    assert _core.reduce_current(x.bool(), None, "sum", False, "sum") is None  # the general path names the dtype


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sum_matches_exact_sum_and_numpy_bits(rng, n, dtype):
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    x = tensor(values, dtype)
    s = tally.sum(x)
    assert isinstance(s, torch.Tensor) and s.dtype == dtype and s.shape == () and s.device == x.device
    assert not s.requires_grad
    exact = math.fsum(x.double().tolist())
    scale = math.fsum(abs(v) for v in x.double().tolist())
    eps = torch.finfo(dtype).eps
    assert abs(float(s) - exact) <= 2 * eps * scale * max(1, math.log2(n + 1))
    assert bits(s) == bits(tally.sum(x.numpy()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_sums_round_once_from_float32(rng, dtype):
    x = tensor(rng.standard_normal(4097), torch.float32).to(dtype)
    s = tally.sum(x)
    assert s.dtype == dtype
    exact = math.fsum(x.double().tolist())
    assert abs(float(s) - exact) <= 2 * torch.finfo(dtype).eps * max(abs(exact), 1.0) + 1e-3 * 4097 * 2**-24


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_sum_and_bit_operators(rng, dtype):
    values = rng.integers(-(2**30), 2**30, 10007)
    x = tensor(values, dtype)
    s = tally.sum(x)
    assert s.dtype == torch.int64 and int(s) == sum(int(v) for v in values)
    for op, fold in (("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b)):
        expected = int(values[0])
        for v in values[1:]:
            expected = fold(expected, int(v))
        assert int(tally.reduce(x, op)) == expected


@pytest.mark.parametrize("op", ["min", "max", "prod"])
def test_min_max_prod(rng, op):
    values = rng.uniform(0.5, 1.5, 999)
    x = tensor(values, torch.float64)
    expected = {"min": min, "max": max, "prod": math.prod}[op](values.tolist())
    assert float(tally.reduce(x, op)) == pytest.approx(expected, rel=1e-12)


def test_argmax_takes_the_general_path(rng):
    x = tensor(rng.standard_normal(5000), torch.float32)
    assert int(tally.reduce(x, "argmax")) == int(np.argmax(x.numpy()))


def test_out_is_written_and_returned_guards_untouched(rng):
    x = tensor(rng.standard_normal(3000), torch.float32)
    buffer = torch.full((3,), float("nan"))
    out = buffer[1:2].view(())  # one element between two guards
    result = tally.sum(x, out=out)
    assert result is out
    assert bits(out) == bits(tally.sum(x.numpy()))
    assert math.isnan(buffer[0]) and math.isnan(buffer[2])


def test_compensated_sum_of_cancelling_values(rng):
    big = rng.standard_normal(20000) * 1e8
    values = np.concatenate([big, -big, rng.standard_normal(999)])
    rng.shuffle(values)
    x = tensor(values, torch.float64)
    exact = math.fsum(values.tolist())
    # Compensated summation in a tree: |error| <= 2u|S| + O(n u^2) sum|x| (u = eps / 2).
    eps = float(np.finfo(np.float64).eps)
    bound = 2 * eps * max(abs(exact), 1.0) + len(values) * eps**2 * math.fsum(np.abs(values).tolist())
    assert abs(float(tally.sum(x, compensated=True)) - exact) <= bound
    assert abs(float(tally.sum(x)) - exact) > bound  # the data does need compensation


def test_unaligned_views_and_parameters_and_grad_inputs(rng):
    x = tensor(rng.standard_normal(4099), torch.float32)
    expected = bits(tally.sum(x[1:].clone()))
    assert bits(tally.sum(x[1:])) == expected  # storage offset: data not 16-byte aligned
    whole = bits(tally.sum(x))
    assert bits(tally.sum(torch.nn.Parameter(x.clone()))) == whole  # requires grad: read as it is
    assert bits(tally.sum(x.clone().requires_grad_())) == whole
    assert bits(tally.sum(x.as_subclass(_Subclass))) == whole  # a subclass: through DLPack


def test_negated_view_is_read_resolved_and_refused_as_out(rng):
    x = tensor(rng.standard_normal(1000), torch.float32)
    negated = torch._neg_view(-x)
    assert negated.is_neg()
    assert bits(tally.sum(negated)) == bits(tally.sum(x))
    with pytest.raises(ValueError, match=r"tally.sum: argument 'out' is a negated view"):
        tally.sum(x, out=torch._neg_view(torch.zeros(())))


def test_nan_and_inf_propagate():
    x = torch.tensor([1.0, float("inf"), 2.0])
    assert float(tally.sum(x)) == float("inf")
    assert math.isnan(float(tally.sum(torch.tensor([1.0, float("nan"), float("inf")]))))
    assert math.isnan(float(tally.sum(torch.tensor([float("inf"), float("-inf")]))))


def test_errors_name_the_argument_and_leave_out_unchanged():
    x = torch.ones(10)
    with pytest.raises(ValueError, match=r"tally.sum: argument 'x' must be contiguous"):
        tally.sum(torch.ones(4, 4).t())
    with pytest.raises(TypeError, match=r"tally.sum: argument 'x' has an unsupported dtype \(bool\)"):
        tally.sum(torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"tally.sum: argument 'x' must be an array"):
        tally.sum(torch.ones(3).to_sparse())
    out = torch.full((), 7.0, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"tally.sum: argument 'out' must hold 1 element of dtype float32"):
        tally.sum(x, out=out)
    assert float(out) == 7.0
    with pytest.raises(ValueError, match=r"tally.reduce: argument 'op' is 'bogus'"):
        tally.reduce(x, "bogus")
    with pytest.raises(TypeError, match=r"tally.reduce: argument 'x' has dtype float32"):
        tally.reduce(x, "and")
    shared = torch.ones(10)
    with pytest.raises(ValueError, match=r"tally.sum: argument 'out' overlaps 'x'"):
        tally.sum(shared, out=shared[3:4].view(()))
    assert torch.equal(shared, torch.ones(10))


class _Subclass(torch.Tensor):
    pass


def test_index_add_of_nd_tensors_is_index_add_along_dim_0(rng):
    # 1-D and N-D tensors: rows of prod(shape[1:]) elements, viewed without a copy.
    for shape in [(), (3, 5), (2, 1, 4)]:
        out = torch.randn(7, *shape, dtype=torch.float64)
        src = torch.randn(50, *shape, dtype=torch.float64)
        index = torch.from_numpy(rng.integers(0, 7, 50))
        want = out.clone().index_add_(0, index, src)
        assert tally.index_add(out, index, src) is out
        torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


def test_histogram_of_bfloat16_samples_bins_their_exact_values(rng):
    x = torch.from_numpy(rng.uniform(-2, 2, 3000)).to(torch.bfloat16)
    counts, edges = tally.histogram(x, bins=23, range=(-1.0, 1.5))
    want, _ = np.histogram(x.double().numpy(), bins=23, range=(-1.0, 1.5))
    np.testing.assert_array_equal(counts.numpy(), want)
