"""The public functions of the tally package (re-exported by __init__)."""

from __future__ import annotations

import operator

import numpy as np

from . import _core
from ._arrays import (NUMPY, _is_torch_subclass, as_dtype, classify, empty, export, from_host, order_after_producer,
                      read_back, resolve_stream, to_host)

_REDUCE_OPS = ("sum", "plus", "prod", "min", "max", "argmin", "argmax", "and", "or", "xor")


def _flag(function, name, value):
    """A boolean argument as a bool: True/False, NumPy's bools (np.bool_, a
    0-d bool array) and the ints 0 and 1; TypeError naming it otherwise (the
    core's bindings would refuse them with their own signature)."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_) or (isinstance(value, np.ndarray) and value.shape == () and value.dtype == bool):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"tally.{function}: argument '{name}' must be a bool (got {type(value).__name__} {value!r})")


def _prepare(function, stream, **arrays):
    """Classifies the named arrays (None passes through), resolves the stream
    from the first, and returns (infos, objects for the core, stream)."""
    infos = {name: (None if x is None else classify(x, name, function)) for name, x in arrays.items()}
    first = next(a for a in infos.values() if a is not None)
    handle = resolve_stream(first, stream, function)
    explicit = stream is not None
    order_after_producer(infos.values(), handle)
    objects = {name: (None if a is None else export(a, handle, explicit)) for name, a in infos.items()}
    return infos, objects, handle


def _prepare_one(function, stream, x):
    """_prepare for a call on the single array x (argument 'x') without its
    dictionaries, which a few-microsecond call such as a 2^10-element sum
    would feel: returns (info, object for the core, stream)."""
    a = classify(x, "x", function)
    handle = resolve_stream(a, stream, function)
    if a.pending_stream is not None:
        order_after_producer((a,), handle)
    return a, export(a, handle, stream is not None), handle


def _output(function, out, handle, explicit):
    """What the core receives for an output the caller passed: the array itself
    on the library's current stream; with an explicit `stream`, the array
    exported with that stream (DLPack; a __cuda_array_interface__ producer's
    stream waited for), so that the work its library has pending on the output
    is ordered before the call writes it, as for the inputs."""
    if not explicit:
        return out
    o = classify(out, "out", function)
    order_after_producer((o,), handle)
    return export(o, handle, True)


def _scalar(out, a):
    """A reduction's result: a NumPy scalar for NumPy input (as numpy.sum
    returns), else the 0-d array in the caller's library (no wait for the GPU)."""
    return out[()] if a.kind == NUMPY else out


def reduce(x, op="sum", *, compensated=False, stream=None, out=None):
    """Reduces every element of x with a named operator.

    Parameters
    ----------
    x : array
        NumPy array (CPU backend) or PyTorch/CuPy tensor on a GPU (GPU backend),
        contiguous, any shape (all elements are reduced). dtypes: float32,
        float64, int32, int64; float16 and bfloat16 for "sum".
    op : str
        "sum" (or "plus"), "prod", "min", "max", "argmin", "argmax", and the
        bitwise "and", "or", "xor" (integers only).
    compensated : bool
        Kahan–Babuška–Neumaier summation (op "sum", float32/float64).
    stream : int or stream object, optional
        CUDA stream to run on (an int handle, or an object with .cuda_stream or
        .ptr). Default: the array library's current stream. Inputs are exported
        with this stream under the DLPack protocol, so the library orders its
        pending work before it.
    out : array, optional
        Where to write the result (one element of the result dtype; for argmin
        and argmax two int64 slots). Default: a new array.

    Returns
    -------
    A 0-d array in x's library (on x's device; the GPU is not waited for), or a
    NumPy scalar for NumPy input. Sums and products of int32 are int64 (as in
    NumPy and PyTorch); float16/bfloat16 sums accumulate in float32 and are
    returned in x's dtype; "argmin"/"argmax" give the int64 index of the first
    extremum (a NaN counting as the extremum). "min"/"max" propagate NaN and
    return +inf/-inf (or the integer limits) for an empty x.

    The result is the same bit for bit on every run and on both backends
    (tally combines elements in one fixed tree).

    Raises
    ------
    TypeError for unsupported dtypes or non-arrays; ValueError for a
    non-contiguous x, a bad `op`, or arrays on different devices.
    """
    if op not in _REDUCE_OPS:
        raise ValueError(f"tally.reduce: argument 'op' is {op!r}; one of {', '.join(map(repr, _REDUCE_OPS))}")
    return _reduce("reduce", x, op, compensated, stream, out)


