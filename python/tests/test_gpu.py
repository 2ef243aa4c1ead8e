"""tally on the GPU through PyTorch and CuPy: results against torch/NumPy
references, bitwise agreement with the CPU backend and across runs, and the
stream contract. Skips where no GPU, torch or cupy is present."""

import math

import numpy as np
import pytest

import tally

from gpu_peers import GPU_MODULE, cupy, needs_cupy, needs_torch, torch
from test_cg_cpu import random_spd

pytestmark = GPU_MODULE


def bits(v):
    if torch is not None and isinstance(v, torch.Tensor):
        v = v.cpu()
        return v.view(torch.uint8 if v.dtype.itemsize == 1 else getattr(torch, f"int{8 * v.dtype.itemsize}")).numpy().tobytes()
    if cupy is not None and isinstance(v, cupy.ndarray):
        v = v.get()
    return np.asarray(v).tobytes()


# ---- PyTorch ------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 1000, 2**20 + 3])
def test_torch_sum_matches_reference_and_cpu_bits(dtype, n):
    x = torch.randn(n, device="cuda", dtype=getattr(torch, dtype))
    s = tally.sum(x)
    assert isinstance(s, torch.Tensor) and s.is_cuda and s.dtype == x.dtype and s.shape == ()
    exact = math.fsum(x.double().cpu().numpy())
    tol = {"float32": 1e-6, "float64": 1e-14, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    assert abs(float(s) - exact) <= tol * (float(x.double().abs().sum()) + 1)
    assert bits(tally.sum(x)) == bits(s)  # run to run
    assert bits(tally.sum(x.cpu())) == bits(s)  # GPU backend == CPU backend (torch CPU tensor)


@needs_torch
def test_torch_reduce_ops_and_dot():
    x = torch.randn(100003, device="cuda", dtype=torch.float64)
    assert float(tally.reduce(x, "min")) == float(x.min())
    assert int(tally.reduce(x, "argmax")) == int(x.argmax())
    y = torch.randn_like(x)
    d = tally.dot(x, y)
    assert abs(float(d) - float(torch.dot(x, y))) <= 1e-12 * float((x.abs() * y.abs()).sum())
    assert bits(d) == bits(tally.dot(x.cpu().numpy(), y.cpu().numpy()))
    i = torch.randint(-1000, 1000, (99999,), device="cuda", dtype=torch.int32)
    s = tally.sum(i)
    assert s.dtype == torch.int64 and int(s) == int(i.long().sum())


@needs_torch
def test_torch_histogram_matches_numpy_and_cpu():
    x = torch.randn(10**6 + 7, device="cuda", dtype=torch.float64)
    counts, edges = tally.histogram(x, bins=1000)
    ref_counts, ref_edges = np.histogram(x.cpu().numpy(), bins=1000)
    assert counts.is_cuda and counts.dtype == torch.int64
    np.testing.assert_array_equal(counts.cpu().numpy(), ref_counts)
    np.testing.assert_array_equal(edges.cpu().numpy(), ref_edges)
    e = torch.tensor([-2.0, -1.0, 0.0, 0.0, 0.5, 3.0])
    np.testing.assert_array_equal(tally.histogram(x, bins=e)[0].cpu().numpy(), np.histogram(x.cpu().numpy(), bins=e.numpy())[0])
    w = torch.randn_like(x)
    hw = tally.histogram(x, bins=100, range=(-3, 3), weights=w, deterministic=True)[0]
    assert bits(hw) == bits(tally.histogram(x, bins=100, range=(-3, 3), weights=w, deterministic=True)[0])
    assert bits(hw) == bits(tally.histogram(x.cpu().numpy(), bins=100, range=(-3, 3), weights=w.cpu().numpy(),
                                            deterministic=True)[0])
    np.testing.assert_allclose(hw.cpu().numpy(), np.histogram(x.cpu().numpy(), 100, (-3, 3), weights=w.cpu().numpy())[0],
                               atol=1e-9)
    # Mixed sample and weight dtypes: deterministic sums, the CPU's bits; integer
    # samples binned as float64 (2^24 + 1 keeps its bin under float32 weights).
    w32 = w.float()
    for xs in (x, x.float(), (x * 1000).long() + 2**24):
        mixed = tally.histogram(xs, bins=64, weights=w32, deterministic=True)[0]
        assert mixed.dtype == torch.float32
        assert bits(mixed) == bits(tally.histogram(xs.cpu().numpy(), bins=64, weights=w32.cpu().numpy(),
                                                   deterministic=True)[0])
    big = torch.tensor([2**24 + 1], device="cuda")
    one = tally.histogram(big, bins=1, range=(2**24 + 0.5, 2**24 + 1.5), weights=torch.ones(1, device="cuda"))[0]
    assert float(one[0]) == 1.0


@needs_torch
@pytest.mark.parametrize("bins", [1, 10, 10**6])
def test_torch_bincount_and_scatter_add(bins):
    n = 10**6
    index = torch.randint(0, bins, (n,), device="cuda")
    w = torch.randn(n, device="cuda", dtype=torch.float64)
    np.testing.assert_array_equal(tally.bincount(index, minlength=bins).cpu().numpy(),
                                  torch.bincount(index, minlength=bins).cpu().numpy())
    bw = tally.bincount(index, weights=w, minlength=bins)
    torch.testing.assert_close(bw, torch.bincount(index, weights=w, minlength=bins), rtol=1e-9, atol=1e-9)
    out = torch.zeros(bins, device="cuda", dtype=torch.float64)
    ref = torch.zeros_like(out).scatter_add_(0, index, w)
    torch.testing.assert_close(tally.scatter_add(out, index, w), ref, rtol=1e-9, atol=1e-9)
    det = tally.scatter_add(torch.zeros_like(out), index, w, deterministic=True)
    perm = torch.randperm(n, device="cuda")
    assert bits(det) == bits(tally.scatter_add(torch.zeros_like(out), index[perm], w[perm], deterministic=True))
    host = np.zeros(bins)
    assert bits(det) == bits(tally.scatter_add(host, index.cpu().numpy(), w.cpu().numpy(), deterministic=True))
    with pytest.raises(ValueError, match="argument 'index'"):
        tally.scatter_add(out, torch.tensor([0, bins], device="cuda"), torch.ones(2, device="cuda", dtype=torch.float64))


@needs_torch
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("n", [1, 33, 1025, 2**20 + 7])
def test_torch_bincount_length_and_minimum_from_one_pass(dtype, n):
    # bincount's min and max in one pass on the device (_core.extrema): the
    # extremes at random positions; the full range of the dtype against torch.
    g = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randint(0, 50, (n,), device="cuda", generator=g, dtype=getattr(torch, dtype))
    x[int(torch.randint(n, (1,), generator=g, device="cuda"))] = 77
    assert tally.bincount(x).shape == (78,)
    x[int(torch.randint(n, (1,), generator=g, device="cuda"))] = -4
    with pytest.raises(ValueError, match="its minimum is -4"):
        tally.bincount(x)
    info = torch.iinfo(getattr(torch, dtype))
    y = torch.randint(info.min, info.max, (n,), device="cuda", generator=g, dtype=getattr(torch, dtype))
    out = torch.full((2,), 7, device="cuda", dtype=y.dtype)
    tally._core.extrema(y, out, torch.cuda.current_stream().cuda_stream, "bincount")
    assert out.tolist() == [int(y.min()), int(y.max())]


@needs_torch
@pytest.mark.parametrize("fixed_point_bits", [None, 30, 2])
def test_torch_given_fixed_point_scale_gives_the_cpu_bits(fixed_point_bits):
    """The deterministic mode with a given scale (and the derived one, None)
    on the GPU: the CPU backend's bits, for scatter_add, bincount, histogram
    and index_add; at s = 2 the values are rounded to quarters first."""
    rng = np.random.default_rng()
    n, bins = 200_000, 1000
    keys = rng.integers(0, bins, n)
    values = rng.uniform(-4, 4, n)
    samples = (keys + 0.5) / bins
    tk, tv, ts = (torch.from_numpy(a).cuda() for a in (keys, values, samples))
    fp = dict(deterministic=True, fixed_point_bits=fixed_point_bits)
    pairs = [
        (tally.scatter_add(torch.zeros(bins, device="cuda", dtype=torch.float64), tk, tv, **fp),
         tally.scatter_add(np.zeros(bins), keys, values, **fp)),
        (tally.bincount(tk, weights=tv, minlength=bins, **fp), tally.bincount(keys, weights=values, minlength=bins, **fp)),
        (tally.histogram(ts, bins=bins, range=(0.0, 1.0), weights=tv, **fp)[0],
         tally.histogram(samples, bins=bins, range=(0.0, 1.0), weights=values, **fp)[0]),
        (tally.index_add(torch.zeros((bins, 3), device="cuda", dtype=torch.float64), tk, tv[:, None].repeat(1, 3), **fp),
         tally.index_add(np.zeros((bins, 3)), keys, np.repeat(values[:, None], 3, axis=1), **fp)),
    ]
    for gpu, cpu in pairs:
        assert bits(gpu) == bits(cpu)


@needs_torch
def test_torch_errors_name_the_argument():
    x = torch.ones(10, device="cuda")
    with pytest.raises(ValueError, match=r"argument 'y' is on cpu but 'x' is on cuda:0"):
        tally.dot(x, torch.ones(10))
    with pytest.raises(ValueError, match=r"argument 'x' must be contiguous"):
        tally.sum(torch.ones(10, 10, device="cuda").t())
    with pytest.raises(TypeError, match=r"argument 'x'.*complex"):
        tally.sum(torch.ones(10, device="cuda", dtype=torch.complex64))
    with pytest.raises(ValueError, match=r"argument 'src'"):
        tally.scatter_add(torch.zeros(4, device="cuda"), torch.zeros(3, device="cuda", dtype=torch.int64),
                          torch.ones(2, device="cuda"))


@needs_torch
def test_torch_tensors_read_directly_or_through_dlpack_give_one_result():
    """Plain tensors are read through torch's DLPack exchange table (or their
    attributes before PyTorch 2.11), subclasses through DLPack, negated views
    as resolved copies: the same bits every way."""
    x = torch.randn(4099, device="cuda")
    expected = bits(tally.sum(x))
    if hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):  # PyTorch 2.11 on: the exchange table's path
        direct = tally._core.reduce_current(x, None, "sum", False, "sum")
        assert isinstance(direct, torch.Tensor) and direct.device == x.device and bits(direct) == expected
    assert bits(tally.sum(x.as_subclass(_TensorSubclass))) == expected
    assert bits(tally.sum(torch.nn.Parameter(x.clone(), requires_grad=False))) == expected
    assert bits(tally.sum(x.clone().requires_grad_())) == expected
    negated = torch._neg_view(-x)
    assert negated.is_neg()
    assert bits(tally.sum(negated)) == expected
    assert bits(tally.sum(x[1:])) == bits(tally.sum(x[1:].clone()))  # a storage offset
    out = torch.zeros((), device="cuda")
    with pytest.raises(ValueError, match=r"argument 'out' is a negated view"):
        tally.sum(x, out=torch._neg_view(out))


