"""Mixture-of-experts: stacked expert weights, the grouped linear over them, the routing helpers
and the whole routed MLP (the C++ API of include/mixq/moe.hpp; docs/moe.md).

    ids = ...                                              # [T, k] int32 expert ids
    gu = mixq.prepare_experts([mixq.fuse_gate_up(g, u) for g, u in zip(gates, ups)], "cpu")
    down = mixq.prepare_experts(downs, "cpu")
    y = mixq.moe_mlp(x, ids, topk_weights, gu, down)       # [T, hidden]

Arrays are used in place like :func:`mixq.linear`'s (numpy, torch CPU / CUDA, CuPy, DLPack):
nothing is copied; outputs and workspaces not passed are allocated by the input's library on its
device; GPU work goes to the caller's current stream and nothing synchronises the host. Expert ids,
offsets and counts are int32. Checks of their values: on the CPU they raise
:class:`mixq.InvalidArgumentError` naming the argument; on CUDA they live on the device, so the
kernels check them and, instead of raising, do no work and set bits in the optional ``error``
array (``MOE_ERROR_OFFSETS``, ``MOE_ERROR_COUNTS``, ``MOE_ERROR_EXPERT_ID``).
"""

import math

from . import _mixq
from ._arrays import current_stream, detach, dtype_name, empty_like_place, is_cuda, \
    require_array
from .core import _record_streams, quantize
from .errors import InvalidArgumentError

__all__ = ["PreparedExperts", "prepare_experts", "grouped_linear", "moe_route", "moe_gather",
           "moe_scatter_add", "moe_mlp", "moe_mlp_workspace_size", "load_experts",
           "fuse_gate_up", "MOE_ERROR_OFFSETS", "MOE_ERROR_COUNTS", "MOE_ERROR_EXPERT_ID"]

PreparedExperts = _mixq.PreparedExperts

MOE_ERROR_OFFSETS = 1    # offsets not 0 .. rows, non-decreasing
MOE_ERROR_COUNTS = 2     # a count < 0 or > max_tokens
MOE_ERROR_EXPERT_ID = 4  # a top-k expert id outside [0, E)


def _workspace(x, nbytes):
    return empty_like_place(x, (nbytes,), "uint8") if nbytes else None


def _opt(a):
    return None if a is None else detach(a)


def prepare_experts(experts, backend="auto", act="none", *, device=0, scheme=None,
                    act_block=0, force_kernel="", tuning=""):
    """Prepare E experts of one shape and scheme for one backend (once; call many times).

    Args:
        experts: a list of :class:`mixq.QuantizedWeight` ``[N, K]`` (from :func:`mixq.quantize`,
            :func:`load_experts` or :func:`fuse_gate_up`), or a stacked host float array
            ``[E, N, K]`` together with ``scheme=`` (each expert is quantized with it).
        backend: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"ref"``, as for :func:`mixq.prepare`.
        act: ``"none"`` (weight-only), ``"int8"`` or ``"fp8"``, as for :func:`mixq.prepare`.
        device: CUDA ordinal for ``backend="cuda"``.
        scheme: the weight scheme of a stacked float array (``"w4g128"``, ``"fp8b128"``, ...).
        act_block, force_kernel, tuning: as for :func:`mixq.prepare`.

    Returns:
        A :class:`mixq.PreparedExperts` (``num_experts``, ``N``, ``K``, ``backend``, ``device``).

    Raises:
        mixq.InvalidArgumentError: an empty list, experts of different shapes or schemes (naming
            the expert), a stacked array without ``scheme``.
    """
    if hasattr(experts, "shape") and hasattr(experts, "dtype"):
        if len(experts.shape) != 3:
            raise InvalidArgumentError(f"experts: a stacked array must be [E, N, K], got shape "
                                       f"{tuple(experts.shape)}")
        if scheme is None:
            raise InvalidArgumentError("scheme: needed to quantize a stacked float array of "
                                       "experts (e.g. scheme='w4g128')")
        experts = [quantize(experts[e], scheme) for e in range(experts.shape[0])]
    elif scheme is not None:
        raise InvalidArgumentError("scheme: only for a stacked float array (the quantized "
                                   "experts already have one)")
    return _mixq.prepare_experts(list(experts), backend, act, act_block, device, force_kernel,
                                 str(tuning))