_REDUCE_OUT_DTYPES = {}  # (dtype, op, compensated) -> the result's dtype, as calls meet them


def _reduce(function, x, op, compensated, stream, out):
    if compensated is not False and compensated is not True:  # two identity tests on the common path
        compensated = _flag(function, "compensated", compensated)
    if stream is None:
        # A torch tensor (PyTorch 2.11 on): the core reads it, torch's current
        # stream and a new output through torch's DLPack exchange table, which
        # takes a fraction of what the steps below cost a small call.
        result = _core.reduce_current(x, out, op, compensated, function)
        if result is not None:
            return result
    a, obj, handle = _prepare_one(function, stream, x)
    indexed = op in ("argmin", "argmax")
    if indexed and a.size == 0:
        raise ValueError(f"tally.{function}: argument 'x' is empty; {op} of nothing has no index")
    result = out
    if result is None:
        key = (a.dtype, op, compensated)
        dtype = _REDUCE_OUT_DTYPES.get(key)
        if dtype is None:  # the core's rule, which raises for what it does not support
            dtype = _REDUCE_OUT_DTYPES[key] = _core.reduce_out_dtype(a.dtype, op, compensated, function)
        result = empty(a, (2,) if indexed else (), dtype)
    else:
        result = _output(function, out, handle, stream is not None)
    _core.reduce(obj, result, op, compensated, handle, False, function)
    if out is not None:
        return out
    if indexed:  # tally::value_index<T>: the index is the second 8-byte slot
        return result[1] if a.kind != NUMPY else result[1].item()
    return _scalar(result, a)


def sum(x, *, compensated=False, stream=None, out=None):  # noqa: A001 (the name users expect)
    """Sum of every element of x: tally.reduce(x, "sum", ...).

    float16/bfloat16 accumulate in float32 (result in x's dtype); int32 sums
    to int64. `compensated=True`: Kahan–Babuška–Neumaier summation (float32,
    float64). Bitwise reproducible run to run and across backends. See
    tally.reduce for the parameters, the result and the errors.
    """
    return _reduce("sum", x, "sum", compensated, stream, out)


def dot(x, y, *, compensated=False, stream=None, out=None):
    """Σ x[i]·y[i] over all elements (float32 or float64, one dtype).

    x and y: contiguous arrays of the same size and dtype on one device. Each
    product is rounded before it is added (no fused multiply-add), so the
    result is the same bit for bit on both backends and on every run.
    Returns a 0-d array in x's library (NumPy scalar for NumPy). `stream`,
    `out`: as in tally.reduce. TypeError/ValueError name the bad argument.
    """
    compensated = _flag("dot", "compensated", compensated)
    infos, objects, handle = _prepare("dot", stream, x=x, y=y)
    a = infos["x"]
    result = empty(a, (), a.dtype) if out is None else _output("dot", out, handle, stream is not None)
    _core.dot(objects["x"], objects["y"], result, compensated, handle, False)
    return out if out is not None else _scalar(result, a)


def _extrema(function, a, obj, handle):
    """(min, max) of x (a.size >= 1) as values of its dtype on the host,
    computed by tally in one pass (one wait; NaN for both when x holds a NaN)."""
    extremes = empty(a, (2,), a.dtype)
    _core.extrema(obj, extremes, handle, function)
    return tuple(read_back(a, extremes, handle))


def _fixed_point_bits(function, deterministic, bits):
    """The checked `fixed_point_bits` argument (None: derived from the values)."""
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"tally.{function}: argument 'fixed_point_bits' must be an int or None "
                        f"(got {type(bits).__name__})")
    if not deterministic:
        raise ValueError(f"tally.{function}: argument 'fixed_point_bits' applies only with deterministic=True")
    bits = operator.index(bits)
    if not -1022 <= bits <= 1023:
        raise ValueError(f"tally.{function}: argument 'fixed_point_bits' must lie in [-1022, 1023] (got {bits})")
    return bits


