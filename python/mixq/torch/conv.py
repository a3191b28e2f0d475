"""QuantConv2d, a drop-in ``nn.Conv2d`` replacement, and the ``torch.ops.mixq.conv2d`` op.

The weight is quantized along Ci in the KhKwCi order (``[Co][Kh][Kw][Ci]``: a block of codes is
channels of one tap, the order the CUDA implicit GEMMs read) and prepared once for the module's
device. The memory format follows torch's convolution: a channels_last input runs the NHWC
kernels (on Hopper the wgmma implicit GEMM) and gives a channels_last output; any other input
runs NCHW on a contiguous copy and gives a contiguous output. On Hopper a 16-bit NCHW call runs
the same NHWC kernels between two transposes (x into an NHWC copy, the NHWC output back), in a
workspace the op sizes with ``conv2d_workspace_size``: the NHWC time plus two passes over x and
y (3-6 microseconds at batch 1 on ResNet-50's layers, H100), where it used to run the sm_80
kernel at 2.4-4.1x the NHWC time (bench/results/cuda_conv.md).
``model.to(memory_format=torch.channels_last)`` still avoids the transposes.
"""

import torch

from .. import _mixq, core
from ..errors import InvalidArgumentError
from . import _registry
from ._prepared_module import PreparedModule
from .ops import _raw_stream

_entries = _registry._entries

__all__ = ["QuantConv2d", "conv2d", "conv2d_eager", "quantize_conv_host", "unsupported_reason"]

_compiling = torch.compiler.is_compiling


def _pair(v, arg):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(t, int) for t in v):
        raise InvalidArgumentError(f"{arg}: expected an int or a pair of ints, got {v!r}")
    return v


def _channels_last(x):
    """True for a 4-D tensor laid out NHWC (and not also plain contiguous, e.g. C = 1)."""
    return not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)


_CODES = _mixq.dtype_codes
_DTYPE_CODE = {torch.float32: _CODES["f32"], torch.float16: _CODES["f16"],
               torch.bfloat16: _CODES["bf16"], torch.int8: _CODES["i8"]}
