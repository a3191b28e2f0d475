"""QuantLinear: a drop-in ``nn.Linear`` replacement holding a mixq prepared weight."""

import torch

from .. import core
from . import _registry
from . import ops as _ops  # registers torch.ops.mixq.linear
from ._prepared_module import CLAMPS as _CLAMPS, PreparedModule

__all__ = ["QuantLinear", "register_prepared", "quantize_host"]

_compiling = torch.compiler.is_compiling


def quantize_host(linear, scheme):
    """The :class:`mixq.QuantizedWeight` of ``linear.weight`` (copied to the host, quantized
    there; the quantizer releases the GIL, so several layers may be quantized on threads)."""
    return core.quantize(linear.weight.detach().to("cpu").contiguous(), scheme)


def register_prepared(prepared):
    """Handle for calling ``torch.ops.mixq.linear`` on a PreparedWeight directly (kept until
    ``mixq.torch.release_prepared(handle)``)."""
    return _registry.register(prepared)


class QuantLinear(PreparedModule):
    """``y = x @ W.T + bias`` (then an optional clamp) with W quantized by mixq.

    The weight is prepared once for the module's device; ``forward`` calls the
    ``torch.ops.mixq.linear`` custom op, so the module works under
    ``torch.compile(fullgraph=True)`` and CUDA graphs. Moving the module (``.to``, ``.cuda``)
    re-prepares the weight for the new device from the host copy of the quantized weight
    (kept when ``keep_quantized=True``, the default). The quantized weight is not part of
    ``state_dict``; save it with ``mixq.save`` and load it with ``mixq.torch.load_checkpoint_``.

    Attributes:
        in_features, out_features: K and N.
        qweight: the :class:`mixq.QuantizedWeight` (None when not kept).
        prepared: the :class:`mixq.PreparedWeight` in use.
        handle: the prepared weight's handle for ``torch.ops.mixq.linear``.
        bias: ``[N]`` buffer or None.
    """

    def __init__(self, qweight, bias=None, *, device="cpu", backend="auto", act="none",
                 clamp=None, keep_quantized=True, **prepare_kwargs):
        """Prepare `qweight` for `device`.

        Args:
            qweight: a :class:`mixq.QuantizedWeight` ``[N, K]``.
            bias: optional ``[N]`` tensor (copied to `device`).
            device: where the module runs ('cpu', 'cuda', 'cuda:1', torch.device).
            backend: 'auto' (the device's backend), 'cpu', 'ref' or 'cuda'.
            act: 'none' (weight-only), 'int8' or 'fp8' (online activation quantization).
            clamp: None, 'relu' or 'relu6', fused into the product.
            keep_quantized: keep the host quantized weight (needed to move the module).
            prepare_kwargs: more options for :func:`mixq.prepare` (act_block, force_kernel).
        """
        super().__init__()
        self.in_features = qweight.K
        self.out_features = qweight.N
        self._init_prepared(qweight, bias, device, backend, act, clamp, keep_quantized, prepare_kwargs)

    @classmethod
    def from_linear(cls, linear, scheme, *, backend="auto", act="none", device=None, **kwargs):
        """Quantize an ``nn.Linear`` with `scheme` (e.g. 'w4g128', 'w8g128', 'fp8b128').

        The weight is quantized on the host (round to nearest) and prepared for `device`
        (default: the linear's device). The bias is kept in its dtype.
        """
        device = torch.device(device) if device is not None else linear.weight.device
        return cls(quantize_host(linear, scheme), linear.bias, device=device, backend=backend,
                   act=act, **kwargs)

    def forward(self, x):
        """``torch.ops.mixq.linear(x, handle, bias, clamp)``; x ``[..., in_features]``.

        In eager mode the op's kernel is called directly (the dispatcher adds ~2-3 us a call and
        has nothing to do for a tensor without autograd); under torch.compile / export the op
        itself is traced.
        """
        # the buffer dict read directly: nn.Module.__getattr__ costs ~0.3 us per buffer
        bias = self._buffers["bias"]
        if _compiling() or (x.requires_grad and torch.is_grad_enabled()):
            return torch.ops.mixq.linear(x, self.handle, bias, self.clamp_lo, self.clamp_hi)
        return _ops.linear_eager(x, self.handle, bias, self.clamp_lo, self.clamp_hi)

    def dequantized_weight(self, dtype=torch.float32):
        """The ``[N, K]`` weight the kernels use (dequantized on the host), as a CPU tensor of
        `dtype`; needs the kept quantized weight."""
        return self._dequantized(dtype)

    def kernel_name(self, M=1):
        """The kernel a call with M rows runs."""
        return self.prepared.kernel_name(M)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight={self.scheme_desc}, "
                f"backend={self.prepared.backend}, act={self.prepared.act}")