def histogram(x, bins=10, range=None, weights=None, *, deterministic=False, fixed_point_bits=None,  # noqa: A002
              check_weights=True, return_edges=True, stream=None):
    """Histogram of x with NumPy's rules (numpy.histogram without `density`).

    Parameters
    ----------
    x : array
        Samples (float32, float64; int32/int64 are converted to float64 and
        float16/bfloat16 to float32 (float64 with float64 weights), exact
        copies), contiguous, any shape (flattened). NaN and samples outside
        the bins are ignored.
    bins : int or sequence of edges
        An int: that many equal-width bins over `range`, with edges
        numpy.linspace(lo, hi, bins + 1) in float64. A sequence (or array) of
        at least 2 non-decreasing edges: bin k is [edges[k], edges[k+1]).
        As in NumPy the last bin is closed: a sample equal to the last edge
        counts in it.
    range : (lo, hi), optional
        For integer `bins`; default (x.min(), x.max()) (which waits for the
        GPU), widened by 0.5 either side when equal, as NumPy does.
    weights : array, optional
        One weight per sample, of x's dtype (float32 or float64); the counts
        then sum weights.
    deterministic : bool
        With weights: fixed-point sums (tally's histogram_options.deterministic),
        bitwise identical run to run and across backends; NaN/inf weights are
        then a ValueError (on the GPU this waits for the stream; see
        check_weights). Unweighted counts are integers and always exact.
    fixed_point_bits : int, optional
        With deterministic=True: the fixed-point scale s, each value v kept
        as round(v·2^s) (tally's histogram_options.fixed_point_bits,
        -1022 <= s <= 1023). Default (None): s is derived from the largest
        |value|, which costs one more read of the values; a caller who knows
        the values' range saves that read by giving s such that every
        |v|·2^s < 2^(62 - ceil(log2 n)), n the number of values. A value
        outside that contract is a ValueError naming the values' argument.
    check_weights : bool
        True (default): a deterministic weighted call reports a weight outside
        the fixed-point range (NaN, ±inf, too large) as a ValueError naming
        'weights', after the other weights were summed; on the GPU the call
        then waits for the stream (it reads an error flag back). False: no
        flag is read back, so the call does not wait for it, and gives the
        same bits as when checked: such weights count as 0, silently, on both
        backends. (No effect on other calls: they have nothing to report.)
    return_edges : bool
        Return (counts, edges) as NumPy does (default), or counts alone (no
        edges array is made: cheaper for small problems).
    stream : as in tally.reduce.

    Returns
    -------
    counts (int64, or the weights' dtype when weighted) and, unless
    return_edges=False, the float64 edges, both in x's library on x's device.

    Samples compare against the float64 edges; for float64 and integer x the
    counts equal numpy.histogram's exactly, for float32 x they equal
    numpy.histogram(x.astype(float64), ...) (NumPy itself rounds the edges to
    float32 there).
    """
    deterministic = _flag("histogram", "deterministic", deterministic)
    check_weights = _flag("histogram", "check_weights", check_weights)
    return_edges = _flag("histogram", "return_edges", return_edges)
    bits = _fixed_point_bits("histogram", deterministic, fixed_point_bits)
    infos, objects, handle = _prepare("histogram", stream, x=x, weights=weights)
    a = infos["x"]
    if infos["weights"] is not None:
        if infos["weights"].dtype not in ("float32", "float64"):
            raise TypeError(f"tally.histogram: argument 'weights' has dtype {infos['weights'].dtype}; "
                            "supported: float32, float64")
        if infos["weights"].shape != a.shape:
            raise ValueError(f"tally.histogram: argument 'weights' has shape {infos['weights'].shape}; "
                             f"it must match x's {a.shape}")
    count_dtype = "int64" if weights is None else infos["weights"].dtype
    half = a.dtype in ("float16", "bfloat16")
    if a.dtype in ("int32", "int64") or half or (a.dtype == "float32" and count_dtype == "float64"):
        # Integer samples are binned as float64 values (a converted copy: the
        # core's histograms take float32/float64 samples; NumPy converts them
        # too), and so are float32 samples with float64 weights (the core
        # pairs float32 samples with float32 weights only); float16/bfloat16
        # samples as float32 unless the weights are float64. Every conversion
        # is exact for what it bins (integers up to 2^53), so are the bins.
        x_float = as_dtype(a, "float32" if half and count_dtype != "float64" else "float64")
        a = classify(x_float, "x", "histogram")
        objects["x"] = export(a, handle, stream is not None)
    nbins = _bin_count(bins)
    if nbins is not None:
        if nbins < 1:
            raise ValueError(f"tally.histogram: argument 'bins' must be positive, when an integer (got {nbins})")
        if range is None:
            lo, hi = (0.0, 1.0) if a.size == 0 else map(float, _extrema("histogram", a, objects["x"], handle))
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise ValueError(f"tally.histogram: argument 'x' gives the non-finite range [{lo}, {hi}]; "
                                 "pass range=")
        else:
            try:
                lo, hi = (float(v) for v in range)
            except (TypeError, ValueError):
                raise TypeError("tally.histogram: argument 'range' must be a pair of numbers (lo, hi)") from None
            if lo > hi:
                raise ValueError(f"tally.histogram: argument 'range' must have lo <= hi (got {range})")
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise ValueError(f"tally.histogram: argument 'range' is not finite ({range})")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        counts = empty(a, (nbins,), count_dtype)
        _core.histogram_even(objects["x"], objects["weights"], counts, lo, hi, deterministic, bits, check_weights,
                             handle)
        if not return_edges:
            return counts
        return counts, from_host(a, np.linspace(lo, hi, nbins + 1))
    if np.ndim(bins) == 0:  # a float, a bool, a 0-d array: neither a count nor edges
        raise TypeError(f"tally.histogram: argument 'bins' must be an int or a 1-D array of bin edges "
                        f"(got {type(bins).__name__} {bins!r})")
    if range is not None:
        raise ValueError("tally.histogram: argument 'range' applies to integer bins only")
    edges = np.asarray(to_host(bins), dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError("tally.histogram: argument 'bins' must be an int or a 1-D sequence of at least 2 edges")
    if np.any(edges[:-1] > edges[1:]) or np.isnan(edges).any():
        raise ValueError("tally.histogram: argument 'bins' must increase monotonically, when an array")
    edges = np.ascontiguousarray(edges)
    device_edges = from_host(a, edges)
    counts = empty(a, (edges.size - 1,), count_dtype)
    edges_obj = export(classify(device_edges, "bins", "histogram"), handle, stream is not None)
    _core.histogram_edges(objects["x"], objects["weights"], edges_obj, counts, deterministic, bits, check_weights,
                          handle)
    return (counts, device_edges) if return_edges else counts


def _bin_count(bins):
    """histogram's bins as a count when it is one (an int, a NumPy integer, a
    0-d integer array or tensor), else None (edges, or what is neither)."""
    if isinstance(bins, bool) or np.ndim(bins) != 0:
        return None
    try:
        return operator.index(bins)
    except TypeError:
        return None


def bincount(x, weights=None, minlength=0, *, deterministic=False, fixed_point_bits=None, check_weights=True,
             stream=None):
    """Counts of each value in x, as numpy.bincount / torch.bincount.

    Parameters
    ----------
    x : 1-D array of int32 or int64, non-negative.
    weights : 1-D float32/float64 array of x's length, optional: sum weights
        instead of counting.
    minlength : int, a minimum length of the result.
    deterministic : bool
        With weights: fixed-point sums, bitwise identical run to run and
        across backends (NaN/inf weights are then a ValueError, see
        check_weights).
    fixed_point_bits : int, optional
        With deterministic=True: the fixed-point scale, given instead of
        derived (see tally.histogram).
    check_weights : bool
        As in tally.histogram: False skips the report of bad weights (and
        the wait for the GPU it costs); they then count as 0.
    stream : as in tally.reduce.

    Returns
    -------
    1-D array of length max(x.max() + 1, minlength) in x's library and on its
    device: int64 counts, or sums in the weights' dtype (NumPy's bincount
    returns float64 for any weights; tally keeps float32 weights in float32).

    Finding the length reads x.min() and x.max() back (one pass over x, one
    wait for the GPU), as torch.bincount does. Negative values: ValueError naming 'x'.
    """
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)):
        raise TypeError("tally.bincount: argument 'minlength' must be an int")
    if minlength < 0:
        raise ValueError(f"tally.bincount: argument 'minlength' must be non-negative (got {minlength})")
    deterministic = _flag("bincount", "deterministic", deterministic)
    check_weights = _flag("bincount", "check_weights", check_weights)
    bits = _fixed_point_bits("bincount", deterministic, fixed_point_bits)
    infos, objects, handle = _prepare("bincount", stream, x=x, weights=weights)
    a = infos["x"]
    if a.dtype not in ("int32", "int64"):
        raise TypeError(f"tally.bincount: argument 'x' has dtype {a.dtype}; supported: int32, int64")
    w = infos["weights"]
    if w is not None and w.dtype not in ("float32", "float64"):
        raise TypeError(f"tally.bincount: argument 'weights' has dtype {w.dtype}; supported: float32, float64")
    length = minlength
    if a.size > 0:
        lo, hi = map(int, _extrema("bincount", a, objects["x"], handle))
        if lo < 0:
            raise ValueError(f"tally.bincount: argument 'x' must be non-negative (its minimum is {lo})")
        length = max(length, hi + 1)
    counts = empty(a, (length,), "int64" if w is None else w.dtype)
    if a.size == 0:
        counts[...] = 0
        return counts
    _core.bincount(objects["x"], objects["weights"], counts, deterministic, bits, check_weights, handle)
    return counts


