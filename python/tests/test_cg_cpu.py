"""tally.cg on the CPU backend: CSR matrices built here in NumPy (a plain
object with indptr/indices/data/shape), SciPy's and torch's where installed,
against residuals and solutions computed independently in float64."""

import math

import numpy as np
import pytest

import tally


class CSR:
    """The least a CSR matrix needs to be for tally.cg (SciPy's attributes)."""

    def __init__(self, indptr, indices, data, shape, fmt="csr"):
        self.indptr, self.indices, self.data, self.shape, self.format = indptr, indices, data, shape, fmt

    def dense(self):
        a = np.zeros(self.shape)
        for i in range(self.shape[0]):
            for k in range(self.indptr[i], self.indptr[i + 1]):
                a[i, self.indices[k]] += self.data[k]
        return a


def random_spd(rng, n, per_row=6, dtype=np.float64, index=np.int32):
    """A random sparse symmetric, strictly diagonally dominant matrix with a
    positive diagonal (so SPD), its entries in shuffled order within rows."""
    pairs = {}
    for i in range(n):
        for j in rng.choice(n, size=min(per_row, n), replace=False):
            if i != j:
                v = rng.uniform(-1, 1)
                pairs[(i, j)] = v
                pairs[(j, i)] = v
    rows = [[] for _ in range(n)]
    for (i, j), v in pairs.items():
        rows[i].append((j, v))
    for i in range(n):
        off = sum(abs(v) for _, v in rows[i])
        rows[i].append((i, off + rng.uniform(0.5, 2.0)))
        rng.shuffle(rows[i])
    indptr = np.zeros(n + 1, dtype=index)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.array([j for r in rows for j, _ in r], dtype=index)
    data = np.array([v for r in rows for _, v in r], dtype=dtype)
    return CSR(indptr, indices, data, (n, n))


def true_relative_residual(A, x, b):
    dense = A.dense()
    r = b.astype(np.float64) - dense @ x.astype(np.float64)
    return np.linalg.norm(r) / np.linalg.norm(b.astype(np.float64))


@pytest.mark.parametrize("n", [1, 2, 33, 500])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solves_random_spd_systems(rng, n, dtype):
    A = random_spd(rng, n, dtype=dtype)
    b = rng.standard_normal(n).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    x, info = tally.cg(A, b, rtol=rtol)
    assert isinstance(x, np.ndarray) and x.dtype == dtype and x.shape == (n,)
    assert info.status == "converged" and info.converged, info
    residual = true_relative_residual(A, x, b)
    assert residual <= rtol * 1.01
    assert info.relative_residual == pytest.approx(residual, rel=1e-3, abs=1e-12)
    exact = np.linalg.solve(A.dense(), b.astype(np.float64))
    condition = np.linalg.cond(A.dense())
    assert np.linalg.norm(x - exact) <= 2 * condition * rtol * np.linalg.norm(exact)


def test_same_bits_for_32_and_64_bit_indices_and_every_run(rng):
    A32 = random_spd(rng, 300, index=np.int32)
    A64 = CSR(A32.indptr.astype(np.int64), A32.indices.astype(np.int64), A32.data, A32.shape)
    b = rng.standard_normal(300)
    x, info = tally.cg(A32, b, history=True)
    for A in (A32, A64, A32):
        y, again = tally.cg(A, b, history=True)
        assert y.tobytes() == x.tobytes()
        assert again.iterations == info.iterations
        assert again.history.tobytes() == info.history.tobytes()


def test_unaligned_vectors_give_the_aligned_bits(rng):
    A = random_spd(rng, 301)
    b = rng.standard_normal(301)
    x0 = rng.standard_normal(301)
    x, info = tally.cg(A, b, x0=x0)
    b_buffer, x0_buffer = np.empty(302), np.empty(302)
    b_buffer[1:], x0_buffer[1:] = b, x0  # views 8 bytes past a 16-byte boundary
    y, again = tally.cg(A, b_buffer[1:], x0=x0_buffer[1:])
    assert y.tobytes() == x.tobytes() and again.iterations == info.iterations


def test_initial_guess_is_copied_and_used(rng):
    A = random_spd(rng, 200)
    b = rng.standard_normal(200)
    exact = np.linalg.solve(A.dense(), b)
    x0 = exact.copy()
    before = x0.tobytes()
    x, info = tally.cg(A, b, x0=x0, rtol=1e-8)
    assert x0.tobytes() == before
    assert info.converged and info.iterations <= 1
    guess = rng.standard_normal(200)
    _, from_guess = tally.cg(A, b, x0=guess, rtol=1e-8)
    assert from_guess.converged