def fuse_gate_up(gate, up):
    """The fused gate+up :class:`mixq.QuantizedWeight` of one expert (gate rows first, then up;
    vLLM's w13 order), which :func:`moe_mlp` takes as ``w_gate_up``."""
    return _mixq.fuse_gate_up(gate, up)


def load_experts(path, pattern, up_pattern=None):
    """The experts of one projection from a checkpoint, as a list of
    :class:`mixq.QuantizedWeight` (pass it to :func:`prepare_experts`).

    Args:
        path: a GGUF or safetensors file.
        pattern: GGUF: the 3-D expert tensor (``"blk.3.ffn_up_exps.weight"``); safetensors:
            a name with ``{e}`` for the expert index
            (``"model.layers.3.mlp.experts.{e}.up_proj.weight"``; GPTQ / AWQ / FP8 modules as
            :func:`mixq.load` names them).
        up_pattern: when given, `pattern` names the gate projection and this the up one; the
            result is the fused gate+up stack (:func:`fuse_gate_up` per expert).

    Raises:
        mixq.FormatError: no expert found, or experts of different shapes.
    """
    if up_pattern is None:
        return _mixq.load_experts(str(path), pattern)
    return _mixq.load_experts_gate_up(str(path), pattern, up_pattern)


def grouped_linear(x, experts, offsets=None, counts=None, max_tokens=None, out=None, bias=None,
                   stream=None, *, error=None, workspace=None, num_threads=0):
    """``out[r] = x[r] @ W_e.T (+ bias)`` for every row r routed to expert e, in one call.

    Two row layouts (exactly one of offsets / counts):

    * contiguous: rows sorted by expert; expert e owns rows ``[offsets[e], offsets[e + 1])``
      (offsets ``[E + 1]`` int32, from 0, non-decreasing, ending at the row count; as
      :func:`moe_route` returns them);
    * masked: ``x`` is ``[E, max_tokens, K]`` (or ``[E * max_tokens, K]``) and expert e owns its
      first ``counts[e]`` rows (counts ``[E]`` int32); rows past a count are neither read nor
      written. Shapes stay fixed while counts change (CUDA graphs).

    Args:
        x: ``[rows, K]`` (masked: also ``[E, max_tokens, K]``) float32 / float16 / bfloat16 on
            the experts' device.
        experts: a :class:`PreparedExperts`.
        offsets, counts: see above; int32 on the experts' device.
        max_tokens: rows per expert of the masked buffer (default: ``x.shape[-2]`` of a 3-D x).
        out: ``[rows, N]`` (or ``[E, max_tokens, N]``); None allocates one like x.
        bias: optional ``[N]`` (shared) or ``[E, N]`` (per expert).
        stream: CUDA stream (int, torch.cuda.Stream or CuPy stream); None: x's library's current.
        error: optional ``[1]`` int32 device flag the CUDA kernels set on bad offsets / counts.
        workspace: uint8 array of ``experts.workspace_size(rows)`` bytes; None allocates one.
        num_threads: CPU threads (0: all).

    Returns:
        out.

    Raises:
        mixq.InvalidArgumentError: naming the argument (offsets not non-decreasing from 0 to the
            rows, counts above max_tokens, shapes, dtypes, devices).
    """
    require_array(x, "x")
    x = detach(x)
    if (offsets is None) == (counts is None):
        raise InvalidArgumentError("offsets / counts: pass exactly one (offsets for the "
                                   "contiguous layout, counts and max_tokens for the masked one)")
    if counts is not None:
        require_array(counts, "counts")
        if max_tokens is None:
            if len(x.shape) != 3:
                raise InvalidArgumentError("max_tokens: needed with counts for a 2-D x (or pass "
                                           "x as [E, max_tokens, K])")
            max_tokens = x.shape[1]
    else:
        require_array(offsets, "offsets")
        max_tokens = 0
    rows = math.prod(x.shape[:-1])
    if out is None:
        out = empty_like_place(x, tuple(x.shape[:-1]) + (experts.N,), _float_dtype(x))
    if rows == 0:
        return out
    if workspace is None:
        workspace = _workspace(x, experts.workspace_size(rows))
    _mixq.grouped_linear(x, experts, out, _opt(offsets), _opt(counts), int(max_tokens),
                         _opt(bias), error, current_stream(x, stream), workspace, num_threads)
    _record_streams(x, stream, (out, workspace))
    return out


