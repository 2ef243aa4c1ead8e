"""tally: reductions, histograms, scatter-reduce and conjugate gradient on the GPU and the CPU.

Arrays come from the caller's own library, without copies: NumPy arrays run
on tally's CPU backend (OpenMP), PyTorch and CuPy tensors on a CUDA device on
the GPU backend, queued on the library's current stream (or `stream=`).
Outputs are created in the caller's library. Results are reproducible bit for
bit (sums combine in a fixed tree; `deterministic=True` makes float
histograms and scatter-adds exact in fixed point).

    import torch, tally
    x = torch.randn(10**7, device="cuda", dtype=torch.float64)
    s = tally.sum(x)                                   # 0-d tensor on the GPU
    counts, edges = tally.histogram(x, bins=100, range=(-4, 4))
    out = torch.zeros(1000, device="cuda", dtype=torch.float64)
    tally.scatter_add(out, torch.randint(0, 1000, (10**7,), device="cuda"), x, deterministic=True)
    rows = torch.zeros(1000, 128, device="cuda")
    tally.index_add(rows, torch.randint(0, 1000, (10**5,), device="cuda"), torch.randn(10**5, 128, device="cuda"))
    x, info = tally.cg(A, b)                           # A: a torch/CuPy/SciPy CSR matrix; same bits on CPU and GPU
"""

from ._core import gpu_status as _gpu_status
from ._functions import bincount, dot, histogram, index_add, reduce, scatter_add, scatter_reduce, sum  # noqa: A004
from ._solvers import CGResult, Poisson, cg

__version__ = "0.1.0"


def gpu_available():
    """True when tally can run on a CUDA GPU here. Without one, tally still
    imports and runs NumPy arrays on the CPU backend; gpu_status() says why."""
    return _gpu_status()[0]


def gpu_status():
    """(available, reason): whether a CUDA GPU is usable, and why not."""
    return _gpu_status()


def _sum_cpp_calls(x, out, calls=1, *, checked=False, stream=None):
    """Queues `calls` calls of the C++ tally::reduce (float32 sum of x into
    the one-element float32 `out`) back to back on x's current stream (or
    `stream`), from one Python call; returns without waiting. x a contiguous
    float32 CUDA tensor. The C++ side of the benchmark of the Python
    binding's overhead (python/bench/bench_torch.py): the same buffer, stream
    and work as tally.sum(x, out=out), with no Python in between. `checked`
    as tally's check_mode."""
    from ._arrays import classify, resolve_stream
    from . import _core

    a = classify(x, "x", "_sum_cpp_calls")
    _core.sum_cpp_calls(x, out, calls, checked, resolve_stream(a, stream, "_sum_cpp_calls"))


__all__ = ["CGResult", "Poisson", "bincount", "cg", "dot", "gpu_available", "gpu_status", "histogram", "index_add",
           "reduce", "scatter_add", "scatter_reduce", "sum"]
