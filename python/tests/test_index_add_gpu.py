"""tally.index_add on the GPU through PyTorch and CuPy: against
torch.index_add_ / index_reduce_, deterministic bits across runs, orders and
backends, strided views, errors, and the stream contract. Skips where no GPU,
torch or cupy is present."""

import numpy as np
import pytest

import tally

from gpu_peers import GPU_MODULE, cupy, needs_cupy, needs_torch, torch
from test_index_add_cpu import power_of_two_factors

pytestmark = GPU_MODULE


def bits(v):
    v = v.cpu()
    return v.view(getattr(torch, f"int{8 * v.dtype.itemsize}")).numpy().tobytes()


def hot_index(rows, out_rows, share=0.5, dtype=None):
    """`share` of the rows on key 0, the rest uniform (the issue's hot-row case)."""
    index = torch.randint(0, out_rows, (rows,), device="cuda")
    index[torch.rand(rows, device="cuda") < share] = 0
    return index if dtype is None else index.to(dtype)


def hot_problem(rows, out_rows, cols, dtype, itype=None):
    """(out, index, src): random out and src of `dtype`, `hot_index` keys of `itype`."""
    dt = getattr(torch, dtype)
    out = torch.randn(out_rows, cols, device="cuda", dtype=dt)
    index = hot_index(rows, out_rows, dtype=None if itype is None else getattr(torch, itype))
    src = torch.randn(rows, cols, device="cuda", dtype=dt)
    return out, index, src


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("cols", [1, 16, 128, 1024])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_torch_index_add_matches_index_add_(dtype, cols, itype):
    rows, out_rows = 20000, 3000
    out, index, src = hot_problem(rows, out_rows, cols, dtype, itype)
    exact = out.double().index_add_(0, index.long(), src.double())
    magnitude = out.double().abs().index_add_(0, index.long(), src.double().abs())
    count = torch.zeros(out_rows, 1, device="cuda", dtype=torch.float64).index_add_(
        0, index.long(), torch.ones(rows, 1, device="cuda", dtype=torch.float64))
    assert tally.index_add(out, index, src) is out
    u = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    u_acc = 2.0**-24 if dtype in ("float16", "bfloat16") else u
    bound = (count + 1) * (2 * u + u_acc) * magnitude  # the GPU's documented bound (index_add.hpp)
    assert bool(((out.double() - exact).abs() <= bound * 1.01 + 1e-30).all())


@needs_torch
@pytest.mark.parametrize("shape", [(), (3, 5), (2, 1, 64)])
def test_torch_rows_of_any_shape_as_index_add_along_dim_0(shape):
    # 1-D and N-D tensors: rows of prod(shape) elements, viewed without a copy.
    out = torch.randn(300, *shape, device="cuda", dtype=torch.float64)
    src = torch.randn(5000, *shape, device="cuda", dtype=torch.float64)
    index = hot_index(5000, 300)
    want = out.clone().index_add_(0, index, src)
    assert tally.index_add(out, index, src) is out
    torch.testing.assert_close(out, want, rtol=1e-9, atol=1e-9)  # float64: orders differ by ~1e-12
    with pytest.raises(ValueError, match="rows whose elements are not contiguous"):
        tally.index_add(torch.zeros(300, 4, 3, device="cuda").transpose(1, 2), index, torch.ones(5000, 3, 4, device="cuda"))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_torch_deterministic_bits_across_runs_orders_and_backends(dtype):
    rows, out_rows, cols = 50000, 700, 64
    base, index, src = hot_problem(rows, out_rows, cols, dtype)
    # Fixed-point sums (automatic would take ordered sums for float64 here): any order of the rows.
    det = {"deterministic": True, "sums": "fixed_point"}
    first = tally.index_add(base.clone(), index, src, **det)
    perm = torch.randperm(rows, device="cuda")
    assert bits(tally.index_add(base.clone(), index[perm], src[perm], **det)) == bits(first)
    assert bits(tally.index_add(base.clone(), index, src, **det)) == bits(first)
    # The CPU backend (torch CPU tensors through DLPack) gives the same bits.
    assert bits(tally.index_add(base.cpu(), index.cpu(), src.cpu(), **det)) == bits(first)
    exact = base.double().index_add_(0, index, src.double())
    scale = base.double().abs().index_add_(0, index, src.double().abs())
    u = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    # Rounded twice to the dtype (the sum, then out + sum), plus the
    # quantisation 2^-s per row (s >= 61 - 3 - 16 for |v| < 8, 50000 rows).
    assert bool(((first.double() - exact).abs() <= 2 * u * (scale + exact.abs()) + rows * 2.0**-40).all())


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_ordered_sums_bits_across_runs_and_backends(dtype):
    # 25.6 / 12.8 MB of src in rows of 512 / 256 bytes: automatic sums are ordered for
    # float32 (16 MB or more), fixed point for bfloat16; ordered asked for both.
    rows, out_rows, cols = 50000, 700, 128
    base, index, src = hot_problem(rows, out_rows, cols, dtype)
    first = tally.index_add(base.clone(), index, src, deterministic=True, sums="ordered")
    assert bits(tally.index_add(base.clone(), index, src, deterministic=True, sums="ordered")) == bits(first)
    assert bits(tally.index_add(base.cpu(), index.cpu(), src.cpu(), deterministic=True, sums="ordered")) == bits(first)
    automatic = tally.index_add(base.clone(), index, src, deterministic=True)
    fixed = tally.index_add(base.clone(), index, src, deterministic=True, sums="fixed_point")
    assert bits(automatic) == bits(first if dtype == "float32" else fixed)
    exact = base.double().index_add_(0, index, src.double())
    scale = base.double().abs().index_add_(0, index, src.double().abs())
    count = torch.zeros(out_rows, 1, device="cuda", dtype=torch.float64).index_add_(
        0, index, torch.ones(rows, 1, device="cuda", dtype=torch.float64))
    u = {"float32": 2.0**-24, "bfloat16": 2.0**-8}[dtype]
    # float32 sums of a piece (<= 256 rows) and a tree of depth log2(pieces), one rounding to the dtype.
    depth = 256 + torch.log2(count / 256 + 1).ceil()
    assert bool(((first.double() - exact).abs() <= u * exact.abs() + depth * 2.0**-24 * scale * 1.01).all())


