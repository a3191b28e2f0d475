"""mixq: mixed-precision matrix products (floating-point activations times block-quantized
INT4 / INT8 / FP8 weights) on the CPU and CUDA.

    import numpy as np, mixq
    w = np.random.randn(4096, 4096).astype(np.float32)       # [N, K], rows = output features
    qw = mixq.quantize(w, "w4g128")                           # int4, groups of 128, f16 scales
    pw = mixq.prepare(qw, backend="cpu")                      # repack once
    y = mixq.linear(np.random.randn(8, 4096).astype(np.float32), pw)   # y = x @ W.T

Arrays are numpy arrays, torch tensors, CuPy arrays or any DLPack / array-interface object, used
in place. Mixture-of-experts layers: ``prepare_experts``, ``grouped_linear``, ``moe_route``,
``moe_mlp`` (mixq.moe). ``mixq.torch`` adds torch custom ops and the ``QuantLinear`` module.
"""

from . import errors as _errors
from . import _mixq
from .core import (conv2d, conv2d_output_size, dequantize, kernel_name, linear, prepare,
                   quantize, scheme_name, workspace_size)
from .errors import (CudaError, FormatError, InternalError, InvalidArgumentError, IoError,
                     MixqError, UnsupportedError)
from .formats import inspect, load, save
from .quantized import QuantizedActivations, quantize_activations
from .sharding import check_shard_set, load_shard, shard, shard_range
from .moe import (MOE_ERROR_COUNTS, MOE_ERROR_EXPERT_ID, MOE_ERROR_OFFSETS, PreparedExperts,
                  fuse_gate_up, grouped_linear, load_experts, moe_gather, moe_mlp,
                  moe_mlp_workspace_size, moe_route, moe_scatter_add, prepare_experts)

_mixq._set_error_classes(_errors.ERROR_CLASSES)

QuantizedWeight = _mixq.QuantizedWeight
PreparedWeight = _mixq.PreparedWeight
cuda_available = _mixq.cuda_available
cuda_device_count = _mixq.cuda_device_count
cpu_isa = _mixq.cpu_isa
built_with_cuda = _mixq.built_with_cuda

__version__ = "0.1.0"

__all__ = [
    "quantize", "prepare", "linear", "conv2d", "dequantize", "load", "inspect", "save",
    "kernel_name", "workspace_size", "conv2d_output_size", "scheme_name", "QuantizedWeight",
    "QuantizedActivations", "quantize_activations",
    "PreparedWeight", "MixqError", "InvalidArgumentError", "UnsupportedError", "FormatError",
    "IoError", "CudaError", "InternalError", "cuda_available", "cuda_device_count", "cpu_isa",
    "built_with_cuda", "prepare_experts", "PreparedExperts", "grouped_linear", "moe_route",
    "moe_gather", "moe_scatter_add", "moe_mlp", "moe_mlp_workspace_size", "load_experts",
    "fuse_gate_up", "MOE_ERROR_OFFSETS", "MOE_ERROR_COUNTS", "MOE_ERROR_EXPERT_ID",
    "shard", "shard_range", "load_shard", "check_shard_set",
]
