"""torch custom ops over mixq's mixture-of-experts kernels, and the ``QuantMoE`` module.

``torch.ops.mixq.moe_mlp(x, topk_ids, topk_weights, gate_up_handle, down_handle, activation)``
and ``torch.ops.mixq.grouped_linear(x, handle, offsets, counts, bias)`` are defined like
``torch.ops.mixq.linear`` (ops.py): a schema, one Python kernel for the CPU and CUDA dispatch
keys and a fake implementation, so they trace under ``torch.compile(fullgraph=True)`` and run
inside CUDA-graph capture (outputs and workspaces from torch's allocator, work on torch's current
stream, no host synchronisation). Prepared expert stacks are passed by handle
(``_registry``: ``register_experts``).

Routing is the caller's (a router's softmax / top-k); the ops take ``topk_ids`` of any integer
dtype (int64 from ``torch.topk`` is converted to int32 on the device, an asynchronous copy).
On CUDA, ids out of range make the op do no work and leave zeros (the output is zero-filled
first); pass ids in range. On the CPU they raise ``mixq.InvalidArgumentError``.
"""

import weakref
from typing import Optional

import torch
from torch import nn

from .. import moe as _moe
from ..errors import InvalidArgumentError
from . import _registry
from .linear import quantize_host

__all__ = ["moe_mlp", "grouped_linear", "QuantMoE", "register_experts"]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def register_experts(prepared):
    """Handle of a :class:`mixq.PreparedExperts` for the ops (kept until
    ``mixq.torch.release_prepared(handle)``)."""
    return _registry.register(prepared)


def _check_float(t, arg):
    if t.dtype not in _FLOATS:
        raise InvalidArgumentError(f"{arg}: dtype {t.dtype} is not one the MoE ops take "
                                   "(float32, float16, bfloat16)")


def _check_place(t, e, arg):
    place = t.get_device() if t.is_cuda else -1
    if place != e.device:
        where = "the host" if e.device < 0 else f"cuda:{e.device}"
        raise InvalidArgumentError(f"{arg}: on {t.device}, but the experts are prepared for "
                                   f"{where}")


def _ids32(ids):
    if ids.dtype == torch.int32:
        return ids.contiguous()
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise InvalidArgumentError(f"topk_ids: dtype {ids.dtype} is not an integer dtype")
    return ids.to(torch.int32).contiguous()


def moe_mlp_eager(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                  gate_up_handle: int, down_handle: int, activation: str) -> torch.Tensor:
    """The kernel of ``torch.ops.mixq.moe_mlp``."""
    gu, down = _registry.entry(gate_up_handle), _registry.entry(down_handle)
    _check_float(x, "x")
    if x.shape[-1] != gu.K:
        raise InvalidArgumentError(f"x: last dimension {x.shape[-1]} does not match the experts' "
                                   f"hidden size {gu.K} (x shape {tuple(x.shape)})")
    _check_place(x, gu, "x")
    x2 = x.reshape(-1, gu.K).contiguous()
    T = x2.shape[0]
    ids = _ids32(topk_ids.reshape(T, -1))
    w = topk_weights.reshape(T, -1).to(torch.float32).contiguous()
    y = torch.empty((T, down.N), dtype=x.dtype, device=x.device)
    if T:
        ws = None
        if x.is_cuda:
            nbytes = _moe.moe_mlp_workspace_size(gu.prepared, down.prepared, T, ids.shape[1],
                                                 x.dtype)
            ws = torch.empty(nbytes, dtype=torch.uint8, device=x.device)
            y.zero_()  # bad ids on the device: the kernels do no work, y stays defined
        _moe.moe_mlp(x2, ids, w, gu.prepared, down.prepared, activation, out=y, workspace=ws)
    return y.view(*x.shape[:-1], down.N)


def _moe_mlp_fake(x, topk_ids, topk_weights, gate_up_handle, down_handle, activation):
    return x.new_empty((*x.shape[:-1], _registry.entry(down_handle).N))


def grouped_linear_eager(x: torch.Tensor, handle: int, offsets: Optional[torch.Tensor],
                         counts: Optional[torch.Tensor],
                         bias: Optional[torch.Tensor]) -> torch.Tensor:
    """The kernel of ``torch.ops.mixq.grouped_linear`` (contiguous layout: x ``[rows, K]`` and
    offsets; masked: x ``[E, max_tokens, K]`` and counts)."""
    e = _registry.entry(handle)
    _check_float(x, "x")
    _check_place(x, e, "x")
    if (offsets is None) == (counts is None):
        raise InvalidArgumentError("offsets / counts: pass exactly one")
    x = x.contiguous()
    y = torch.empty((*x.shape[:-1], e.N), dtype=x.dtype, device=x.device)
    if x.numel():
        if x.is_cuda:
            y.zero_()
        _moe.grouped_linear(x, e.prepared,
                            offsets=None if offsets is None else _ids32(offsets),
                            counts=None if counts is None else _ids32(counts),
                            max_tokens=x.shape[1] if counts is not None and x.dim() == 3 else None,
                            out=y, bias=bias)
    return y


