"""tally.cg: the library's conjugate gradient (tally::solvers::cg) on a CSR
matrix from SciPy, CuPy or PyTorch, or on the matrix-free Poisson stencil."""

from __future__ import annotations

import math
import numbers
import sys

from . import _core
from ._arrays import classify, empty, export, order_after_producer, resolve_stream
from ._functions import _flag

class CGResult:
    """What tally.cg reports beside x.

    iterations : int
        Iterations run.
    status : str
        Why it stopped: "converged" (the true residual met the tolerance),
        "iteration_limit", "breakdown" (p·Ap <= 0: A is not symmetric positive
        definite), "bad_diagonal" (Jacobi met a zero, negative or non-finite
        diagonal entry) or "non_finite" (NaN or infinity in b, x0 or the
        iterates).
    message : str
        The status in words.
    relative_residual : float
        ||b - A x|| / ||b|| for the returned x, accumulated in float64 (0 when b = 0).
    rhs_norm : float
        ||b||.
    mode : str
        What the GPU ran ("persistent" or "graph"; "auto" on the CPU).
    note : str
        Why the GPU's persistent mode fell back to the graph mode, if it did.
    history : array or None
        With history=True: iterations + 1 float64 values in b's library and on
        its device, entry 0 the initial true relative residual, entry k the
        recurrence's ||r_k|| / ||b|| after iteration k.
    """

    __slots__ = ("iterations", "status", "message", "relative_residual", "rhs_norm", "mode", "note", "history")

    def __init__(self, iterations, status, message, relative_residual, rhs_norm, mode, note, history):
        self.iterations = iterations
        self.status = status
        self.message = message
        self.relative_residual = relative_residual
        self.rhs_norm = rhs_norm
        self.mode = mode
        self.note = note
        self.history = history

    @property
    def converged(self):
        """True when the true residual met the tolerance."""
        return self.status == "converged"

    def __repr__(self):
        return (f"CGResult(status={self.status!r}, iterations={self.iterations}, "
                f"relative_residual={self.relative_residual:.3e}, mode={self.mode!r})")


class Poisson:
    """The g×g×g Poisson stencil as an operator for tally.cg: A·x computed
    from the stencil, no matrix stored (vectors are all a solve reads).

    points=27: HPCG's operator, 26 on the diagonal and −1 for each of the up
    to 26 neighbours inside the grid; points=7: 6 and −1 for the up to 6 face
    neighbours. Row i is the grid point (x, y, z) with i = x + g·(y + g·z).
    Each row sums its terms in increasing column order, so a solve gives the
    same bits as one on the same matrix in CSR with sorted columns. The
    dtype is b's.
    """

    __slots__ = ("g", "points")

    def __init__(self, g, points=27):
        if isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 1 <= g <= 2**20:
            raise ValueError(f"tally.Poisson: argument 'g' must be an int in [1, 2^20] (got {g!r})")
        if points not in (7, 27):
            raise ValueError(f"tally.Poisson: argument 'points' must be 7 or 27 (got {points!r})")
        self.g = int(g)
        self.points = int(points)

    @property
    def shape(self):
        n = self.g**3
        return (n, n)

    def __repr__(self):
        return f"tally.Poisson(g={self.g}, points={self.points})"