@needs_torch
@pytest.mark.parametrize("reduce", ["amin", "amax"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_torch_extrema_match_index_reduce_(reduce, dtype, itype):
    rows, out_rows, cols = 30000, 500, 33
    out, index, src = hot_problem(rows, out_rows, cols, dtype, itype)
    expected = out.clone().index_reduce_(0, index.long(), src, reduce, include_self=True)
    tally.index_add(out, index, src, reduce=reduce)
    assert torch.equal(out, expected)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("rows,cols", [(20000, 1), (20000, 24), (40000, 128)])  # the last sorts its rows (20 MB)
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_torch_products_of_powers_of_two_are_exact(dtype, rows, cols, itype):
    """reduce="prod" against np.multiply.at in float64: factors whose every
    partial product is exact, so any order of the rows gives the exact
    product (signed zero included), and so the CPU backend's bits."""
    rng = np.random.default_rng()
    out_rows = 300
    index = rng.integers(0, out_rows, rows)
    index[rng.random(rows) < 0.5] = 0
    out, src = power_of_two_factors(rng, index, out_rows, cols)
    expected = out.copy()
    np.multiply.at(expected, index, src)
    dt = getattr(torch, dtype)
    got = torch.from_numpy(out).to(device="cuda", dtype=dt)
    tally.index_add(got, torch.from_numpy(index).to(device="cuda", dtype=getattr(torch, itype)),
                    torch.from_numpy(src).to(device="cuda", dtype=dt), reduce="prod")
    assert bits(got) == bits(torch.from_numpy(expected).to(dt))


@needs_torch
@pytest.mark.parametrize("sums", ["fixed_point", "ordered"])
def test_torch_deterministic_unchecked_call_does_not_wait(sums):
    """check_indices=False with deterministic=True returns while its stream is
    still busy (no error flag read back: graph capture is possible) and gives
    the checked call's bits."""
    rows, out_rows, cols = 50000, 700, 64
    base, index, src = hot_problem(rows, out_rows, cols, "float32")
    det = {"deterministic": True, "sums": sums}
    checked = tally.index_add(base.clone(), index, src, **det)
    side = torch.cuda.Stream()
    out = base.clone()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        tally.index_add(out, index, src, check_indices=False, **det)  # sizes the stream's workspace
        out.copy_(base)
        torch.cuda._sleep(200_000_000)
        tally.index_add(out, index, src, check_indices=False, **det)
        returned_while_busy = not side.query()
    side.synchronize()
    assert returned_while_busy
    assert bits(out) == bits(checked)

@needs_torch
def test_torch_strided_view_keeps_the_other_columns():
    rows, out_rows = 10000, 100
    wide = torch.randn(out_rows, 200, device="cuda")
    before = wide.clone()
    out = wide[:, 50:178]  # 128 columns, rows 200 apart
    index = torch.randint(0, out_rows // 2, (rows,), device="cuda")
    src = torch.randn(rows, 300, device="cuda")[:, 7:135]
    expected = before[:, 50:178].clone().index_add_(0, index, src)
    tally.index_add(out, index, src)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4)
    assert torch.equal(wide[:, :50], before[:, :50]) and torch.equal(wide[:, 178:], before[:, 178:])
    assert torch.equal(wide[out_rows // 2:], before[out_rows // 2:])


@needs_torch
def test_torch_errors_name_the_argument():
    out = torch.zeros(10, 4, device="cuda")
    index = torch.zeros(3, device="cuda", dtype=torch.int64)
    with pytest.raises(ValueError, match=r"argument 'index'.*\[1\] = 10 is outside"):
        tally.index_add(out, torch.tensor([0, 10, 1], device="cuda"), torch.ones(3, 4, device="cuda"))
    assert out[0].tolist() == [1.0] * 4 and out[1].tolist() == [1.0] * 4  # the rows in range were applied
    with pytest.raises(ValueError, match=r"argument 'src' is on cpu but 'out' is on cuda:0"):
        tally.index_add(out, index, torch.ones(3, 4))
    with pytest.raises(TypeError, match=r"argument 'src' has dtype float64"):
        tally.index_add(out, index, torch.ones(3, 4, device="cuda", dtype=torch.float64))
    with pytest.raises(ValueError, match=r"argument 'out' must have contiguous columns"):
        tally.index_add(torch.zeros(4, 10, device="cuda").t(), index, torch.ones(3, 4, device="cuda"))


def _busy(stream):
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)


@needs_torch
def test_torch_result_on_side_stream_is_ready_when_that_stream_is():
    rows, cols = 2**18, 32
    side = torch.cuda.Stream()
    src = torch.zeros(rows, cols, device="cuda")
    index = torch.zeros(rows, device="cuda", dtype=torch.int64)
    torch.cuda.synchronize()
    _busy(side)
    with torch.cuda.stream(side):
        src.fill_(1.0)  # runs late on the side stream
        out = torch.zeros(2, cols, device="cuda")
        tally.index_add(out, index, src, check_indices=False)  # must follow the fill
    side.synchronize()
    assert out[0].tolist() == [float(rows)] * cols and out[1].tolist() == [0.0] * cols


@needs_torch
def test_torch_explicit_stream_orders_the_outputs_pending_work():
    """With stream=side, out's pending work on torch's current stream (a fill
    queued behind a sleep) finishes before tally writes out on side."""
    rows, cols = 4096, 16
    side = torch.cuda.Stream()
    out = torch.full((2, cols), float("nan"), device="cuda")
    index = torch.zeros(rows, device="cuda", dtype=torch.int64)
    src = torch.ones(rows, cols, device="cuda")
    torch.cuda.synchronize()
    _busy(torch.cuda.current_stream())
    out.zero_()  # pending on the current stream: tally writing first would see its rows erased
    tally.index_add(out, index, src, check_indices=False, stream=side)
    torch.cuda.synchronize()
    assert out[0].tolist() == [float(rows)] * cols and out[1].tolist() == [0.0] * cols


@needs_cupy
def test_cupy_index_add_matches_numpy():
    rs = cupy.random.RandomState(int(np.random.default_rng().integers(2**31)))
    rows, out_rows, cols = 40000, 900, 24
    out = rs.standard_normal((out_rows, cols))
    index = rs.randint(0, out_rows, rows).astype(cupy.int64)
    src = rs.standard_normal((rows, cols))
    expected = out.get()
    np.add.at(expected, index.get(), src.get())
    tally.index_add(out, index, src)
    np.testing.assert_allclose(out.get(), expected, rtol=1e-12, atol=1e-10)
    det = tally.index_add(cupy.zeros((out_rows, cols)), index, src, deterministic=True)
    host = tally.index_add(np.zeros((out_rows, cols)), index.get(), src.get(), deterministic=True)
    assert det.get().tobytes() == host.tobytes()
