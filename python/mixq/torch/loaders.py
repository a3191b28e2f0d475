"""Put checkpoint weights (GPTQ, AWQ, FP8 block, GGUF, mixq's layout, dense safetensors) into a
model's linear layers by module name (Hugging Face transformers naming).

Only the linear layers' weights come from here (as QuantLinear modules, in the checkpoint's own
quantization, losslessly); embeddings, norms and biases are the model's own parameters (load
them with the model's usual loader, e.g. transformers' ``from_pretrained`` of the dense parts).
"""

import os
import re

import numpy as np

from .. import formats
from .. import _mixq
from .convert import linear_layers
from .linear import QuantLinear

__all__ = ["load_checkpoint_", "checkpoint_weights", "hf_to_gguf_name", "CheckpointMismatch"]


class CheckpointMismatch(ValueError):
    """A checkpoint that does not fit the model: missing tensors or different shapes. The
    message lists the module names and both shapes."""


# llama.cpp's tensor names for the Hugging Face Llama / Mistral / Qwen2 linear layers.
_GGUF_LAYER = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_LAYER_RE = re.compile(r"^(?:model\.)?layers\.(\d+)\.(.+)$")


def hf_to_gguf_name(module):
    """The GGUF tensor name of a Hugging Face (Llama-family) linear module, or None.

    ``model.layers.3.mlp.down_proj`` -> ``blk.3.ffn_down.weight``; ``lm_head`` -> ``output.weight``.
    """
    if module == "lm_head":
        return "output.weight"
    m = _LAYER_RE.match(module)
    if m and m.group(2) in _GGUF_LAYER:
        return f"blk.{m.group(1)}.{_GGUF_LAYER[m.group(2)]}.weight"
    return None


def _files(path):
    """A checkpoint file, a folder of shards, or a list of files -> list of files."""
    if isinstance(path, (list, tuple)):
        return [str(p) for p in path]
    path = str(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith((".safetensors", ".gguf")))
        if not files:
            raise FileNotFoundError(f"{path}: no .safetensors or .gguf files in this folder")
        return files
    return [path]


def checkpoint_weights(path):
    """Index the loadable weights of a checkpoint: name -> (file, entry, info).

    `entry` is the :func:`mixq.inspect` tensor dict, `info` the file's inspect result.
    """
    index = {}
    for f in _files(path):
        info = formats.inspect(f)
        for t in info["tensors"]:
            if t["is_weight"]:
                index[t["name"]] = (f, t, info)
    return index


def _gguf_rope_rows(n_rows, n_head):
    """Row order that undoes llama.cpp's Q/K permutation (its convert script interleaves the
    two rotary halves of each head): hf_row[i] = gguf_row[perm[i]]."""
    half = n_rows // n_head // 2
    to_gguf = np.arange(n_rows).reshape(n_head, 2, half).swapaxes(1, 2).reshape(-1)
    return np.argsort(to_gguf)


def permute_rows(qw, perm):
    """A new QuantizedWeight whose row i is `qw`'s row perm[i] (rows of one scale each)."""
    if qw.block_n != 1:
        raise ValueError(f"permute_rows: {qw.describe()} shares scales across rows")
    perm = np.asarray(perm, dtype=np.int64)
    codes = np.ascontiguousarray(qw.codes[perm])
    nbk = qw.scales_bytes.size // max(qw.N, 1)
    scales = (np.ascontiguousarray(qw.scales_bytes.reshape(qw.N, nbk)[perm])
              if qw.has_scales else None)
    zeros = None
    if qw.zeros_bytes.size:
        zeros = np.ascontiguousarray(qw.zeros_bytes.reshape(qw.N, -1)[perm])
    return _mixq.QuantizedWeight.from_parts(
        qw.N, qw.K, qw.code_type, qw.block_k, qw.block_n, qw.scale_type, qw.zero_kind,
        qw.has_scales, codes, scales, zeros, qw.k_perm if qw.has_k_perm else None, qw.origin)


