"""Sibling projections fused into one quantized product.

A decoder layer reads the same activations through several linears: q, k and v in attention,
gate and up in the MLP. At decode (M = 1-16) each of them is a weight stream short enough that a
kernel's ramp-up and tail are a large part of its time (Llama-3-8B's k and v are 4096 x 1024:
4 MB of INT4 codes, a few microseconds), and every one is a launch. Concatenating the weights
along N gives one longer stream and one launch per group, which is what serving engines do
(vLLM's QKVParallelLinear, MergedColumnParallelLinear).

The model's own forward code is left as it is: each member projection is replaced by a
:class:`FusedMember` that returns its columns of the group's output. The first member called
with an input runs the fused product and keeps it; the others called with the same input tensor
(the same object) return their slices of it, and the last one drops it. Called with another
input, a member recomputes, so the result never depends on call order, only the speed does.

Weight-only and FP8-block quantization are per row (or per 128-row block, and the member sizes
of real models are multiples of 128), so each member's slice of the fused quantized weight holds
the same codes and scales the member would get quantized alone.
"""

import torch
from torch import nn

__all__ = ["FusedLinears", "FusedMember", "fuse_linears_", "DEFAULT_GROUPS"]

# (member names, name of the fused module registered in their parent), HF transformers naming.
DEFAULT_GROUPS = (
    (("q_proj", "k_proj", "v_proj"), "qkv_proj"),
    (("gate_proj", "up_proj"), "gate_up_proj"),
)


class FusedLinears(nn.Module):
    """One linear over the concatenated weights of `names` (the child ``linear``: an
    ``nn.Linear`` until ``quantize_`` replaces it by a QuantLinear), and the members' outputs."""

    def __init__(self, linear, names, out_features):
        super().__init__()
        self.linear = linear
        self.names = tuple(names)
        self.out_features = tuple(int(n) for n in out_features)
        starts = [0]
        for n in self.out_features:
            starts.append(starts[-1] + n)
        self.starts = tuple(starts)
        self._x = None  # the input of the kept output, None when nothing is kept
        self._y = None
        self._left = 0

    def forward(self, x):
        """The fused product: ``[..., sum(out_features)]``."""
        return self.linear(x)

    def member_output(self, index, x):
        """Columns of member `index` of the product with `x` (computed once per input)."""
        if self._x is not x:
            self._x, self._y, self._left = x, self.linear(x), len(self.names)
        y = self._y[..., self.starts[index]:self.starts[index + 1]]
        self._left -= 1
        if self._left <= 0:
            self._x = self._y = None
        return y

    def extra_repr(self):
        return f"members={self.names}, out_features={self.out_features}"


class FusedMember(nn.Module):
    """Stands in for one member projection of a :class:`FusedLinears` group."""

    def __init__(self, group, index):
        super().__init__()
        # A plain attribute, not a submodule: the group is registered once, in the parent.
        object.__setattr__(self, "group", group)
        self.index = index
        self.in_features = group.linear.in_features
        self.out_features = group.out_features[index]

    def forward(self, x):
        return self.group.member_output(self.index, x)

    def rows(self):
        """``(start, stop)`` of this member's rows in the group's fused weight."""
        return self.group.starts[self.index], self.group.starts[self.index + 1]

    def dequantized_weight(self, dtype=torch.float32):
        """This member's rows of the group's weight as the kernels use it (a QuantLinear's
        dequantized weight, or the dense weight while the group is not quantized)."""
        start, stop = self.rows()
        lin = self.group.linear
        if hasattr(lin, "dequantized_weight"):
            return lin.dequantized_weight(dtype)[start:stop]
        return lin.weight.detach()[start:stop].to(device="cpu", dtype=dtype)

    def extra_repr(self):
        return f"{self.group.names[self.index]}: rows {self.rows()} of the fused product"


def _fusable(members):
    first = members[0]
    return all(type(m) is nn.Linear and m.in_features == first.in_features
               and m.weight.dtype == first.weight.dtype and m.weight.device == first.weight.device
               and (m.bias is None) == (first.bias is None) for m in members)


def fuse_linears_(model, groups=DEFAULT_GROUPS, skip=None):
    """Fuse sibling ``nn.Linear`` projections that read the same input (in place).

    For every module holding all members of a group as ``nn.Linear`` children of one input
    width, dtype and device, the members' weights (and biases) are concatenated into one
    ``nn.Linear`` inside a :class:`FusedLinears` registered under the group's name
    (``self_attn.qkv_proj``, ``mlp.gate_up_proj``), and each member is replaced by a
    :class:`FusedMember`. Quantizing afterwards (``quantize_``) quantizes the fused linear.

    Args:
        model: an ``nn.Module``.
        groups: ``((member names...), fused name)`` pairs; default: q/k/v and gate/up.
        skip: as in :func:`quantize_`: a group is left alone when any member name matches.

    Returns:
        The names of the fused modules created.
    """
    from .convert import skipped
    done = []
    for name, module in list(model.named_modules()):
        for names, fused_name in groups:
            members = [getattr(module, n, None) for n in names]
            if any(m is None for m in members) or not _fusable(members):
                continue
            full = [f"{name}.{n}" if name else n for n in names]
            if any(skipped(f, skip) for f in full) or hasattr(module, fused_name):
                continue
            first = members[0]
            lin = nn.Linear(first.in_features, sum(m.out_features for m in members),
                            bias=first.bias is not None, device=first.weight.device,
                            dtype=first.weight.dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.cat([m.weight for m in members]))
                if first.bias is not None:
                    lin.bias.copy_(torch.cat([m.bias for m in members]))
            group = FusedLinears(lin, names, [m.out_features for m in members])
            module.add_module(fused_name, group)
            for i, n in enumerate(names):
                setattr(module, n, FusedMember(group, i))
            done.append(f"{name}.{fused_name}" if name else fused_name)
    return done
