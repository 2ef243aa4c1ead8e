import os

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """Fresh random inputs every run; the seed is printed on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed = {seed} ({request.node.name})")
    return np.random.default_rng(seed)


def _gpu_required():
    return os.environ.get("TALLY_REQUIRE_GPU", "0") not in ("", "0")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: a GPU test (gpu_peers.GPU_MODULE); fails instead of skipping under TALLY_REQUIRE_GPU=1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under TALLY_REQUIRE_GPU=1 (scripts/gpu-check) a test marked gpu that skips --
    no usable GPU, PyTorch or CuPy missing -- fails instead, as the C++ suite's
    GPU tests do: GPU coverage cannot vanish quietly."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _gpu_required() and item.get_closest_marker("gpu") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"GPU test not run under TALLY_REQUIRE_GPU=1: {reason}"
