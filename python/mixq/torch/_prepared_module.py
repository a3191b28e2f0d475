"""The part of QuantLinear and QuantConv2d that holds a prepared weight: preparing it for the
module's device, its registry handle (released with the module), re-preparing after ``.to()``."""

import math
import weakref

import torch
from torch import nn

from .. import core
from . import _registry

CLAMPS = {None: (-math.inf, math.inf), "relu": (0.0, math.inf), "relu6": (0.0, 6.0)}


def backend_for(device, backend):
    """The mixq backend of a module on `device` ('auto': cuda on a CUDA device, else cpu)."""
    if backend != "auto":
        return backend
    return "cuda" if device.type == "cuda" else "cpu"


class PreparedModule(nn.Module):
    """Holds ``qweight`` prepared for the module's device (``prepared``, ``handle``), an
    optional bias buffer and a fused clamp. Subclasses set their shape attributes and call
    ``_init_prepared`` from ``__init__``."""

    def _init_prepared(self, qweight, bias, device, backend, act, clamp, keep_quantized,
                       prepare_kwargs):
        self.scheme_desc = qweight.describe()
        self._backend = backend
        self._act = act
        self._prepare_kwargs = prepare_kwargs
        self.clamp_lo, self.clamp_hi = CLAMPS[clamp]
        self.qweight = qweight if keep_quantized else None
        device = torch.device(device)
        # An empty buffer that follows the module through .to()/.cuda(): after a move, its
        # device says where to re-prepare the weight (nn.Module._apply gives no device).
        self.register_buffer("_place", torch.empty(0, device=device), persistent=False)
        if bias is not None:
            bias = bias.detach().to(device)
        self.register_buffer("bias", bias)
        self.handle = 0
        self.prepared = None
        self._prepare(qweight, device)

    def _prepare(self, qweight, device):
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        prepared = core.prepare(qweight, backend_for(device, self._backend), self._act,
                                device=device.index or 0, **self._prepare_kwargs)
        old = self.handle
        self.prepared = prepared
        self.handle = _registry.register(prepared)
        self._prepared_device = device
        if old:
            _registry.release(old)
        # Release the handle with the module (not in __del__: reference cycles would delay it).
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _registry.release, self.handle)

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        place = self._place.device
        if place != self._prepared_device and not (
                place.type == "cuda" and self._prepared_device.type == "cuda"
                and place.index in (None, self._prepared_device.index)):
            if self.qweight is None:
                raise RuntimeError(f"{type(self).__name__}: cannot move a module created with "
                                   "keep_quantized=False to another device")
            self._prepare(self.qweight, place)
        return self

    def _dequantized(self, dtype):
        if self.qweight is None:
            raise RuntimeError(f"{type(self).__name__}: the quantized weight was not kept "
                               "(keep_quantized=False); nothing to dequantize")
        return torch.from_numpy(core.dequantize(self.qweight)).to(dtype)
