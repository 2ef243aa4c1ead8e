import os

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """Fresh random inputs every run; the seed is printed on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed = {seed} ({request.node.name})")
    return np.random.default_rng(seed)