_DTYPE_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int8: "i8"}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _output_size(H, W, kh, kw, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise InvalidArgumentError(f"stride {tuple(stride)} and dilation {tuple(dilation)} must be "
                                   f">= 1, padding {tuple(padding)} >= 0")
    Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if Ho < 1 or Wo < 1:
        raise InvalidArgumentError(
            f"x: a {H}x{W} image gives a {Ho}x{Wo} output with kernel {kh}x{kw}, stride "
            f"{tuple(stride)}, padding {tuple(padding)}, dilation {tuple(dilation)}")
    return Ho, Wo


def conv2d_eager(x, handle, bias, stride, padding, dilation, clamp_lo, clamp_hi):
    """The op's kernel (also called directly by QuantConv2d outside tracing): sizes and the
    workspace from the handle's entry, then one extension call on raw pointers (importing
    tensors through DLPack cost ~11 us a call here, as ops.linear_eager explains)."""
    e = _entries.get(handle) or _registry.entry(handle)
    if e.conv is None:
        raise InvalidArgumentError(f"handle: {handle} is a linear weight; prepare it with "
                                   "conv=(Ci, Kh, Kw)")
    if x.dim() != 4:
        raise InvalidArgumentError(f"x: expected a 4-D [B, Ci, H, W] tensor, got shape {tuple(x.shape)}")
    nhwc = _channels_last(x)
    if not nhwc:
        x = x.contiguous()
    B, Ci, H, W = x.shape
    ci, kh, kw = e.conv
    if Ci != ci:
        raise InvalidArgumentError(f"x: {Ci} input channels (shape {tuple(x.shape)}), the weight "
                                   f"takes {ci}")
    Ho, Wo = _output_size(H, W, kh, kw, stride, padding, dilation)
    code = _DTYPE_CODE.get(x.dtype)
    if code is None:
        raise InvalidArgumentError(f"x: dtype {x.dtype} is not one mixq.torch.conv2d takes "
                                   "(float32, float16, bfloat16; int8 for int8-per-tensor weights)")
    device = x.get_device()
    if device != e.device:
        where = "the host" if e.device < 0 else f"cuda:{e.device}"
        raise InvalidArgumentError(f"x: on {x.device}, but the weight is prepared for {where}")
    Co = e.N
    y_dtype = x.dtype if x.dtype in _FLOATS else torch.float32
    if nhwc:
        y = x.new_empty_strided((B, Co, Ho, Wo), (Ho * Wo * Co, 1, Wo * Co, Co), dtype=y_dtype)
    else:
        y = x.new_empty((B, Co, Ho, Wo), dtype=y_dtype)
    M = B * Ho * Wo
    if M == 0:
        return y
    if bias is None:
        b_ptr, b_code, b_dev = 0, 0, device
    else:
        if bias.dim() != 1 or bias.shape[0] != Co or bias.stride(0) != 1 or bias.dtype not in _FLOATS:
            raise InvalidArgumentError(f"bias: expected a contiguous float [{Co}] vector, got "
                                       f"{bias.dtype} {tuple(bias.shape)}")
        b_ptr, b_code, b_dev = bias.data_ptr(), _DTYPE_CODE[bias.dtype], bias.get_device()
    ws_bytes = e.conv_workspace_bytes(B, H, W, _DTYPE_NAME[x.dtype], "nhwc" if nhwc else "nchw",
                                      stride, padding, dilation)
    ws = x.new_empty(ws_bytes, dtype=torch.uint8) if ws_bytes else None
    _mixq.conv2d_raw(e.prepared, x.data_ptr(), code, B, Ci, H, W, y.data_ptr(), _DTYPE_CODE[y_dtype],
                     Ho, Wo, "nhwc" if nhwc else "nchw", device, b_ptr, b_code, b_dev, clamp_lo,
                     clamp_hi, stride[0], stride[1], padding[0], padding[1], dilation[0],
                     dilation[1], _raw_stream(device) if device >= 0 else 0,
                     ws.data_ptr() if ws is not None else 0, ws_bytes)
    return y


def _conv2d_fake(x, handle, bias, stride, padding, dilation, clamp_lo, clamp_hi):
    e = _registry.entry(handle)
    _, kh, kw = e.prepared.conv_geometry
    B, _, H, W = x.shape
    Ho = (H + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    Wo = (W + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    dtype = x.dtype if x.dtype in (torch.float32, torch.float16, torch.bfloat16) else torch.float32
    Co = e.N
    if _channels_last(x):
        return x.new_empty_strided((B, Co, Ho, Wo), (Ho * Wo * Co, 1, Wo * Co, Co), dtype=dtype)
    return x.new_empty((B, Co, Ho, Wo), dtype=dtype)


_lib = torch.library.Library("mixq", "FRAGMENT")
_lib.define("conv2d(Tensor x, int handle, Tensor? bias, int[2] stride, int[2] padding, "
            "int[2] dilation, float clamp_lo, float clamp_hi) -> Tensor")
for _key in ("CPU", "CUDA"):
    _lib.impl("conv2d", conv2d_eager, _key)
torch.library.register_fake("mixq::conv2d", _conv2d_fake, lib=_lib)

conv2d = torch.ops.mixq.conv2d
conv2d.__doc__ = """``torch.ops.mixq.conv2d(x, handle, bias, stride, padding, dilation, clamp_lo,
clamp_hi)``: the 2-D convolution of `x` ``[B, Ci, H, W]`` (contiguous or channels_last) with the
prepared convolution weight of `handle` (``QuantConv2d.handle``), plus bias, clamped. Returns
``[B, Co, Ho, Wo]`` in x's memory format and dtype (float32 for int8 x)."""


def _same_padding(kernel, dilation):
    """Each side's padding for padding='same' (even totals: unsupported_reason checks)."""
    return tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation))


def unsupported_reason(conv):
    """Why mixq cannot run the ``nn.Conv2d`` `conv` (None when it can)."""
    if conv.groups != 1:
        return f"groups = {conv.groups}; mixq convolutions are dense (groups = 1)"
    if conv.padding_mode != "zeros":
        return f"padding_mode '{conv.padding_mode}'; mixq pads with zeros only"
    if conv.padding == "same" and any(d * (k - 1) % 2 for k, d in zip(conv.kernel_size, conv.dilation)):
        return (f"padding='same' with kernel {tuple(conv.kernel_size)} and dilation "
                f"{tuple(conv.dilation)} is uneven between the sides; mixq pads both sides alike")
    return None


def quantize_conv_host(conv, scheme):
    """The :class:`mixq.QuantizedWeight` of ``conv.weight`` ``[Co, Ci, Kh, Kw]`` in the KhKwCi
    order ``[Co, Kh * Kw * Ci]`` (blocks of `scheme` run along Ci), quantized on the host."""
    w = conv.weight.detach().to("cpu", torch.float32)
    co = w.shape[0]
    return core.quantize(w.permute(0, 2, 3, 1).reshape(co, -1).contiguous(), scheme)


class QuantConv2d(PreparedModule):
    """``y = conv2d(x, W) + bias`` (then an optional clamp) with W quantized by mixq.

    ``forward`` calls ``torch.ops.mixq.conv2d``, so the module traces under
    ``torch.compile(fullgraph=True)``. Moving the module re-prepares the weight for the new
    device from the kept quantized weight, as for :class:`QuantLinear`.

    Attributes:
        in_channels, out_channels, kernel_size, stride, padding, dilation: as ``nn.Conv2d``'s
            (groups 1, zero padding).
        qweight: the :class:`mixq.QuantizedWeight` ``[Co, Kh * Kw * Ci]`` (KhKwCi order).
        prepared, handle, bias: as for :class:`QuantLinear`.
    """

    def __init__(self, qweight, in_channels, kernel_size, bias=None, *, stride=1, padding=0,
                 dilation=1, device="cpu", backend="auto", act="none", clamp=None,
                 keep_quantized=True, **prepare_kwargs):
        """Prepare `qweight` (``[Co, Kh * Kw * Ci]``, KhKwCi order) as a convolution weight.

        Args:
            qweight: a :class:`mixq.QuantizedWeight` (see :func:`quantize_conv_host`).
            in_channels: Ci.
            kernel_size: Kh, Kw (int or pair).
            bias: optional ``[Co]`` tensor.
            stride, padding, dilation: ints or pairs.
            device, backend, act, clamp, keep_quantized, prepare_kwargs: as for
                :class:`QuantLinear` (act 'none', or 'int8-per-tensor' with its input_quant
                and output_quant for int8 tensors).
        """
        super().__init__()
        kh, kw = _pair(kernel_size, "kernel_size")
        if qweight.K != kh * kw * in_channels:
            raise InvalidArgumentError(
                f"qweight: K = {qweight.K} is not Kh * Kw * in_channels = {kh} * {kw} * "
                f"{in_channels}")
        self.in_channels = in_channels
        self.out_channels = qweight.N
        self.kernel_size = (kh, kw)
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        prepare_kwargs = dict(prepare_kwargs, conv=(in_channels, kh, kw), conv_order="khkwci")
        self._init_prepared(qweight, bias, device, backend, act, clamp, keep_quantized, prepare_kwargs)

    @classmethod
    def from_conv(cls, conv, scheme, *, backend="auto", act="none", device=None, **kwargs):
        """Quantize an ``nn.Conv2d`` with `scheme` (blocks along Ci: e.g. 'w4g64' for Ci a
        multiple of 64; per output channel, e.g. 'w8pc', for any Ci).

        Raises InvalidArgumentError for grouped convolutions, padding modes other than
        'zeros' and 'same' padding that would be uneven."""
        reason = unsupported_reason(conv)
        if reason:
            raise InvalidArgumentError(f"conv: {reason}")
        padding = conv.padding
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            padding = _same_padding(conv.kernel_size, conv.dilation)
        device = torch.device(device) if device is not None else conv.weight.device
        return cls(quantize_conv_host(conv, scheme), conv.in_channels, conv.kernel_size, conv.bias,
                   stride=conv.stride, padding=padding, dilation=conv.dilation, device=device,
                   backend=backend, act=act, **kwargs)

    def forward(self, x):
        """``torch.ops.mixq.conv2d`` (its kernel directly in eager mode without autograd)."""
        bias = self._buffers["bias"]
        args = (x, self.handle, bias, self.stride, self.padding, self.dilation, self.clamp_lo,
                self.clamp_hi)
        if _compiling() or (x.requires_grad and torch.is_grad_enabled()):
            return torch.ops.mixq.conv2d(*args)
        return conv2d_eager(*args)

    def dequantized_weight(self, dtype=torch.float32):
        """The ``[Co, Ci, Kh, Kw]`` weight the kernels use (dequantized on the host), as a CPU
        tensor of `dtype`; needs the kept quantized weight."""
        kh, kw = self.kernel_size
        w = self._dequantized(dtype)
        return w.reshape(self.out_channels, kh, kw, self.in_channels).permute(0, 3, 1, 2).contiguous()

    def kernel_name(self, pixels=1):
        """The kernel a call with `pixels` output pixels (B * Ho * Wo) runs (NHWC)."""
        return self.prepared.kernel_name(pixels)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"bias={self.bias is not None}, weight={self.scheme_desc}, "
                f"backend={self.prepared.backend}, act={self.prepared.act}")