_SCATTER_OPS = ("sum", "prod", "amin", "amax")


def scatter_reduce(out, index, src, reduce="sum", *, deterministic=False, fixed_point_bits=None,  # noqa: A002
                   check_indices=True, stream=None):
    """out[index[i]] = reduce(out[index[i]], src[i]) for every i, in place.

    PyTorch's out.scatter_reduce_(0, index, src, reduce, include_self=True)
    for 1-D arrays; NumPy's ufunc.at (np.add.at, np.multiply.at,
    np.minimum.at, np.maximum.at) without negative indices.

    Parameters
    ----------
    out : 1-D contiguous array (float32, float64, int32, int64), updated in place.
    index : 1-D int32/int64 array, values in [0, len(out)).
    src : 1-D array of out's dtype and index's length.
    reduce : "sum", "prod", "amin" or "amax".
    deterministic : bool
        For float "sum": fixed-point sums (tally's histogram_options.
        deterministic), so out is bitwise identical run to run, for any
        order of updates and on both backends; a value outside the fixed-point
        range (NaN, inf, or too large) counts as 0 and, with check_indices=True,
        is then a ValueError naming 'src'. Integer sums, "amin" and "amax" are
        deterministic anyway; float "prod" has no such mode (ValueError).
    fixed_point_bits : int, optional
        With deterministic=True: the fixed-point scale, given instead of
        derived (see tally.histogram).
        (Ignored where no fixed-point sum is made: integers, "amin", "amax".)
    check_indices : bool
        True (default): checked. An index outside [0, len(out)) is a ValueError
        naming its position, and so (deterministic=True) is a value outside the
        fixed-point range, after the other updates were applied; on the GPU the
        call then waits for the stream (it reads an error flag back). False:
        never waits (so the call can be captured in a CUDA graph), also with
        deterministic=True, which gives the same bits as when checked:
        out-of-range indices are skipped and values outside the fixed-point
        range count as 0, silently.
    stream : as in tally.reduce.

    Returns out.
    """
    if reduce not in _SCATTER_OPS:
        raise ValueError(f"tally.scatter_reduce: argument 'reduce' is {reduce!r}; one of "
                         f"{', '.join(map(repr, _SCATTER_OPS))}")
    return _scatter("scatter_reduce", out, index, src, reduce, deterministic, fixed_point_bits, check_indices,
                    stream)


