"""What the GPU test files share: PyTorch and CuPy where installed, and the
skip markers. A GPU test module sets `pytestmark = GPU_MODULE`: its tests are
marked `gpu` (so that under TALLY_REQUIRE_GPU=1 a skip fails: conftest.py)
and skip where no GPU is usable."""

import pytest

import tally

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
try:
    import cupy
except ImportError:  # pragma: no cover
    cupy = None

needs_gpu = pytest.mark.skipif(not tally.gpu_available(), reason="no usable GPU: " + tally.gpu_status()[1])
needs_torch = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="torch with CUDA missing")
needs_cupy = pytest.mark.skipif(cupy is None, reason="cupy missing")

GPU_MODULE = [pytest.mark.gpu, needs_gpu]
