"""torch custom ops over mixq's kernels: ``torch.ops.mixq.linear``.

The op is defined with ``torch.library.Library`` (a schema, one Python kernel registered for the
CPU and CUDA dispatch keys, and a fake implementation for tracing), so it works under
``torch.compile(fullgraph=True)`` and inside CUDA-graph capture. Its output and workspace come from
torch's allocator (the caching allocator on CUDA, the graph's private pool while capturing); the
C++ call allocates nothing and runs on torch's current stream, without host synchronisation.

Host cost. ``torch.library.custom_op`` wraps its kernel in Python layers that cost ~25 us per
call, and importing a tensor through DLPack costs ~3.5 us per tensor (torch builds the capsule
in Python); a decode step makes hundreds of linear calls. So the op is a plain
``Library.impl`` kernel (the dispatcher alone, ~2-3 us) that hands raw pointers and strides to
the extension (``_mixq.linear_rows``), and ``QuantLinear`` calls that kernel directly in eager
mode (``linear_eager``), keeping the dispatcher for tracing.
"""

from typing import Optional

import torch

from .. import _mixq
from ..errors import InvalidArgumentError
from . import _registry

__all__ = ["linear", "linear_eager"]

_CODES = _mixq.dtype_codes
_DTYPE_CODE = {torch.float32: _CODES["f32"], torch.float16: _CODES["f16"],
               torch.bfloat16: _CODES["bf16"]}

_entries = _registry._entries

try:  # the raw cudaStream_t of the current stream, without building a Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - CPU-only torch builds (no CUDA tensor reaches it)
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _dtype_code(t, arg):
    code = _DTYPE_CODE.get(t.dtype)
    if code is None:
        raise InvalidArgumentError(f"{arg}: dtype {t.dtype} is not one mixq.torch.linear takes (float32, "
                        "float16, bfloat16)")
    return code


def _call_plan(e, M, x):
    """(workspace bytes, x's dtype code) of a call with M rows of x's dtype, kept on the entry:
    a decode loop repeats the same few (M, dtype) pairs."""
    plan = e.plans[(M, x.dtype)] = (e.workspace_bytes(M), _dtype_code(x, "x"))
    return plan


def linear_eager(x: torch.Tensor, handle: int, bias: Optional[torch.Tensor], clamp_lo: float,
                 clamp_hi: float) -> torch.Tensor:
    """The op's kernel (also called directly by QuantLinear outside tracing).

    Per call this is a handful of attribute reads, one allocation and one extension call: every
    fact that does not change between calls (K, N, the device, the workspace size and dtype
    code per M) is looked up in the handle's entry.
    """
    e = _entries.get(handle) or _registry.entry(handle)
    K = e.K
    if x.dim() == 2 and x.shape[1] == K:
        x2 = x
    else:
        if x.shape[-1] != K:
            raise InvalidArgumentError(f"x: last dimension {x.shape[-1]} does not match the weight's "
                            f"in_features K = {K} (x shape {tuple(x.shape)})")
        x2 = x.reshape(-1, K)
    ldx, inner = x2.stride()
    if inner != 1 or ldx < K:
        x2 = x2.contiguous()
        ldx = K
    device = x2.get_device()  # -1 for host memory, else the CUDA ordinal
    if device != e.device:
        where = "the host" if e.device < 0 else f"cuda:{e.device}"
        raise InvalidArgumentError(f"x: on {x.device}, but the weight is prepared for {where}")
    M = x2.shape[0]
    N = e.N
    y = x2.new_empty((M, N))
    if M:
        ws_bytes, code = e.plans.get((M, x2.dtype)) or _call_plan(e, M, x2)
        if bias is None:
            b_ptr, b_code, b_dev = 0, 0, device
        else:
            b_ptr, b_code, b_dev = bias.data_ptr(), _dtype_code(bias, "bias"), bias.get_device()
            if bias.dim() != 1 or bias.shape[0] != N or bias.stride(0) != 1:
                raise InvalidArgumentError(f"bias: expected a contiguous [{N}] vector, got shape "
                                f"{tuple(bias.shape)}")
        ws = x2.new_empty(ws_bytes, dtype=torch.uint8) if ws_bytes else None
        _mixq.linear_rows(e.prepared, x2.data_ptr(), code, M, K, ldx, y.data_ptr(), N, N, device,
                          b_ptr, b_code, b_dev, clamp_lo, clamp_hi,
                          _raw_stream(device) if device >= 0 else 0,
                          ws.data_ptr() if ws is not None else 0, ws_bytes)
    return y if x.dim() == 2 else y.view(*x.shape[:-1], N)


def _linear_fake(x, handle, bias, clamp_lo, clamp_hi):
    n = _registry.entry(handle).N
    return x.new_empty((*x.shape[:-1], n))


_lib = torch.library.Library("mixq", "DEF")
_lib.define("linear(Tensor x, int handle, Tensor? bias, float clamp_lo, float clamp_hi) -> Tensor")
_lib.impl("linear", linear_eager, "CPU")
_lib.impl("linear", linear_eager, "CUDA")
torch.library.register_fake("mixq::linear", _linear_fake, lib=_lib)

linear = torch.ops.mixq.linear
linear.__doc__ = """``torch.ops.mixq.linear(x, handle, bias, clamp_lo, clamp_hi)``:
``clamp(x @ W.T + bias, clamp_lo, clamp_hi)`` with the prepared weight of `handle`.

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
