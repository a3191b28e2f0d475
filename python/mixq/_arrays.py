"""Framework-neutral helpers: which library an array comes from, where it lives, how to
allocate a like-placed output or workspace, and which CUDA stream is the caller's current one.

Nothing here copies an input: numpy, torch and CuPy arrays are handed to the extension as they
are (DLPack / buffer protocol); only outputs and workspaces are created, by the input's own
library, on the input's device.
"""

import sys

import numpy as np

# mixq dtype names (the C++ dtype_name) of each library's dtypes, keyed by the library's name.
_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
                 "int8": np.int8, "uint8": np.uint8, "int32": np.int32}


def require_array(a, arg):
    """Raise mixq.InvalidArgumentError naming `arg` unless `a` looks like an array (has a
    shape); the extension checks the rest (dtype, device, strides)."""
    if not hasattr(a, "shape") or not hasattr(a, "dtype"):
        from .errors import InvalidArgumentError
        raise InvalidArgumentError(
            f"mixq: invalid argument: {arg}: cannot view a {type(a).__name__} as an array "
            "without a copy (expected a numpy array, a torch tensor, a CuPy array or another "
            "DLPack / array-interface object)")


def framework(a):
    """'torch', 'cupy', 'numpy' or 'other' for an array object (no import of torch/cupy)."""
    mod = type(a).__module__.split(".", 1)[0]
    if mod == "torch":
        return "torch"
    if mod == "cupy":
        return "cupy"
    if isinstance(a, np.ndarray):
        return "numpy"
    return "other"


def is_cuda(a):
    """True when the array lives in GPU memory (DLPack device type CUDA or CUDA managed)."""
    fw = framework(a)
    if fw == "torch":
        return a.is_cuda
    if fw == "cupy":
        return True
    if fw == "numpy":
        return False
    if hasattr(a, "__dlpack_device__"):
        return a.__dlpack_device__()[0] in (2, 13)
    return hasattr(a, "__cuda_array_interface__")


def device_index(a):
    """CUDA ordinal of a GPU array (0 for host arrays)."""
    fw = framework(a)
    if fw == "torch":
        return (a.device.index or 0) if a.is_cuda else 0
    if fw == "cupy":
        return a.device.id
    if hasattr(a, "__dlpack_device__"):
        kind, index = a.__dlpack_device__()
        return index if kind in (2, 13) else 0
    return 0


def dtype_name(a):
    """The array's dtype as a plain name ('float32', 'bfloat16', ...)."""
    return str(a.dtype).replace("torch.", "")


def detach(a):
    """torch tensors that require grad cannot be exported through DLPack; mixq never
    differentiates, so hand over the detached view (same memory)."""
    if framework(a) == "torch" and a.requires_grad:
        return a.detach()
    return a


def empty_like_place(a, shape, dtype):
    """An uninitialised array of `shape` / `dtype` (a name such as 'float32' or 'bfloat16')
    made by `a`'s library on `a`'s device."""
    fw = framework(a)
    if fw == "torch":
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=a.device)
    if fw == "cupy":
        import cupy
        with cupy.cuda.Device(a.device.id):
            return cupy.empty(shape, dtype=dtype)
    if is_cuda(a):
        raise TypeError(f"cannot allocate an output next to a {type(a).__name__} on the GPU: "
                        "pass out= (and workspace=) explicitly")
    if dtype not in _NUMPY_DTYPES:
        raise TypeError(f"numpy has no {dtype}: pass out= explicitly (e.g. a torch tensor)")
    return np.empty(shape, dtype=_NUMPY_DTYPES[dtype])


def current_stream(a, stream=None):
    """The CUDA stream handle (an int) to enqueue work on for GPU array `a`.

    `stream` may be an int (a cudaStream_t), a torch.cuda.Stream (``.cuda_stream``), a CuPy
    stream (``.ptr``) or None: then the current stream of `a`'s own library on `a`'s device
    (torch's or CuPy's), or 0 (the legacy default stream) for other libraries. Host arrays: 0.
    """
    if stream is not None:
        if isinstance(stream, int):
            return stream
        if hasattr(stream, "cuda_stream"):
            return int(stream.cuda_stream)
        if hasattr(stream, "ptr"):
            return int(stream.ptr)
        raise TypeError(f"stream: expected an int, a torch.cuda.Stream or a CuPy stream, got "
                        f"{type(stream).__name__}")
    if not is_cuda(a):
        return 0
    fw = framework(a)
    if fw == "torch":
        import torch
        return torch.cuda.current_stream(a.device).cuda_stream
    if fw == "cupy" and "cupy" in sys.modules:
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0