def scatter_add(out, index, src, *, deterministic=False, fixed_point_bits=None, check_indices=True, stream=None):
    """out[index[i]] += src[i] for every i, in place: np.add.at(out, index, src)
    or torch's out.scatter_add_(0, index, src) for 1-D arrays.
    tally.scatter_reduce(out, index, src, "sum", ...); see it for the
    parameters. Returns out."""
    return _scatter("scatter_add", out, index, src, "sum", deterministic, fixed_point_bits, check_indices, stream)


def _scatter(function, out, index, src, op, deterministic, fixed_point_bits, check_indices, stream):
    deterministic = _flag(function, "deterministic", deterministic)
    check_indices = _flag(function, "check_indices", check_indices)
    bits = _fixed_point_bits(function, deterministic, fixed_point_bits)
    infos, objects, handle = _prepare(function, stream, out=out, index=index, src=src)
    o = infos["out"]
    if deterministic and op == "prod" and o.dtype in ("float32", "float64"):
        raise ValueError(f"tally.{function}: argument 'deterministic' applies to sums; float products "
                         "have no deterministic mode")
    det = deterministic and op == "sum"  # min/max/integer sums are order-independent already
    _core.scatter(objects["out"], objects["index"], objects["src"], op, det, bits, check_indices, handle, function)
    return out


