"""torch custom ops over mixq's kernels: ``torch.ops.mixq.linear``.

The op has a real implementation for CPU and CUDA tensors (the same Python function: the
extension dispatches on the tensors' device) and a fake implementation for tracing, so it works
under torch.compile(fullgraph=True) and inside CUDA-graph capture. Its output and workspace come
from torch's allocator (the caching allocator on CUDA, the graph's pool while capturing); the C++
call allocates nothing, and runs on torch's current stream.
"""

from typing import Optional

import torch

from .. import _mixq
from . import _registry

__all__ = ["linear"]

try:  # the raw cudaStream_t of the current stream, without building a Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - CPU-only torch builds
    _raw_stream = None


def _stream_of(x):
    if not x.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(x.device.index if x.device.index is not None else
                           torch.cuda.current_device())
    return torch.cuda.current_stream(x.device).cuda_stream


@torch.library.custom_op("mixq::linear", mutates_args=(), device_types=("cpu", "cuda"))
def linear(x: torch.Tensor, handle: int, bias: Optional[torch.Tensor], clamp_lo: float,
           clamp_hi: float) -> torch.Tensor:
    """``clamp(x @ W.T + bias, clamp_lo, clamp_hi)`` with the prepared weight of `handle`.

    Args:
        x: ``[..., K]`` float32 / float16 / bfloat16 on the weight's device (rows are made
            contiguous if they are not).
        handle: a prepared weight's handle (``QuantLinear.handle``, or
            ``mixq.torch.register_prepared``).
        bias: optional ``[N]`` float tensor on the same device.
        clamp_lo, clamp_hi: output clamp (``-inf``, ``inf`` for none).

    Returns:
        ``[..., N]`` tensor of x's dtype.
    """
    w = _registry.get(handle)
    K, N = w.K, w.N
    x2 = x.reshape(-1, K)
    if x2.stride(-1) != 1 or (x2.shape[0] > 1 and x2.stride(0) < K):
        x2 = x2.contiguous()
    M = x2.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        nbytes = w.workspace_size(M)
        ws = torch.empty(nbytes, dtype=torch.uint8, device=x.device) if nbytes else None
        _mixq.linear(x2, w, y, bias, clamp_lo, clamp_hi, _stream_of(x), ws, 0)
    return y.view(*x.shape[:-1], N)


@linear.register_fake
def _linear_fake(x, handle, bias, clamp_lo, clamp_hi):
    n = _registry.get(handle).N
    return x.new_empty((*x.shape[:-1], n))