def _csr_parts(A):
    """(indptr, indices, data, rows, cols) of a CSR matrix, or TypeError naming 'A'."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(A, torch.Tensor):
        if A.layout != torch.sparse_csr:
            raise TypeError(f"tally.cg: argument 'A' is a torch tensor of layout {A.layout}; tally takes "
                            "torch.sparse_csr (convert with A.to_sparse_csr())")
        if A.dim() != 2:
            raise ValueError(f"tally.cg: argument 'A' must be a matrix (got {A.dim()} dimensions)")
        rows, cols = A.shape
        return A.crow_indices(), A.col_indices(), A.values(), int(rows), int(cols)
    if all(hasattr(A, name) for name in ("indptr", "indices", "data", "shape")):
        fmt = getattr(A, "format", "csr")
        if fmt != "csr":
            raise TypeError(f"tally.cg: argument 'A' is a sparse matrix in format {fmt!r}; tally takes CSR "
                            "(convert with A.tocsr())")
        shape = tuple(A.shape)
        if len(shape) != 2:
            raise ValueError(f"tally.cg: argument 'A' must be a matrix (got shape {shape})")
        return A.indptr, A.indices, A.data, int(shape[0]), int(shape[1])
    fmt = getattr(A, "format", None)
    if isinstance(fmt, str) and hasattr(A, "tocsr"):  # another SciPy/CuPy sparse format (coo, dia, lil, ...)
        raise TypeError(f"tally.cg: argument 'A' is a sparse matrix in format {fmt!r}; tally takes CSR "
                        "(convert with A.tocsr())")
    raise TypeError("tally.cg: argument 'A' must be a CSR matrix (scipy.sparse csr_matrix or csr_array, "
                    "cupyx.scipy.sparse.csr_matrix, a torch sparse CSR tensor, or any object with indptr, "
                    f"indices, data and shape), got {type(A).__name__}")


def _tolerance(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"tally.cg: argument '{name}' must be a finite number >= 0 (got {value!r})")
    return float(value)


def _count(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"tally.cg: argument '{name}' must be an int >= 0 (got {value!r})")
    return int(value)


def cg(A, b, x0=None, *, rtol=1e-6, atol=0.0, maxiter=1000, preconditioner="jacobi", pipelined=False,
       true_residual_interval=0, history=False, stream=None):
    """Solves A x = b for symmetric positive definite A by conjugate gradient.

    Jacobi-preconditioned CG in Eigen's order (tally::solvers::cg). Every
    iteration tests ||r|| <= max(rtol·||b||, atol) on the device, and a pass
    is confirmed on the true residual b − A x. Every dot product goes through
    tally's fixed tree and every row of A x is summed in stored order, so the
    iterates, the iteration count and the residual history are the same bits
    on every run and on both backends (a SciPy matrix with NumPy vectors on
    the CPU, a CuPy or PyTorch one on the GPU).

    Parameters
    ----------
    A : CSR matrix, square, or tally.Poisson
        scipy.sparse csr_matrix/csr_array (CPU), cupyx.scipy.sparse
        csr_matrix or a torch sparse CSR tensor (GPU), or any object with
        indptr, indices, data and shape. Values float32 or float64; indptr and
        indices both int32 or both int64. Its structure is checked (offsets
        from 0 to nnz, never decreasing, columns in range): ValueError naming
        'A' otherwise. A tally.Poisson stencil runs matrix-free, where b
        lives, in b's dtype.
    b : 1-D array of A's value dtype, A.shape[0] elements, on A's device.
    x0 : 1-D array like b, optional
        Initial guess (default zeros); it is copied, never written.
    rtol, atol : float
        Stopping tolerance: ||b − A x|| <= max(rtol·||b||, atol).
    maxiter : int
        Iteration limit (status "iteration_limit" when reached first).
    preconditioner : "jacobi" or None
    pipelined : bool
        Pipelined CG (Ghysels–Vanroose): one fused reduction an iteration
        instead of two, at some cost in accuracy (the answer still meets the
        tolerance: every stop is confirmed on the true residual).
    true_residual_interval : int
        Replace the recurrence residual by the true one every this many
        iterations (0: only when the recurrence says converged).
    history : bool
        Also return the residual history (CGResult.history).
    stream : as in tally.reduce.

    Returns
    -------
    (x, CGResult): x a new 1-D array in b's library and on its device. On
    the GPU the call waits for the stream: once after checking A's structure
    and once for the result.
    """
    pipelined = _flag("cg", "pipelined", pipelined)
    history = _flag("cg", "history", history)
    stencil = isinstance(A, Poisson)
    indptr, indices, data, rows, cols = (None, None, None, *A.shape) if stencil else _csr_parts(A)
    if preconditioner not in ("jacobi", None, "none"):
        raise ValueError(f"tally.cg: argument 'preconditioner' is {preconditioner!r}; 'jacobi' or None")
    rtol, atol = _tolerance("rtol", rtol), _tolerance("atol", atol)
    maxiter = _count("maxiter", maxiter)
    true_residual_interval = _count("true_residual_interval", true_residual_interval)

    bi = classify(b, "b", "cg")
    x0i = None if x0 is None else classify(x0, "x0", "cg")
    parts = [] if stencil else [classify(v, "A", "cg") for v in (indptr, indices, data)]
    handle = resolve_stream(bi, stream, "cg")
    order_after_producer([bi, x0i, *parts], handle)
    explicit = stream is not None
    objects = [None if a is None else export(a, handle, explicit) for a in (bi, x0i, *parts)]

    x = empty(bi, (rows,), bi.dtype)
    trace = empty(bi, (maxiter + 1,), "float64") if history else None
    settings = (rtol, atol, maxiter, true_residual_interval, preconditioner == "jacobi", bool(pipelined), handle)
    if stencil:
        report = _core.cg_stencil(A.g, A.points, objects[0], objects[1], x, trace, *settings)
    else:
        report = _core.cg(objects[2], objects[3], objects[4], rows, cols, objects[0], objects[1], x, trace, *settings)
    iterations, status, message, residual, bnorm, mode, note = report
    return x, CGResult(iterations, status, message, residual, bnorm, mode, note,
                       None if trace is None else trace[: iterations + 1])
