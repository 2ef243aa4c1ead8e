"""Arrays of a library tally does not know by name, on the CPU backend: a
producer that speaks DLPack and nothing else (no dtype, shape or buffer
protocol) gives the bits the same NumPy arrays give, as inputs and as
outputs, and new outputs come back as NumPy arrays."""

import numpy as np
import pytest

import tally


class DLPackOnly:
    """A host array seen only through __dlpack__ and __dlpack_device__."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_only_inputs_give_the_numpy_bits(rng):
    x = rng.standard_normal(10007)
    y = rng.standard_normal(10007)
    keys = rng.integers(0, 50, 10007)
    assert tally.sum(DLPackOnly(x)).tobytes() == np.asarray(tally.sum(x)).tobytes()
    assert int(tally.reduce(DLPackOnly(x), "argmax")) == int(np.argmax(x))
    assert tally.dot(DLPackOnly(x), DLPackOnly(y)).tobytes() == np.asarray(tally.dot(x, y)).tobytes()
    counts, edges = tally.histogram(DLPackOnly(x), bins=20, weights=DLPackOnly(y), deterministic=True)
    want_counts, want_edges = tally.histogram(x, bins=20, weights=y, deterministic=True)
    assert isinstance(counts, np.ndarray) and isinstance(edges, np.ndarray)
    assert counts.tobytes() == want_counts.tobytes() and edges.tobytes() == want_edges.tobytes()
    assert tally.bincount(DLPackOnly(keys)).tobytes() == np.bincount(keys).tobytes()


def test_dlpack_only_outputs_are_written_in_place(rng):
    index = rng.integers(0, 100, 5000)
    src = rng.standard_normal(5000)
    out = np.zeros(100)
    assert isinstance(tally.scatter_add(DLPackOnly(out), DLPackOnly(index), DLPackOnly(src), deterministic=True),
                      DLPackOnly)
    assert out.tobytes() == tally.scatter_add(np.zeros(100), index, src, deterministic=True).tobytes()
    rows = np.zeros((100, 7))
    row_src = rng.standard_normal((5000, 7))
    tally.index_add(DLPackOnly(rows), DLPackOnly(index), DLPackOnly(row_src), deterministic=True)
    assert rows.tobytes() == tally.index_add(np.zeros((100, 7)), index, row_src, deterministic=True).tobytes()
    total = np.zeros(())
    tally.sum(DLPackOnly(src), out=DLPackOnly(total))
    assert total.tobytes() == np.asarray(tally.sum(src)).tobytes()


def test_dlpack_only_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"tally.sum: argument 'x' has an unsupported dtype \(complex128\)"):
        tally.sum(DLPackOnly(np.ones(4, np.complex128)))
    index = DLPackOnly(np.zeros(2, np.int64))
    with pytest.raises(TypeError, match=r"argument 'src' has dtype float32"):
        tally.scatter_add(DLPackOnly(np.zeros(4)), index, DLPackOnly(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match=r"tally.index_add: argument 'src' has 3 rows; it must have one per index"):
        tally.index_add(DLPackOnly(np.zeros((4, 2))), index, DLPackOnly(np.ones((3, 2))))
