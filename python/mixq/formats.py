"""Checkpoints: read any format the C++ readers support, write mixq's own safetensors layout.

Formats (detected from the content): GGUF v2/v3 (F32/F16/BF16, Q4_0..Q8_0, K-quants, IQ4),
safetensors in mixq's layout, GPTQ (2/3/4/8 bit, act-order), AWQ (GEMM), FP8 block
(e4m3 + ``weight_scale_inv``) and dense F32/F16/BF16 safetensors.
"""

from . import _mixq

__all__ = ["load", "inspect", "save"]


def load(path, tensor):
    """Load one weight of a checkpoint as a :class:`mixq.QuantizedWeight`, losslessly.

    Args:
        path: the checkpoint file (``.gguf`` or ``.safetensors``; GPTQ / AWQ configs are read
            from ``quantize_config.json`` / ``config.json`` beside it).
        tensor: the name :func:`inspect` lists: the GGUF tensor name, the safetensors weight
            name, or for GPTQ / AWQ the module prefix (``model.layers.0.mlp.down_proj``).

    Raises:
        mixq.IoError: the file cannot be read.
        mixq.FormatError: malformed content (the message names the file and tensor).
        mixq.InvalidArgumentError: no such tensor.
    """
    return _mixq.load(str(path), tensor)


def inspect(path):
    """Describe a checkpoint.

    Returns:
        dict with ``path``, ``format`` (e.g. ``"gguf v3"``, ``"safetensors (gptq)"``),
        ``metadata`` (str -> str: GGUF KVs, safetensors ``__metadata__``, ``quantization.*``
        keys) and ``tensors``: a list of dicts with ``name``, ``type``, ``shape`` (matrices as
        ``(N, K)``), ``bytes``, ``bits_per_weight`` and ``is_weight`` (:func:`load` accepts it).
    """
    return _mixq.inspect(str(path))


def save(path, weights, metadata=None):
    """Write quantized weights to a safetensors file in mixq's layout (``W.codes``,
    ``W.scales``, ``W.zeros``, ``W.k_perm``), readable by :func:`load` and the ``mixq`` CLI.

    Args:
        path: the output file.
        weights: a dict (or list of pairs) name -> :class:`mixq.QuantizedWeight`.
        metadata: optional str -> str pairs stored in ``__metadata__``.
    """
    items = list(weights.items()) if isinstance(weights, dict) else list(weights)
    meta = list((metadata or {}).items())
    _mixq.save(str(path), items, meta)