def moe_route(topk_ids, num_experts, stream=None, *, out=None, error=None, workspace=None):
    """The contiguous layout of a top-k routing.

    Args:
        topk_ids: ``[T, k]`` int32 expert ids (CPU or CUDA). Pair ``i = t * k + j`` is token t's
            j-th choice.
        num_experts: E.
        stream: CUDA stream (see :func:`grouped_linear`).
        out: optional ``(permutation, offsets, inverse)`` arrays to write.
        error: optional ``[1]`` int32 device flag (CUDA: ids outside ``[0, E)`` set
            ``MOE_ERROR_EXPERT_ID`` and the routing is refused: offsets all 0).
        workspace: uint8 array of ``moe_route_workspace_size(E)`` bytes (CUDA); None allocates.

    Returns:
        ``(permutation, offsets, inverse)``: permutation ``[T*k]`` int32, the pair at each
        sorted position (pairs ordered by expert, stably); offsets ``[E + 1]`` int32, expert e's
        sorted positions ``[offsets[e], offsets[e + 1])``; inverse ``[T*k]`` int32, the sorted
        position of each pair.

    Raises:
        mixq.InvalidArgumentError: (CPU) an id outside ``[0, num_experts)``, naming topk_ids.
    """
    require_array(topk_ids, "topk_ids")
    ids = detach(topk_ids)
    if len(ids.shape) != 2:
        raise InvalidArgumentError(f"topk_ids: expected [T, k], got shape {tuple(ids.shape)}")
    R = ids.shape[0] * ids.shape[1]
    if out is None:
        perm = empty_like_place(ids, (R,), "int32")
        offsets = empty_like_place(ids, (int(num_experts) + 1,), "int32")
        inverse = empty_like_place(ids, (R,), "int32")
    else:
        perm, offsets, inverse = out
    if workspace is None and is_cuda(ids):
        workspace = _workspace(ids, _mixq.moe_route_workspace_size(int(num_experts)))
    _mixq.moe_route(ids, int(num_experts), offsets, perm, inverse, error,
                    current_stream(ids, stream), workspace)
    _record_streams(ids, stream, (perm, offsets, inverse, workspace))
    return perm, offsets, inverse


def moe_gather(x, permutation, topk, out=None, stream=None):
    """``out[p] = x[permutation[p] // topk]``: the tokens' rows in the routed (expert-sorted)
    order. x ``[T, K]``, permutation ``[T*topk]`` int32 (from :func:`moe_route`), out
    ``[T*topk, K]`` of x's dtype (None allocates one)."""
    require_array(x, "x")
    require_array(permutation, "permutation")
    x = detach(x)
    if out is None:
        out = empty_like_place(x, (permutation.shape[0], x.shape[-1]), dtype_name(x))
    _mixq.moe_gather(x, detach(permutation), int(topk), out, current_stream(x, stream))
    _record_streams(x, stream, (out,))
    return out


