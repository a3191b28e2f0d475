"""Tensor-parallel quantized linear layers on a ``torch.distributed`` process group.

mixq prepares each rank's shard of the global weight (``mixq.shard``: any split, also through a
quantization group on the CPU backend) and computes the rank's product; the collective is the
framework's (NCCL on CUDA, gloo on the CPU), run on torch's current stream like any other op.

    import torch.distributed as dist, mixq.torch as mt
    dist.init_process_group("nccl")
    up = mt.ColumnParallelQuantLinear.from_linear(mlp.up_proj, "w4g128", device="cuda")
    down = mt.RowParallelQuantLinear.from_linear(mlp.down_proj, "w4g128", device="cuda",
                                                 input_is_parallel=True)
    y = down(act(up(x)))        # up's output stays sharded; down all-reduces its partial sums

Column-parallel: the rank holds output features ``shard_range(N, rank, world)``; the output
stays sharded (``gather_output=False``) or is all-gathered to ``[..., N]``. Row-parallel: the
rank holds input features ``shard_range(K, rank, world)`` and takes either the full input (its
columns are sliced without a copy) or its own slice (``input_is_parallel=True``); the partial
outputs are all-reduced (sum), then the bias and clamp are applied once.
"""

import math

import torch
import torch.distributed as dist
from torch import nn

from .. import sharding as _shard
from ..errors import InvalidArgumentError
from .linear import _CLAMPS, QuantLinear, quantize_host

__all__ = ["ColumnParallelQuantLinear", "RowParallelQuantLinear"]


def _group_place(group):
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise InvalidArgumentError("group: this process is not a member of the process group")
    return rank, world


def _check_same_weight(qweight, axis, granularity, group, world):
    """Every rank must shard the same global weight the same way: compare (N, K, scheme, axis,
    granularity) over the group (once, at construction) and name the first rank that differs."""
    mine = (qweight.N, qweight.K, qweight.describe(), axis, int(granularity))
    every = [None] * world
    dist.all_gather_object(every, mine, group=group)
    for r, other in enumerate(every):
        if other != mine:
            raise InvalidArgumentError(
                f"qweight: rank {r} of the group shards {other} where this rank has {mine} "
                "(every rank must pass the same global weight, axis and granularity)")


class _ParallelBase(nn.Module):
    axis = ""

    def _take_shard(self, qweight, *, group, granularity, device, check, **kwargs):
        """Sets the rank's place and range; returns its shard of `qweight`."""
        self.group = group
        self.rank, self.world = _group_place(group)
        if check:
            _check_same_weight(qweight, self.axis, granularity, group, self.world)
        dim = qweight.N if self.axis == "column" else qweight.K
        self.granularity = int(granularity)
        self.ranges = [_shard.shard_range(dim, r, self.world, self.granularity)
                       for r in range(self.world)]
        self.begin, self.end = self.ranges[self.rank]
        self.in_features, self.out_features = qweight.K, qweight.N
        local = _shard.shard(qweight, self.rank, self.world, self.axis, self.granularity)
        self._local_kwargs = dict(device=device, **kwargs)
        return local

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, rank="
                f"{self.rank}/{self.world}, {self.axis} [{self.begin}, {self.end})")