class _TensorSubclass(torch.Tensor if torch is not None else object):
    pass


def _busy(stream):
    """Keeps `stream` busy for a while (so work queued on it runs late)."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)


def _returns_while_busy(stream, call):
    """call() on `stream` behind _busy(stream): its result, and whether it
    returned while the stream was still busy (it did not wait for it)."""
    _busy(stream)
    with torch.cuda.stream(stream):
        result = call()
        busy = not stream.query()
    stream.synchronize()
    return result, busy


@needs_torch
def test_torch_result_on_side_stream_is_ready_when_that_stream_is():
    n = 2**22
    side = torch.cuda.Stream()
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    _busy(side)
    with torch.cuda.stream(side):
        x.fill_(1.0)  # runs late on the side stream
        s = tally.sum(x)  # must follow the fill on the same stream
        c = tally.histogram(x, bins=4, range=(0, 2), return_edges=False)
    side.synchronize()
    assert float(s) == n
    assert c.cpu().tolist() == [0, 0, n, 0]


@needs_torch
def test_torch_explicit_stream_orders_after_the_producer():
    n = 2**22
    side = torch.cuda.Stream()
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    _busy(torch.cuda.current_stream())
    x.fill_(1.0)  # pending on the current stream
    s = tally.sum(x, stream=side)  # DLPack export with stream=side: side waits for the fill
    side.synchronize()
    assert float(s) == n
    torch.cuda.synchronize()


@needs_torch
def test_torch_explicit_stream_orders_the_outputs_pending_work():
    """sum/dot with out= and stream=side: the fill of out pending on torch's
    current stream (behind a sleep) finishes before tally writes out on side."""
    n = 2**20
    side = torch.cuda.Stream()
    x = torch.ones(n, device="cuda")
    s = torch.zeros((), device="cuda")
    d = torch.zeros((), device="cuda")
    torch.cuda.synchronize()
    _busy(torch.cuda.current_stream())
    s.fill_(-1.0)  # pending on the current stream: tally writing first would see its result overwritten
    d.fill_(-1.0)
    assert tally.sum(x, out=s, stream=side) is s
    assert tally.dot(x, x, out=d, stream=side) is d
    torch.cuda.synchronize()
    assert float(s) == n and float(d) == n


@needs_torch
def test_torch_deterministic_unchecked_scatter_add_does_not_wait():
    """check_indices=False with deterministic=True returns while its stream is
    still busy (no error flag read back: graph capture is possible) and gives
    the checked call's bits."""
    n, bins = 10**6, 1000
    index = torch.randint(0, bins, (n,), device="cuda")
    w = torch.randn(n, device="cuda", dtype=torch.float64)
    checked = tally.scatter_add(torch.zeros(bins, device="cuda", dtype=torch.float64), index, w, deterministic=True)
    side = torch.cuda.Stream()
    out = torch.zeros(bins, device="cuda", dtype=torch.float64)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        tally.scatter_add(out, index, w, deterministic=True, check_indices=False)  # sizes the stream's workspace
        out.zero_()
    _, returned_while_busy = _returns_while_busy(
        side, lambda: tally.scatter_add(out, index, w, deterministic=True, check_indices=False))
    assert returned_while_busy
    assert bits(out) == bits(checked)


