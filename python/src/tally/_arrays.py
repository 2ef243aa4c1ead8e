"""The caller's array library: recognising arrays, their dtypes and devices,
finding the stream to run on, and allocating outputs in the same library
(a torch tensor for torch input, cupy for cupy, numpy for numpy).

The compiled core (tally._core) takes arrays through DLPack or the buffer
protocol and never allocates; this module decides everything that depends on
which library the caller uses.
"""

from __future__ import annotations

import sys

import numpy as np

from . import _core

NUMPY, TORCH, CUPY, OTHER = "numpy", "torch", "cupy", "other"


class Array:
    """One argument of a call: the object to hand to the core, its library,
    dtype name ('float32', ...), shape, and whether it lives on a GPU."""

    __slots__ = ("obj", "kind", "dtype", "shape", "gpu", "device", "source", "pending_stream")

    def __init__(self, obj, kind, dtype, shape, gpu, device, source, pending_stream=None):
        self.obj = obj  # what the core receives (the array, or a DLPack capsule)
        self.kind = kind
        self.dtype = dtype
        self.shape = tuple(shape)
        self.gpu = gpu
        # The library's own device object (cupy Device, ...); for torch the
        # CUDA device index (-1 on the CPU), which is cheaper to get.
        self.device = device
        self.source = source  # the caller's array itself
        # __cuda_array_interface__ only: the producer's stream, which ours must wait for.
        self.pending_stream = pending_stream

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


# dtype object -> its name ('float32', ...), filled as dtypes are met: NumPy
# computes dtype.name in Python (~2 µs, most of a small call's time), torch
# has no name attribute at all.
_DTYPE_NAMES = {}


def _dtype_name(x, kind):
    dt = x.dtype
    try:
        return _DTYPE_NAMES[dt]
    except KeyError:
        pass
    except TypeError:  # an unhashable dtype object: named every time
        return _name_of_dtype(dt, kind)
    name = _DTYPE_NAMES[dt] = _name_of_dtype(dt, kind)
    return name


def _name_of_dtype(dt, kind):
    if kind == TORCH:
        return str(dt).rpartition(".")[2]
    name = getattr(dt, "name", None)
    return name if isinstance(name, str) else str(dt)


def classify(x, name, function):
    """Array for argument `name` of tally.`function`, or TypeError naming it."""
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:  # DLPack carries no byte order: NumPy refuses to export these
            raise TypeError(f"tally.{function}: argument '{name}' has a non-native byte order (dtype "
                            f"{x.dtype.str}); convert it first, e.g. x.astype(x.dtype.newbyteorder('='))")
        return Array(x, NUMPY, _dtype_name(x, NUMPY), x.shape, False, "cpu", x)
    module = type(x).__module__
    if module.startswith("cupy"):
        return Array(x, CUPY, _dtype_name(x, CUPY), x.shape, True, x.device, x)
    if module.startswith("torch") or _is_torch_subclass(x):
        if x.requires_grad:
            # torch refuses to export such tensors; tally's results carry no gradient.
            x = x.detach()
        gpu = x.is_cuda
        return Array(x, TORCH, _dtype_name(x, TORCH), x.shape, gpu, x.get_device() if gpu else -1, x)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        device_type, _ = x.__dlpack_device__()
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            dtype, shape = _dtype_name(x, OTHER), x.shape
        else:
            # A producer that speaks DLPack alone: its dtype and shape are read
            # from one export of its own (a GPU producer orders its work before
            # the legacy default stream for it, as the protocol asks).
            dtype, shape = _core.describe(x, function, name)
        return Array(x, OTHER, dtype, shape, device_type in (2, 13), getattr(x, "device", None), x)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cuda_array_interface(x, name, function)
    raise TypeError(
        f"tally.{function}: argument '{name}' must be an array (NumPy, PyTorch, CuPy, or any object with "
        f"__dlpack__ or __cuda_array_interface__), got {type(x).__name__}")


def _is_torch_subclass(x):
    """Whether x is a torch.Tensor of a subclass defined outside torch (its
    module does not name torch; tally never imports torch itself)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


_CAI_TYPES = {"<f2": "float16", "<f4": "float32", "<f8": "float64", "<i4": "int32", "<i8": "int64"}


def _from_cuda_array_interface(x, name, function):
    """Wraps an object that speaks only __cuda_array_interface__ (Numba, ...)
    as a DLPack-capable view (no copy) through the core."""
    cai = x.__cuda_array_interface__
    dtype = _CAI_TYPES.get(cai["typestr"])
    if dtype is None:
        raise TypeError(f"tally.{function}: argument '{name}' has an unsupported dtype ({cai['typestr']}); "
                        "tally takes float16, float32, float64, int32 and int64 arrays")
    wrapped = _core.wrap_cuda_array(cai["data"][0], list(cai["shape"]),
                                    None if cai.get("strides") is None else list(cai["strides"]),
                                    dtype, x)
    # Work pending on the producer's stream must finish before ours starts (CAI v3).
    return Array(wrapped, OTHER, dtype, cai["shape"], True, None, x, cai.get("stream"))


def current_stream(a):
    """The stream handle the caller's library considers current for a's device."""
    if a.kind == TORCH:
        return _torch_current_stream()(a.device)
    if a.kind == CUPY:
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0  # other DLPack producers: the legacy default stream


_torch_stream_getter = None


def _torch_current_stream():
    """f(device index) -> torch's current stream handle on that device."""
    global _torch_stream_getter
    if _torch_stream_getter is None:
        import torch
        # torch._C's getter is the fast path (current_stream() builds a Stream
        # object); the same value as torch.cuda.current_stream(i).cuda_stream.
        _torch_stream_getter = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda index: torch.cuda.current_stream(index).cuda_stream)
    return _torch_stream_getter