class ColumnParallelQuantLinear(_ParallelBase):
    """This rank's output features of ``x @ W.T + bias``: ``[..., end - begin]``, or the whole
    ``[..., N]`` with ``gather_output=True`` (all-gather over the group)."""

    axis = "column"

    def __init__(self, qweight, bias=None, *, group=None, gather_output=False, granularity=1,
                 device="cpu", check=True, **kwargs):
        """Args:
            qweight: the global :class:`mixq.QuantizedWeight` ``[N, K]`` (the same on every rank).
            bias: optional global ``[N]`` bias (this rank keeps its slice).
            group: the process group (default: the world).
            gather_output: all-gather the shards' outputs into ``[..., N]``.
            granularity: cut N on multiples of this (e.g. 128 for whole FP8 blocks).
            device: where this rank's shard runs.
            check: verify at construction that every rank passes the same weight and split.
            kwargs: more :class:`QuantLinear` options (backend, act, clamp, ...).
        """
        super().__init__()
        local = self._take_shard(qweight, group=group, granularity=granularity, device=device,
                                 check=check, **kwargs)
        self.gather_output = gather_output
        local_bias = None if bias is None else bias.detach()[self.begin:self.end]
        self.local = QuantLinear(local, local_bias, **self._local_kwargs)

    @classmethod
    def from_linear(cls, linear, scheme, **kwargs):
        """Quantize ``linear``'s global weight with `scheme` on the host, keep this rank's
        output features (the bias's too)."""
        return cls(quantize_host(linear, scheme), linear.bias, **kwargs)

    def forward(self, x):
        y = self.local(x)
        if not self.gather_output or self.world == 1:
            return y
        widths = [e - b for b, e in self.ranges]
        wide = max(widths)
        part = y.reshape(-1, y.shape[-1])
        if part.shape[1] != wide:  # uneven split: all_gather wants one size, pad to the widest
            part = nn.functional.pad(part, (0, wide - part.shape[1]))
        rows = part.shape[0]
        # the ranks' blocks one after another along dim 0 (the layout every backend takes)
        gathered = part.new_empty((self.world * rows, wide))
        dist.all_gather_into_tensor(gathered, part.contiguous(), group=self.group)
        gathered = gathered.view(self.world, rows, wide)
        out = torch.cat([gathered[r, :, :w] for r, w in enumerate(widths)], dim=-1)
        return out.view(*x.shape[:-1], self.out_features)


class RowParallelQuantLinear(_ParallelBase):
    """``x @ W.T + bias`` (then the clamp) with this rank holding input features
    ``[begin, end)``: the partial products are all-reduced over the group."""

    axis = "row"

    def __init__(self, qweight, bias=None, *, group=None, input_is_parallel=False,
                 granularity=1, clamp=None, device="cpu", check=True, **kwargs):
        """Args:
            qweight: the global :class:`mixq.QuantizedWeight` ``[N, K]`` (the same on every rank).
            bias: optional ``[N]`` bias, added once after the reduction.
            group: the process group (default: the world).
            input_is_parallel: forward takes this rank's ``[..., end - begin]`` slice of the
                input (the output of a column-parallel layer); otherwise the full ``[..., K]``.
            granularity: cut K on multiples of this. The CUDA kernels need whole groups (the
                scheme's group size); the CPU backend takes any cut.
            clamp: None, 'relu' or 'relu6', applied after the reduction.
            device, check, kwargs: as for :class:`ColumnParallelQuantLinear`.
        """
        super().__init__()
        local = self._take_shard(qweight, group=group, granularity=granularity, device=device,
                                 check=check, **kwargs)
        self.input_is_parallel = input_is_parallel
        self.clamp_lo, self.clamp_hi = _CLAMPS[clamp]
        self.local = QuantLinear(local, None, **self._local_kwargs)
        self.register_buffer("bias", None if bias is None else bias.detach().to(device))

    @classmethod
    def from_linear(cls, linear, scheme, **kwargs):
        """Quantize ``linear``'s global weight with `scheme` on the host, keep this rank's input
        features."""
        return cls(quantize_host(linear, scheme), linear.bias, **kwargs)

    def forward(self, x):
        if not self.input_is_parallel:
            if x.shape[-1] != self.in_features:
                raise InvalidArgumentError(f"x: last dimension {x.shape[-1]} is not the layer's "
                                           f"in_features {self.in_features}")
            x = x[..., self.begin:self.end]  # a strided view: the kernel reads it in place
        elif x.shape[-1] != self.end - self.begin:
            raise InvalidArgumentError(f"x: last dimension {x.shape[-1]} is not this rank's "
                                       f"input slice [{self.begin}, {self.end})")
        y = self.local(x)
        if self.world > 1:
            dist.all_reduce(y, group=self.group)
        if self.bias is not None:
            y = y + self.bias
        if self.clamp_lo != -math.inf or self.clamp_hi != math.inf:
            y = y.clamp(self.clamp_lo, self.clamp_hi)
        return y