@needs_torch
def test_torch_deterministic_unchecked_weighted_histogram_does_not_wait():
    """check_weights=False with deterministic=True: a weighted histogram over
    a given range returns while its stream is still busy (no error flag read
    back) and gives the checked call's bits; so does bincount's (which reads
    its length back first); a NaN weight then counts as 0, as on the CPU
    backend."""
    n, bins = 10**6, 1000
    x = torch.rand(n, device="cuda", dtype=torch.float64)
    w = torch.randn(n, device="cuda", dtype=torch.float64)

    def weighted(weights, **kw):
        return tally.histogram(x, bins=bins, range=(0, 1), weights=weights, deterministic=True, return_edges=False,
                               **kw)

    checked = weighted(w)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        weighted(w, check_weights=False)  # sizes the stream's workspace
    counts, returned_while_busy = _returns_while_busy(side, lambda: weighted(w, check_weights=False))
    assert returned_while_busy
    assert bits(counts) == bits(checked)

    index = torch.randint(0, bins, (n,), device="cuda")
    assert bits(tally.bincount(index, weights=w, deterministic=True, check_weights=False)) == bits(
        tally.bincount(index, weights=w, deterministic=True))
    w[5] = float("nan")
    with pytest.raises(ValueError, match="tally.bincount: argument 'weights' holds NaN"):
        tally.bincount(index, weights=w, deterministic=True)
    on_gpu = tally.bincount(index, weights=w, deterministic=True, check_weights=False)
    on_cpu = tally.bincount(index.cpu().numpy(), weights=w.cpu().numpy(), deterministic=True, check_weights=False)
    assert bits(on_gpu) == on_cpu.tobytes()
    assert not torch.isnan(on_gpu).any()