def moe_scatter_add(ys, inverse, topk_weights, out=None, accumulate=False, stream=None):
    """``out[t] = sum_j topk_weights[t, j] * ys[inverse[t*k + j]]`` (``+ out[t]`` when
    accumulate), summed in float32 in the order j = 0 .. k-1 (deterministic).

    ys ``[T*k, N]``, inverse ``[T*k]`` int32 (from :func:`moe_route`), topk_weights ``[T, k]``
    float32, out ``[T, N]`` (None allocates one of ys's dtype; accumulate needs out)."""
    require_array(ys, "ys")
    require_array(topk_weights, "topk_weights")
    ys = detach(ys)
    if out is None:
        if accumulate:
            raise InvalidArgumentError("out: accumulate=True needs the array to add to")
        out = empty_like_place(ys, (topk_weights.shape[0], ys.shape[-1]), dtype_name(ys))
    _mixq.moe_scatter_add(ys, detach(inverse), detach(topk_weights), out, bool(accumulate),
                          current_stream(ys, stream))
    _record_streams(ys, stream, (out,))
    return out


def moe_mlp_workspace_size(w_gate_up, w_down, tokens, topk, dtype="float32"):
    """Scratch bytes of a :func:`moe_mlp` call (dtype: x's dtype name or torch dtype)."""
    return _mixq.moe_mlp_workspace_size(w_gate_up, w_down, int(tokens), int(topk),
                                        _dtype_arg(dtype))


def moe_mlp(x, topk_ids, topk_weights, w_gate_up, w_down, activation="silu", out=None,
            stream=None, *, error=None, workspace=None, num_threads=0):
    """The routed expert MLP:
    ``out[t] = sum_j topk_weights[t, j] * down_e(act(gate_e(x[t])) * up_e(x[t]))``,
    ``e = topk_ids[t, j]``.

    Args:
        x: ``[T, hidden]`` float32 / float16 / bfloat16 on the experts' device.
        topk_ids: ``[T, k]`` int32 expert ids.
        topk_weights: ``[T, k]`` float32 routing weights.
        w_gate_up: :class:`PreparedExperts` of the fused gate+up weights (N = 2 * intermediate,
            gate rows first: :func:`fuse_gate_up`), K = hidden.
        w_down: :class:`PreparedExperts`, N = hidden, K = intermediate.
        activation: ``"silu"`` or ``"gelu"`` (tanh form), applied to gate.
        out: ``[T, hidden]``; None allocates one like x.
        stream, error, workspace, num_threads: as for :func:`grouped_linear`
            (workspace: :func:`moe_mlp_workspace_size` bytes).

    Returns:
        out.

    Raises:
        mixq.InvalidArgumentError: (CPU) an id outside ``[0, E)`` (naming topk_ids); shapes,
            dtypes or devices that do not match (naming the argument).
    """
    for a, name in ((x, "x"), (topk_ids, "topk_ids"), (topk_weights, "topk_weights")):
        require_array(a, name)
    x = detach(x)
    T = x.shape[0] if len(x.shape) else 0
    if out is None:
        out = empty_like_place(x, tuple(x.shape[:-1]) + (w_down.N,), _float_dtype(x))
    if T == 0:
        return out
    if workspace is None and is_cuda(x):
        k = topk_ids.shape[-1]
        workspace = _workspace(x, _mixq.moe_mlp_workspace_size(w_gate_up, w_down, T, k,
                                                               _dtype_arg(dtype_name(x))))
    _mixq.moe_mlp(x, detach(topk_ids), detach(topk_weights), w_gate_up, w_down, out,
                  str(activation), error, current_stream(x, stream), workspace, num_threads)
    _record_streams(x, stream, (out, workspace))
    return out


def _float_dtype(x):
    dt = dtype_name(x)
    return dt if dt in ("float32", "float16", "bfloat16") else "float32"


_DTYPE_ARGS = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _dtype_arg(dtype):
    name = str(dtype).replace("torch.", "")
    return _DTYPE_ARGS.get(name, name)