def _grouped_linear_fake(x, handle, offsets, counts, bias):
    return x.new_empty((*x.shape[:-1], _registry.entry(handle).N))


# A fragment of the "mixq" namespace that ops.py defines.
_lib = torch.library.Library("mixq", "FRAGMENT")
_lib.define("moe_mlp(Tensor x, Tensor topk_ids, Tensor topk_weights, int gate_up_handle, "
            "int down_handle, str activation) -> Tensor")
_lib.define("grouped_linear(Tensor x, int handle, Tensor? offsets, Tensor? counts, "
            "Tensor? bias) -> Tensor")
for _key in ("CPU", "CUDA"):
    _lib.impl("moe_mlp", moe_mlp_eager, _key)
    _lib.impl("grouped_linear", grouped_linear_eager, _key)
torch.library.register_fake("mixq::moe_mlp", _moe_mlp_fake, lib=_lib)
torch.library.register_fake("mixq::grouped_linear", _grouped_linear_fake, lib=_lib)

moe_mlp = torch.ops.mixq.moe_mlp
grouped_linear = torch.ops.mixq.grouped_linear


def _expert_linears(expert):
    """(gate, up, down) nn.Linear of one HF expert module: Qwen / DeepSeek / Llama style
    (gate_proj, up_proj, down_proj) or Mixtral style (w1 = gate, w3 = up, w2 = down)."""
    for names in (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2")):
        if all(hasattr(expert, n) for n in names):
            return tuple(getattr(expert, n) for n in names)
    raise InvalidArgumentError(f"experts: a {type(expert).__name__} has neither gate_proj / "
                               "up_proj / down_proj nor w1 / w3 / w2")


class QuantMoE(nn.Module):
    """The routed experts of an MoE layer, quantized by mixq:
    ``forward(x, topk_ids, topk_weights) = sum_j w[t, j] * down_e(act(gate_e(x)) * up_e(x))``.

    Built from per-expert ``nn.Linear`` gate / up / down layers (:meth:`from_linears`) or an HF
    experts ``nn.ModuleList`` (Mixtral ``w1 / w3 / w2``, Qwen-MoE / DeepSeek ``gate_proj /
    up_proj / down_proj``: :meth:`from_experts`). The router stays the model's. ``forward`` is
    the ``torch.ops.mixq.moe_mlp`` op (torch.compile fullgraph, CUDA graphs). Biases are not
    supported (MoE experts have none).
    """

    def __init__(self, gate_up, down, *, device="cpu", backend="auto", act="none",
                 activation="silu", **prepare_kwargs):
        """gate_up: list of fused gate+up :class:`mixq.QuantizedWeight` (``mixq.fuse_gate_up``),
        down: list of down-projection ones; prepared for `device`."""
        super().__init__()
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if backend == "auto":
            backend = "cuda" if device.type == "cuda" else "cpu"
        self.num_experts = len(gate_up)
        self.hidden_size = gate_up[0].K
        self.intermediate_size = down[0].K
        self.activation = activation
        kw = dict(device=device.index or 0, **prepare_kwargs)
        self.w_gate_up = _moe.prepare_experts(gate_up, backend, act, **kw)
        self.w_down = _moe.prepare_experts(down, backend, act, **kw)
        self.gate_up_handle = _registry.register(self.w_gate_up)
        self.down_handle = _registry.register(self.w_down)
        for h in (self.gate_up_handle, self.down_handle):
            weakref.finalize(self, _registry.release, h)

    @classmethod
    def from_linears(cls, gates, ups, downs, scheme, *, device=None, **kwargs):
        """Quantize per-expert ``nn.Linear`` layers with `scheme` (gate and up are fused)."""
        if not (len(gates) == len(ups) == len(downs)) or not gates:
            raise InvalidArgumentError(f"experts: {len(gates)} gate, {len(ups)} up and "
                                       f"{len(downs)} down layers (need one of each per expert)")
        device = torch.device(device) if device is not None else gates[0].weight.device
        gu = [_moe.fuse_gate_up(quantize_host(g, scheme), quantize_host(u, scheme))
              for g, u in zip(gates, ups)]
        dn = [quantize_host(d, scheme) for d in downs]
        return cls(gu, dn, device=device, **kwargs)

    @classmethod
    def from_experts(cls, experts, scheme, **kwargs):
        """Quantize an HF experts ``nn.ModuleList`` (see the class docstring)."""
        layers = [_expert_linears(e) for e in experts]
        return cls.from_linears([l[0] for l in layers], [l[1] for l in layers],
                                [l[2] for l in layers], scheme, **kwargs)

    def forward(self, x, topk_ids, topk_weights):
        """x ``[..., hidden]``, topk_ids ``[..., k]`` (any integer dtype), topk_weights
        ``[..., k]``; returns ``[..., hidden]`` of x's dtype."""
        return torch.ops.mixq.moe_mlp(x, topk_ids, topk_weights, self.gate_up_handle,
                                      self.down_handle, self.activation)

    def extra_repr(self):
        return (f"num_experts={self.num_experts}, hidden={self.hidden_size}, "
                f"intermediate={self.intermediate_size}, backend={self.w_gate_up.backend}, "
                f"act={self.w_gate_up.act}, activation={self.activation}")