class _CudaArrayInterfaceOnly:
    """A device array seen only through __cuda_array_interface__ (version 3),
    whose `stream` names the stream its pending work is queued on."""

    def __init__(self, tensor, stream):
        self._tensor = tensor  # keeps the memory alive
        self.__cuda_array_interface__ = dict(tensor.__cuda_array_interface__, stream=stream, version=3)


@needs_torch
def test_cuda_array_interface_producer_stream_is_waited_for():
    """Arrays that speak only __cuda_array_interface__: read and written in
    place without copies, after the work pending on the stream their
    interface names (a busy side stream, which tally's stream, the legacy
    default one, does not wait for by itself)."""
    rows, cols, out_rows = 4096, 8, 3
    side = torch.cuda.Stream()
    out = torch.zeros(out_rows, cols, device="cuda")
    index = torch.zeros(rows, device="cuda", dtype=torch.int64)
    src = torch.zeros(rows, cols, device="cuda")
    x = torch.zeros(rows * cols, device="cuda", dtype=torch.float64)
    total = torch.zeros((), device="cuda", dtype=torch.float64)
    torch.cuda.synchronize()
    _busy(side)
    with torch.cuda.stream(side):  # the producer's work, late on its stream
        src.fill_(1.0)
        index.fill_(2)
        x.fill_(1.0)

    def wrap(t):
        return _CudaArrayInterfaceOnly(t, side.cuda_stream)

    tally.index_add(wrap(out), wrap(index), wrap(src))
    tally.sum(wrap(x), out=total)
    torch.cuda.synchronize()
    assert out[2].tolist() == [float(rows)] * cols and out[0].tolist() == [0.0] * cols
    assert float(total) == rows * cols


