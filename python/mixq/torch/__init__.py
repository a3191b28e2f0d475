"""mixq for PyTorch: the ``torch.ops.mixq.linear`` custom op, the ``QuantLinear`` module,
the ``torch.ops.mixq.conv2d`` op and ``QuantConv2d`` module (``quantize_convs_``), the MoE ops ``torch.ops.mixq.moe_mlp`` / ``grouped_linear`` and the ``QuantMoE`` module,
``quantize_`` (replace a model's nn.Linear layers) and checkpoint loaders.

    import torch, mixq.torch as mt
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU())
    mt.quantize_(model, "w4g128")                     # nn.Linear -> QuantLinear (in place)
    y = torch.compile(model, fullgraph=True)(torch.randn(8, 4096))

Importing this module needs torch; ``import mixq`` alone does not.
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("mixq.torch needs PyTorch (pip install torch); the core API "
                      "(import mixq) works without it") from e

from . import _registry
from .conv import QuantConv2d, conv2d
from .convert import quantize_, quantize_convs_, skipped
from .fused import FusedLinears, FusedMember, fuse_linears_
from .linear import QuantLinear, register_prepared
from .loaders import CheckpointMismatch, checkpoint_weights, hf_to_gguf_name, load_checkpoint_
from .moe import QuantMoE, grouped_linear, moe_mlp, register_experts
from .ops import linear
from .parallel import ColumnParallelQuantLinear, RowParallelQuantLinear

release_prepared = _registry.release

__all__ = ["linear", "QuantLinear", "quantize_", "conv2d", "QuantConv2d", "quantize_convs_", "load_checkpoint_", "checkpoint_weights",
           "hf_to_gguf_name", "CheckpointMismatch", "register_prepared", "release_prepared",
           "skipped", "fuse_linears_", "FusedLinears", "FusedMember",
           "ColumnParallelQuantLinear", "RowParallelQuantLinear", "moe_mlp", "grouped_linear",
           "QuantMoE", "register_experts"]