def _lookup(index, module):
    """The checkpoint name for a module: GPTQ / AWQ use the module prefix, the others
    ``<module>.weight``, GGUF llama.cpp's names."""
    for name in (module, module + ".weight", hf_to_gguf_name(module)):
        if name is not None and name in index:
            return name
    return None


def load_checkpoint_(model, path, *, skip=None, strict=True, backend="auto", act="none",
                     device=None, gguf_unpermute_qk=True, **kwargs):
    """Replace `model`'s ``nn.Linear`` layers (in place) by QuantLinear modules holding the
    checkpoint's weights, matched by module name.

    Args:
        model: an ``nn.Module`` with Hugging Face names (``model.layers.0.mlp.down_proj``).
        path: a checkpoint file (GGUF, or safetensors: GPTQ, AWQ, FP8 block, mixq layout,
            dense), a folder of shards, or a list of files.
        skip: module names to leave as they are (see ``mixq.torch.convert.skipped``).
        strict: raise :class:`CheckpointMismatch` when a linear layer has no tensor in the
            checkpoint (shape mismatches always raise).
        backend, act, device, kwargs: for :class:`QuantLinear` (device default: the layer's).
        gguf_unpermute_qk: undo llama.cpp's rotary row permutation of attn_q / attn_k (uses
            ``llama.attention.head_count`` / ``head_count_kv`` from the GGUF metadata).

    Returns:
        dict with ``loaded`` (module names), ``missing`` (linear layers without a tensor) and
        ``unused`` (checkpoint weights no module took).

    Raises:
        CheckpointMismatch: missing tensors (strict) or a ``[N, K]`` that is not the layer's
            ``[out_features, in_features]``; the message names the module, tensor and shapes.
        mixq.FormatError / mixq.IoError: unreadable checkpoint files.
    """
    index = checkpoint_weights(path)
    loaded, missing, bad = [], [], []
    plan = []
    for module, child_name, child, full in linear_layers(model, skip):
        key = _lookup(index, full)
        if key is None:
            missing.append(full)
            continue
        shape = tuple(index[key][1]["shape"])
        if shape != (child.out_features, child.in_features):
            bad.append(f"{full}: checkpoint tensor '{key}' is {list(shape)}, the module is "
                       f"[out_features={child.out_features}, in_features={child.in_features}]")
            continue
        plan.append((module, child_name, child, full, key))
    if bad:
        raise CheckpointMismatch("checkpoint does not fit the model:\n  " + "\n  ".join(bad))
    if strict and missing:
        shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)" if len(missing) > 8 else "")
        raise CheckpointMismatch(f"{path}: no tensor for the linear layers {shown} (pass "
                                 "strict=False to keep them dense, or skip=...)")
    for module, child_name, child, full, key in plan:
        file, entry, info = index[key]
        qw = formats.load(file, key)
        if gguf_unpermute_qk and info["format"].startswith("gguf"):
            qw = _gguf_unpermute(qw, key, info)
        dev = device if device is not None else child.weight.device
        setattr(module, child_name, QuantLinear(qw, child.bias, device=dev, backend=backend,
                                                act=act, **kwargs))
        loaded.append(full)
    used = {p[4] for p in plan}
    return {"loaded": loaded, "missing": missing,
            "unused": sorted(k for k in index if k not in used)}


def _gguf_unpermute(qw, key, info):
    meta = info["metadata"]
    arch = meta.get("general.architecture", "llama").strip('"')
    if arch not in ("llama",) or not (key.endswith(".attn_q.weight") or
                                      key.endswith(".attn_k.weight")):
        return qw
    n_head = int(meta[f"{arch}.attention.head_count"])
    if key.endswith(".attn_k.weight"):
        n_head = int(meta.get(f"{arch}.attention.head_count_kv", n_head))
    return permute_rows(qw, _gguf_rope_rows(qw.N, n_head))