@needs_torch
def test_sum_cpp_calls_writes_the_sum_into_out():
    """The overhead benchmark checks the C++ calls' own output: out must be
    where they write (poisoned first), holding the exact sum of small integers."""
    rng = np.random.default_rng()
    values = rng.integers(-100, 100, 1024).astype(np.float32)
    x = torch.from_numpy(values).cuda()
    out = torch.full((), float("nan"), device="cuda")
    tally._sum_cpp_calls(x, out, 100)
    assert float(out) == float(values.astype(np.float64).sum())
    with pytest.raises(ValueError, match="calls"):
        tally._sum_cpp_calls(x, out, 0)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_cg_gives_the_cpu_bits(dtype):
    """A torch sparse CSR matrix on the GPU: the same iterates, iteration
    count and residual history as the CPU backend, bit for bit."""
    rng = np.random.default_rng()
    A = random_spd(rng, 5000, dtype=dtype)
    b = rng.standard_normal(5000).astype(dtype)
    x_cpu, cpu = tally.cg(A, b, history=True)
    assert cpu.converged
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data),
                                 size=A.shape, device="cuda")
    x, info = tally.cg(At, torch.from_numpy(b).cuda(), history=True)
    assert isinstance(x, torch.Tensor) and x.is_cuda and x.dtype == At.dtype
    assert info.status == "converged" and info.iterations == cpu.iterations
    assert bits(x) == bits(x_cpu)
    assert bits(info.history) == bits(cpu.history)
    shifted = torch.empty(5001, device="cuda", dtype=x.dtype)
    shifted[1:] = torch.from_numpy(b).cuda()
    unaligned, again = tally.cg(At, shifted[1:])  # b 4 or 8 bytes past an aligned address
    assert bits(unaligned) == bits(x_cpu) and again.iterations == cpu.iterations
    columns = At.col_indices().clone()
    columns[11] = 5000
    bad = torch.sparse_csr_tensor(At.crow_indices(), columns, At.values(), size=A.shape)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'A' has 1 column indices outside \[0, 5000\)"):
        tally.cg(bad, torch.from_numpy(b).cuda())


@needs_torch
@pytest.mark.parametrize("points", [7, 27])
def test_torch_cg_on_the_poisson_stencil_gives_the_cpu_bits(points):
    rng = np.random.default_rng()
    b = rng.standard_normal(45**3).astype(np.float32)
    x_cpu, cpu = tally.cg(tally.Poisson(45, points), b, history=True)
    x, info = tally.cg(tally.Poisson(45, points), torch.from_numpy(b).cuda(), history=True)
    assert info.converged and info.iterations == cpu.iterations and x.is_cuda
    assert bits(x) == bits(x_cpu) and bits(info.history) == bits(cpu.history)


# ---- CuPy ---------------------------------------------------------------------


@needs_cupy
def test_cupy_cg_gives_the_cpu_bits():
    import cupyx.scipy.sparse

    rng = np.random.default_rng()
    A = random_spd(rng, 3000)
    b = rng.standard_normal(3000)
    x_cpu, cpu = tally.cg(A, b)
    Ac = cupyx.scipy.sparse.csr_matrix((cupy.asarray(A.data), cupy.asarray(A.indices), cupy.asarray(A.indptr)),
                                       shape=A.shape)
    x, info = tally.cg(Ac, cupy.asarray(b))
    assert isinstance(x, cupy.ndarray) and info.iterations == cpu.iterations
    assert bits(x) == bits(x_cpu)