def test_history_starts_at_the_initial_residual(rng):
    A = random_spd(rng, 100)
    b = rng.standard_normal(100)
    x, info = tally.cg(A, b, history=True, rtol=1e-9)
    assert info.history.dtype == np.float64 and len(info.history) == info.iterations + 1
    assert info.history[0] == pytest.approx(1.0, rel=1e-12)  # x0 = 0: r = b
    assert info.history[-1] <= 1e-9 * 1.01
    _, plain = tally.cg(A, b)
    assert plain.history is None


def test_zero_rhs_gives_zero_solution(rng):
    A = random_spd(rng, 50)
    x, info = tally.cg(A, np.zeros(50), x0=rng.standard_normal(50))
    assert info.converged and info.iterations == 0 and not np.any(x)


def test_iteration_limit_breakdown_bad_diagonal_and_non_finite(rng):
    A = random_spd(rng, 300)
    b = rng.standard_normal(300)
    _, limited = tally.cg(A, b, maxiter=2, rtol=1e-12)
    assert limited.status == "iteration_limit" and limited.iterations == 2
    negative = CSR(A.indptr, A.indices, -A.data, A.shape)
    _, jacobi = tally.cg(negative, b)
    assert jacobi.status == "bad_diagonal"
    _, plain = tally.cg(negative, b, preconditioner=None)
    assert plain.status == "breakdown"
    b[7] = np.nan
    _, nan = tally.cg(A, b)
    assert nan.status == "non_finite"
    assert math.isnan(nan.relative_residual)  # never 0, as if solved


def test_pipelined_cg_meets_the_tolerance(rng):
    A = random_spd(rng, 400)
    b = rng.standard_normal(400)
    x, info = tally.cg(A, b, pipelined=True, rtol=1e-9)
    assert info.converged and true_relative_residual(A, x, b) <= 1e-9 * 1.01


def test_bad_structure_is_a_value_error_naming_A(rng):
    A = random_spd(rng, 20)
    b = rng.standard_normal(20)
    cases = []
    shifted = A.indptr.copy()
    shifted[0] = 1
    cases.append((CSR(shifted, A.indices, A.data, A.shape), r"row offsets starting at 1"))
    short = A.indptr.copy()
    short[-1] -= 1
    cases.append((CSR(short, A.indices, A.data, A.shape), r"row offsets ending at"))
    bumpy = A.indptr.copy()
    bumpy[5], bumpy[6] = bumpy[6], bumpy[5]
    cases.append((CSR(bumpy, A.indices, A.data, A.shape), r"row offsets that decrease"))
    for bad_column in (-1, 20):
        columns = A.indices.copy()
        columns[3] = bad_column
        cases.append((CSR(A.indptr, columns, A.data, A.shape), r"1 column indices outside \[0, 20\)"))
    for matrix, message in cases:
        with pytest.raises(ValueError, match=r"tally.cg: argument 'A' has " + message):
            tally.cg(matrix, b)


def test_wrong_arguments_name_themselves(rng):
    A = random_spd(rng, 20)
    b = rng.standard_normal(20)
    with pytest.raises(TypeError, match=r"tally.cg: argument 'b' has dtype float32 but A's values have float64"):
        tally.cg(A, b.astype(np.float32))
    with pytest.raises(ValueError, match=r"tally.cg: argument 'b' has 19 elements"):
        tally.cg(A, b[:19])
    with pytest.raises(TypeError, match=r"tally.cg: argument 'x0' has dtype float32"):
        tally.cg(A, b, x0=b.astype(np.float32))
    with pytest.raises(TypeError, match=r"tally.cg: argument 'A' has row offsets of dtype int64 and column"):
        tally.cg(CSR(A.indptr.astype(np.int64), A.indices, A.data, A.shape), b)
    with pytest.raises(TypeError, match=r"tally.cg: argument 'A' has values of dtype int32"):
        tally.cg(CSR(A.indptr, A.indices, A.data.astype(np.int32), A.shape), b)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'A' must be square"):
        tally.cg(CSR(A.indptr, A.indices, A.data, (20, 21)), b)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'A' has 20 row offsets"):
        tally.cg(CSR(A.indptr[:-1], A.indices, A.data, A.shape), b)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'A' has .* values but .* column indices"):
        tally.cg(CSR(A.indptr, A.indices, A.data[:-1], A.shape), b)
    with pytest.raises(TypeError, match=r"tally.cg: argument 'A' is a sparse matrix in format 'csc'"):
        tally.cg(CSR(A.indptr, A.indices, A.data, A.shape, fmt="csc"), b)
    with pytest.raises(TypeError, match=r"tally.cg: argument 'A' must be a CSR matrix"):
        tally.cg(A.dense(), b)
    try:
        import scipy.sparse
    except ImportError:
        scipy = None
    if scipy is not None:  # the other SciPy formats get the same hint as csc (coo has no indptr)
        for fmt in ("coo", "dia", "lil"):
            with pytest.raises(TypeError, match=rf"argument 'A' is a sparse matrix in format '{fmt}'.*A.tocsr\(\)"):
                tally.cg(scipy.sparse.identity(20, format=fmt), b)
    for name, kwargs in (("rtol", {"rtol": -1.0}), ("atol", {"atol": float("nan")}), ("maxiter", {"maxiter": -1}),
                         ("maxiter", {"maxiter": 2.5}), ("true_residual_interval", {"true_residual_interval": -3})):
        with pytest.raises(ValueError, match=rf"tally.cg: argument '{name}'"):
            tally.cg(A, b, **kwargs)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'preconditioner'"):
        tally.cg(A, b, preconditioner="ilu")