_INDEX_ADD_OPS = ("sum", "prod", "amin", "amax")
_INDEX_ADD_SUMS = ("automatic", "fixed_point", "ordered")


def index_add(out, index, src, *, reduce="sum", deterministic=False, sums="automatic",  # noqa: A002
              fixed_point_bits=None, check_indices=True, stream=None):
    """out[index[i], :] = reduce(out[index[i], :], src[i, :]) for every i, in place.

    Deterministic sums in brief (deterministic=True, reduce="sum"): the same
    bits on every run, on both backends and for any GPU grid, summed one of two
    ways, chosen from the sizes alone (sums="automatic"):
      - fixed point, below 16 MB of src or for rows under 32 bytes: every value
        rounded to a multiple of 2^-s and summed exactly, so the bits do not
        depend on the order of the rows either; an element whose sum is
        exactly 0 keeps its bits (-0 stays -0); a value outside the range
        (NaN, inf, or too large for the scale) counts as 0 and, with
        check_indices=True, is a ValueError;
      - ordered, from 16 MB of src with rows of 32 bytes or more: float32
        (float64 for float64) sums of fixed pieces of 256 rows combined by a
        fixed tree: no range limit and no value errors (NaN/inf propagate),
        and bits that depend on the order of the rows (permute them and the
        bits may change) but not on the run, the GPU grid or the backend.
    `sums` forces either.

    PyTorch's out.index_add_(0, index, src) (reduce="sum") and
    out.index_reduce_(0, index, src, "prod"/"amin"/"amax", include_self=True);
    np.add.at(out, index, src) for 2-D arrays (np.multiply.at, np.minimum.at,
    np.maximum.at). Rows of out that no index names, and the elements between
    rows of a strided out, are not touched (float16/bfloat16 sums on the GPU:
    they keep their bits, but a NaN beside a summed element may come back as
    another NaN).

    Parameters
    ----------
    out : array of rows (rows, columns), updated in place. dtypes float16,
        bfloat16, float32, float64. Its columns must be contiguous; its rows
        may be any distance apart (e.g. a column slice of a wider tensor).
        A 1-D out is rows of one element, and an N-D out (NumPy, PyTorch,
        CuPy) rows of out.shape[1:] elements, as in PyTorch's index_add_ along
        dim 0: the elements of a row must then be contiguous (a view of the
        array as (rows, elements), never a copy).
    index : 1-D int32/int64 array, one entry per row of src, values in
        [0, out.shape[0]).
    src : array of out's dtype with len(index) rows shaped as out's rows
        (src.shape[1:] == out.shape[1:]; contiguous columns, rows at any
        distance).
    reduce : "sum", "prod", "amin" or "amax".
    deterministic : bool
        For "sum": out is bitwise identical run to run and on both backends,
        summed as `sums` says (see above). "amin"/"amax" are deterministic
        anyway; "prod" has no such mode (ValueError).
    sums : "automatic", "fixed_point" or "ordered"
        How deterministic sums are computed (tally's index_add_sums):
        "fixed_point": tally's histogram_options.deterministic with
        n = len(index): every element of out gets the exact sum of its
        (quantised) rows rounded once, for any order of the rows;
        float16/bfloat16 sums are then correctly rounded. A NaN/inf (or too
        large) value in a row that lands counts as 0; with check_indices=True
        it is a ValueError naming 'src' after the other rows were applied (on
        the GPU this waits for the stream).
        "ordered": each index's rows summed in row order in float32 (float64
        for float64), in pieces of 256 of the rows sorted by (index, row)
        combined by tally's fixed tree, then added to out with one rounding:
        no range limit and no value errors (NaN/inf propagate), the bits
        depend on the order of the rows; as fast as the non-deterministic
        sorted path. "automatic" (default): "ordered" where the GPU sorts the
        rows (rows of 32 bytes or more, 16 MB of src or more) and no
        fixed_point_bits is given, "fixed_point" otherwise, on both backends.
    fixed_point_bits : int, optional
        With deterministic=True: the fixed-point scale, given instead of
        derived (see tally.histogram); implies fixed-point sums.
        (Ignored for "amin"/"amax".)
    check_indices : bool
        True (default): checked. An index outside [0, out.shape[0]) is a
        ValueError naming its position, and so is a fixed-point value outside
        the range, after the rest was applied; on the GPU the call then waits
        for the stream (it reads an error flag back). False: never waits (so
        the call can be captured in a CUDA graph), also with
        deterministic=True, which gives the same bits as when checked: bad
        rows are skipped and values outside the fixed-point range count as 0,
        silently.
    stream : as in tally.reduce.

    Sums and products of float32/float64 accumulate in their own type;
    float16/bfloat16 accumulate in float32: on the CPU every element is
    rounded once, on the GPU each group of equal indices among 32 rows is
    combined in float32 and applied by one atomic (rounding to the dtype once
    per group; products by a compare-and-swap loop). "prod" is exact where
    every partial product is representable (e.g. powers of two); otherwise
    its GPU bits depend on the order in which rows arrive.

    Returns out.

    Raises
    ------
    TypeError for unsupported or mismatched dtypes; ValueError for wrong
    shapes, non-contiguous columns, arrays on different devices, overlapping
    out and src/index, a bad `reduce`, "prod" with deterministic=True, or
    (checked) a bad index.
    """
    if reduce not in _INDEX_ADD_OPS:
        raise ValueError(f"tally.index_add: argument 'reduce' is {reduce!r}; one of "
                         f"{', '.join(map(repr, _INDEX_ADD_OPS))}")
    deterministic = _flag("index_add", "deterministic", deterministic)
    check_indices = _flag("index_add", "check_indices", check_indices)
    bits = _fixed_point_bits("index_add", deterministic, fixed_point_bits)
    if sums not in _INDEX_ADD_SUMS:
        raise ValueError(f"tally.index_add: argument 'sums' is {sums!r}; one of "
                         f"{', '.join(map(repr, _INDEX_ADD_SUMS))}")
    if sums != "automatic" and not deterministic:
        raise ValueError("tally.index_add: argument 'sums' applies only with deterministic=True")
    if deterministic and reduce == "prod":
        raise ValueError("tally.index_add: argument 'deterministic' applies to sums; products have no "
                         "deterministic mode")
    out_rows, src_rows = _as_rows(out, "out"), _as_rows(src, "src")
    if out_rows is not out or src_rows is not src:
        if tuple(out.shape[1:]) != tuple(src.shape[1:]):
            raise ValueError(f"tally.index_add: argument 'src' has rows of shape {tuple(src.shape[1:])}; "
                             f"they must match out's rows, {tuple(out.shape[1:])}")
    infos, objects, handle = _prepare("index_add", stream, out=out_rows, index=index, src=src_rows)
    det = deterministic and reduce == "sum"  # min/max are order-independent already
    _core.index_add(objects["out"], objects["index"], objects["src"], reduce, det, sums if det else "automatic",
                    bits, check_indices, handle)
    return out


def _as_rows(a, name):
    """index_add's `a` as a 2-D view (rows, elements a row): a 1-D or N-D
    NumPy, PyTorch or CuPy array reshaped without a copy (ValueError when the
    elements of a row are not contiguous); a 2-D array, anything else (the
    core names what is wrong with it), as it is."""
    shape = getattr(a, "shape", None)
    if shape is None or len(shape) in (0, 2):
        return a
    rows, width = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    module = type(a).__module__
    try:
        if isinstance(a, np.ndarray) or module.startswith("cupy"):
            view = a.view()
            view.shape = (rows, width)  # raises rather than copy
            return view
        if module.startswith("torch") or _is_torch_subclass(a):
            return a.view(rows, width)  # raises rather than copy
    except (AttributeError, RuntimeError, ValueError):
        raise ValueError(f"tally.index_add: argument '{name}' has shape {tuple(shape)} with rows whose elements "
                         "are not contiguous; tally needs each row's elements in one run (make it contiguous "
                         "first)") from None
    return a


# cg(...) is bound here once the conjugate-gradient issue has landed.