@needs_cupy
def test_cupy_sum_histogram_bincount():
    rs = cupy.random.RandomState(int(np.random.default_rng().integers(2**31)))
    x = rs.standard_normal(10**6 + 1)
    s = tally.sum(x)
    assert isinstance(s, cupy.ndarray) and s.shape == ()
    assert bits(s) == bits(tally.sum(x.get()))
    counts, edges = tally.histogram(x, bins=500)
    ref_counts, ref_edges = cupy.histogram(x, bins=500)
    assert isinstance(counts, cupy.ndarray)
    np.testing.assert_array_equal(counts.get(), np.histogram(x.get(), bins=500)[0])
    np.testing.assert_array_equal(counts.get(), ref_counts.get())
    index = rs.randint(0, 1000, 10**6).astype(cupy.int64)
    np.testing.assert_array_equal(tally.bincount(index).get(), cupy.bincount(index).get())


def _cupy_busy(stream, cycles=400_000_000):
    """Keeps `stream` busy for a while (one thread spinning on the clock), so
    that work queued on it after this runs late."""
    spin = cupy.RawKernel(r"""
extern "C" __global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}""", "spin")
    with stream:
        spin((1,), (1,), (cupy.int64(cycles),))


@needs_cupy
def test_cupy_side_stream():
    n = 2**22
    x = cupy.zeros(n, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    side = cupy.cuda.Stream(non_blocking=True)
    _cupy_busy(side)
    with side:
        x.fill(1.0)  # runs late on the side stream
        s = tally.sum(x)  # must follow the fill on the same stream
    side.synchronize()
    assert float(s) == n


@needs_cupy
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_cupy_scatter_add_matches_numpy_and_gives_the_cpu_bits(itype):
    rs = cupy.random.RandomState(int(np.random.default_rng().integers(2**31)))
    n, bins = 10**6, 5000
    index = rs.randint(0, bins, n).astype(itype)
    src = rs.standard_normal(n)
    out = rs.standard_normal(bins)
    start = out.get()
    expected = start.copy()
    np.add.at(expected, index.get(), src.get())
    assert tally.scatter_add(out, index, src) is out
    np.testing.assert_allclose(out.get(), expected, rtol=1e-12, atol=1e-10)
    det = tally.scatter_add(cupy.zeros(bins), index, src, deterministic=True)
    perm = rs.permutation(n)
    assert bits(tally.scatter_add(cupy.zeros(bins), index[perm], src[perm], deterministic=True)) == bits(det)
    assert bits(tally.scatter_add(np.zeros(bins), index.get(), src.get(), deterministic=True)) == bits(det)
    assert bits(tally.scatter_add(cupy.zeros(bins), index, src, deterministic=True, check_indices=False)) == bits(det)
    np.testing.assert_allclose(det.get(), expected - start, rtol=1e-9, atol=1e-9)


@needs_cupy
def test_cupy_errors_name_the_argument():
    out = cupy.zeros(10)
    index = cupy.zeros(4, dtype=cupy.int64)
    with pytest.raises(ValueError, match=r"argument 'src' is on cpu but 'out' is on cuda:0"):
        tally.scatter_add(out, index, np.ones(4))
    with pytest.raises(TypeError, match=r"argument 'src' has dtype float32"):
        tally.scatter_add(out, index, cupy.ones(4, dtype=cupy.float32))
    with pytest.raises(ValueError, match=r"argument 'x' must be contiguous"):
        tally.sum(cupy.ones((10, 10)).T)
    with pytest.raises(TypeError, match=r"argument 'x'.*complex"):
        tally.sum(cupy.ones(10, dtype=cupy.complex64))
    with pytest.raises(ValueError, match=r"argument 'index'.*\[1\] = 10 is outside"):
        tally.scatter_add(out, cupy.array([0, 10, 1]), cupy.ones(3))
    assert out[:2].tolist() == [1.0, 1.0]  # the updates in range were applied
    with pytest.raises(ValueError, match=r"tally.scatter_add: argument 'src' holds NaN"):
        tally.scatter_add(cupy.zeros(4), cupy.array([0, 1]), cupy.array([1.0, cupy.nan]), deterministic=True)