def poisson_csr(g, points, dtype):
    """The g^3-row Poisson matrix in CSR, columns sorted (built here, not by tally)."""
    n = g**3
    offsets = [(dx, dy, dz) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
               if points == 27 or abs(dx) + abs(dy) + abs(dz) <= 1]
    indptr, indices, data = [0], [], []
    for i in range(n):
        x, y, z = i % g, (i // g) % g, i // (g * g)
        for dx, dy, dz in offsets:  # increasing column order
            if 0 <= x + dx < g and 0 <= y + dy < g and 0 <= z + dz < g:
                indices.append(i + dx + g * (dy + g * dz))
                data.append((points - 1) if (dx, dy, dz) == (0, 0, 0) else -1)
        indptr.append(len(indices))
    return CSR(np.array(indptr, np.int32), np.array(indices, np.int32), np.array(data, dtype), (n, n))


@pytest.mark.parametrize("points", [7, 27])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("g", [1, 2, 7])
def test_poisson_stencil_gives_the_sorted_csr_bits(rng, points, dtype, g):
    A = poisson_csr(g, points, dtype)
    b = rng.standard_normal(g**3).astype(dtype)
    x, info = tally.cg(A, b, history=True)
    y, again = tally.cg(tally.Poisson(g, points), b, history=True)
    assert info.converged and again.converged
    assert y.tobytes() == x.tobytes() and again.iterations == info.iterations
    assert again.history.tobytes() == info.history.tobytes()
    assert tally.Poisson(g, points).shape == A.shape


def test_poisson_arguments():
    for bad in (0, -1, 2**20 + 1, 2.0, True):
        with pytest.raises(ValueError, match=r"tally.Poisson: argument 'g'"):
            tally.Poisson(bad)
    with pytest.raises(ValueError, match=r"tally.Poisson: argument 'points' must be 7 or 27"):
        tally.Poisson(4, points=9)
    with pytest.raises(ValueError, match=r"tally.cg: argument 'b' has 63 elements"):
        tally.cg(tally.Poisson(4), np.ones(63))
    with pytest.raises(TypeError, match=r"tally.cg: argument 'b' has dtype int64"):
        tally.cg(tally.Poisson(4), np.ones(64, dtype=np.int64))


def test_scipy_and_torch_matrices_give_the_same_bits(rng):
    A = random_spd(rng, 250)
    b = rng.standard_normal(250)
    x, info = tally.cg(A, b)
    sparse = pytest.importorskip("scipy.sparse")
    y, again = tally.cg(sparse.csr_matrix((A.data, A.indices, A.indptr), shape=A.shape), b)
    assert y.tobytes() == x.tobytes() and again.iterations == info.iterations
    torch = pytest.importorskip("torch")
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data), size=A.shape)
    z, _ = tally.cg(At, torch.from_numpy(b))
    assert isinstance(z, torch.Tensor) and z.numpy().tobytes() == x.tobytes()
    with pytest.raises(TypeError, match=r"tally.cg: argument 'A' is a torch tensor of layout torch.strided"):
        tally.cg(torch.from_numpy(A.dense()), torch.from_numpy(b))