def stream_handle(stream, function):
    """An int handle from `stream=`: an int, or an object with .cuda_stream
    (PyTorch) or .ptr (CuPy)."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"tally.{function}: argument 'stream' must be an int handle or a stream object with "
                    f".cuda_stream or .ptr, got {type(stream).__name__}")


def resolve_stream(a, stream, function):
    """The stream a call on array a runs on (0 on the CPU backend)."""
    if not a.gpu:
        return 0
    if stream is None:
        return current_stream(a)
    return stream_handle(stream, function)


def order_after_producer(arrays, stream):
    """Makes `stream` wait for the producer streams that __cuda_array_interface__
    arrays name (the array libraries handle this themselves under DLPack)."""
    for a in arrays:
        if a is not None and a.pending_stream is not None and a.pending_stream != stream:
            _core.stream_wait(stream, a.pending_stream)


def export(a, stream, explicit):
    """What the core receives for input a: the array itself when the call runs
    on the library's current stream (nothing to order), else a DLPack capsule
    made with the consumer's stream, so the producer orders its pending work
    before that stream (the DLPack stream protocol)."""
    if not (a.gpu and explicit) or a.kind == NUMPY:
        return a.obj
    # DLPack names the legacy default stream 1; CUDA's handle for it is 0.
    return a.obj.__dlpack__(stream=stream if stream != 0 else 1)


def empty(like, shape, dtype):
    """An uninitialised array of `dtype` (a name) in like's library, on like's
    device; for other producers, in their array-API namespace, else CuPy (GPU,
    where installed) or NumPy (host)."""
    if like.kind == NUMPY or (not like.gpu and like.kind not in (TORCH, OTHER)):
        return np.empty(shape, dtype=dtype)
    if like.kind == TORCH:
        import torch
        return like.source.new_empty(shape, dtype=getattr(torch, dtype))
    if like.kind == CUPY:
        import cupy
        with like.device:
            return cupy.empty(shape, dtype=dtype)
    if like.device is None and like.gpu:  # __cuda_array_interface__ producers: answer with CuPy where installed
        try:
            import cupy
            return cupy.empty(shape, dtype=dtype)
        except ImportError:
            pass
    namespace = getattr(like.source, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        return xp.empty(shape, dtype=getattr(xp, dtype), device=like.device)
    if not like.gpu:  # a host producer without an array namespace: answer with NumPy
        return np.empty(shape, dtype=dtype)
    raise TypeError(f"tally cannot allocate an output for a {type(like.source).__name__}; "
                    "pass an array of NumPy, PyTorch, CuPy or an array-API library")


def as_dtype(a, dtype):
    """A converted copy of a's array in its own library."""
    x = a.source
    if a.kind == TORCH:
        import torch
        return x.to(getattr(torch, dtype))
    return x.astype(dtype)


def from_host(like, values):
    """A copy of the NumPy array `values` in like's library and on its device
    (`values` itself for a host producer without an array-API namespace)."""
    if like.kind == NUMPY or (not like.gpu and like.kind not in (TORCH, OTHER)):
        return values
    if like.kind == TORCH:
        import torch
        return torch.from_numpy(values).to(like.source.device)
    if like.kind == CUPY:
        import cupy
        with like.device:
            return cupy.asarray(values)
    namespace = getattr(like.source, "__array_namespace__", None)
    if namespace is None and not like.gpu:  # a host producer without an array namespace: NumPy, as empty()
        return values
    xp = like.source.__array_namespace__()
    return xp.asarray(values, device=like.device)


def read_back(a, x, stream):
    """x (made by a call on `stream`) as a NumPy array. The copy runs on the
    library's current stream, so that stream first waits for ours."""
    if a.gpu and a.kind in (TORCH, CUPY) and stream != current_stream(a):
        _core.stream_wait(current_stream(a), stream)
    return to_host(x)


def to_host(x):
    """x as a NumPy array (copied from the GPU where needed; waits for it)."""
    if isinstance(x, np.ndarray):
        return x
    module = type(x).__module__
    if module.startswith("torch") or _is_torch_subclass(x):
        return x.detach().cpu().numpy()
    if module.startswith("cupy"):
        return x.get()
    return np.asarray(x)
