"""The framework-agnostic API: quantize, prepare, linear, conv2d and their queries.

Inputs are any array object that can be viewed without a copy: numpy arrays, torch tensors
(CPU or CUDA), CuPy arrays, other DLPack or (CUDA) array-interface producers. Outputs and
workspaces that the caller does not pass are allocated by the input's own library on the
input's device; GPU work is enqueued on the caller's current stream (torch's or CuPy's) and
nothing synchronises the host.
"""

import math

from . import _mixq
from .quantized import QuantizedActivations
from ._arrays import (current_stream, detach, dtype_name, empty_like_place, framework,
                      require_array)

__all__ = ["quantize", "prepare", "linear", "conv2d", "dequantize", "kernel_name",
           "workspace_size", "conv2d_output_size", "scheme_name"]

_CLAMPS = {None: (-math.inf, math.inf), "none": (-math.inf, math.inf), "relu": (0.0, math.inf),
           "relu6": (0.0, 6.0)}


def quantize(w, scheme):
    """Quantize a host float matrix into a :class:`mixq.QuantizedWeight`.

    Args:
        w: ``[N, K]`` float32 / float16 / bfloat16 host array, rows contiguous (torch
            ``Linear.weight`` layout: rows are output features). A 4-D convolution weight
            ``[Co, Ci, Kh, Kw]`` is flattened to ``[Co, Ci*Kh*Kw]`` (prepare it with
            ``conv=(Ci, Kh, Kw)``).
        scheme: a scheme name such as ``"w4g128"``, ``"w8g128"``, ``"w4g128zp"``,
            ``"w8pc"`` or ``"fp8b128"`` (see the README's scheme table).

    Returns:
        The quantized weight (round to nearest; every element within half a step).

    Raises:
        mixq.InvalidArgumentError: an unknown scheme, a GPU array, a bad dtype or shape.
    """
    require_array(w, "w")
    w = detach(w)
    if len(w.shape) == 4:
        w = w.reshape(w.shape[0], -1)
    return _mixq.quantize(w, scheme)


def scheme_name(name):
    """The canonical name of a scheme (validates it; raises InvalidArgumentError if unknown)."""
    return _mixq.scheme_name(name)


def dequantize(qw, original_order=True):
    """Dequantize a :class:`mixq.QuantizedWeight` to a float32 numpy array ``[N, K]``.

    Args:
        qw: the quantized weight.
        original_order: undo an act-order permutation (GPTQ ``g_idx``) so that column k is the
            checkpoint's column k (True), or keep mixq's canonical column order (False).

    Returns:
        numpy.ndarray of float32, exactly the values every backend multiplies with.
    """
    return qw.dequantize(original_order)


def prepare(qw, backend="auto", act="none", *, act_block=0, device=0, force_kernel="",
            conv=None, conv_order="cikhkw", input_quant=(1.0, 0), output_quant=(1.0, 0),
            tuning=""):
    """Prepare (repack) a quantized weight for one backend; do it once, call linear many times.

    Args:
        qw: a :class:`mixq.QuantizedWeight` (from :func:`quantize` or :func:`mixq.load`).
        backend: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"`` or
            ``"ref"`` (the exact float64 reference kernels).
        act: how activations meet the weights: ``"none"`` (weight-only), ``"int8"`` (W8A8 per
            block), ``"fp8"`` (per-token 1x128 e4m3; fp8b128 weights, or W4A8: 4-bit weights in groups of
            128, symmetric or zero-point; CUDA runs W4A8 on Hopper, plain linear only) or
            ``"int8-per-tensor"`` (int8 inputs, CNNs).
        act_block: the INT8 activation block along K (0: the weight's block).
        device: CUDA ordinal for ``backend="cuda"``.
        force_kernel: a kernel family to force for every M it serves (benchmarks, tests; the
            names are in docs/architecture.md), e.g. ``"sm90_wo_ws"``.
        conv: ``(Ci, Kh, Kw)`` to prepare a convolution weight (K = Ci*Kh*Kw) for
            :func:`conv2d`; None for a linear weight.
        conv_order: K order of a convolution weight: ``"cikhkw"`` (torch / MNN) or
            ``"khkwci"``.
        input_quant, output_quant: ``(scale, zero)`` of int8-per-tensor inputs / outputs.
        tuning: the kernels' knobs as ``"key=value,..."`` over the process default
            (``MIXQ_TUNE``; keys in include/mixq/tuning.hpp, e.g. ``"wo_token_tile=64"``); a
            wrong key or value raises :class:`mixq.InvalidArgumentError` naming it.

    Returns:
        A :class:`mixq.PreparedWeight`.
    """
    opts = dict(backend=backend, act=act, act_block=act_block, device=device,
                force_kernel=force_kernel, input_scale=float(input_quant[0]),
                input_zero=int(input_quant[1]), output_scale=float(output_quant[0]),
                output_zero=int(output_quant[1]), tuning=str(tuning))
    if conv is None:
        return _mixq.prepare(qw, **opts)
    ci, kh, kw = conv
    return _mixq.prepare_conv(qw, ci, kh, kw, conv_order, **opts)


def kernel_name(prepared, M, dtype=None):
    """Name of the kernel a linear call with M rows runs on this prepared weight; `dtype` is
    the activations' dtype ('float16', 'bfloat16', 'float32' or a torch dtype; default: the
    weight's default activation dtype)."""
    if dtype is None:
        return prepared.kernel_name(M)
    return prepared.kernel_name(M, str(dtype).replace("torch.", ""))


def workspace_size(prepared, M):
    """Scratch bytes a linear call with M rows needs (0 when none)."""
    return prepared.workspace_size(M)


def conv2d_output_size(H, W, kernel, stride=1, padding=0, dilation=1):
    """Output spatial size ``(Ho, Wo)`` of a convolution (kernel = ``(Kh, Kw)``)."""
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    return _mixq.conv2d_output_size(H, W, kernel[0], kernel[1], sh, sw, ph, pw, dh, dw)


# the x dtypes a conv2d call takes on some backend (conv2d_workspace_size parses these names)
_CONV_DTYPES = ("float32", "float16", "bfloat16", "int8")


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _clamp(clamp):
    """None / 'relu' / 'relu6' / (lo, hi) with None for an open side -> (lo, hi) floats."""
    if clamp is None or isinstance(clamp, str):
        try:
            return _CLAMPS[clamp]
        except KeyError:
            raise ValueError(f"clamp: {clamp!r} is not one of None, 'relu', 'relu6' or a "
                             "(lo, hi) pair") from None
    lo, hi = clamp
    return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))


def _out_dtype(x, out_dtype):
    if out_dtype is not None:
        return str(out_dtype).replace("torch.", "")
    dt = dtype_name(x)
    # Outputs are float; for an input of another dtype (int8-per-tensor's int8, or a wrong one
    # that the extension will report, naming x) allocate float32.
    return dt if dt in ("float32", "float16", "bfloat16") else "float32"


def _record_streams(x, stream, arrays):
    """A torch output / workspace made on the current stream but used on another one must not
    be recycled by the caching allocator before that stream is done with it."""
    if stream is None or framework(x) != "torch" or not x.is_cuda:
        return
    import torch
    current = torch.cuda.current_stream(x.device).cuda_stream
    handle = current_stream(x, stream)
    if handle == current:
        return
    ext = torch.cuda.ExternalStream(handle, device=x.device)
    for a in arrays:
        if a is not None:
            a.record_stream(ext)


def linear(x, prepared, out=None, bias=None, clamp=None, stream=None, *, workspace=None,
           out_dtype=None, num_threads=0):
    """``out = clamp(x @ W.T + bias)`` with a prepared quantized weight W ``[N, K]``.

    Args:
        x: ``[..., K]`` activations (float32 / float16 / bfloat16; int8 for int8-per-tensor
            weights) on the weight's device, rows contiguous; leading dimensions must merge
            into one row index without a copy. Or a :class:`mixq.QuantizedActivations` of the
            weight's ``act`` kind and block (int8-block / fp8-block weights): the same bits as
            the float x it was quantized from.
        prepared: a :class:`mixq.PreparedWeight`.
        out: ``[..., N]`` output, written in place; None allocates one with x's library on
            x's device (dtype `out_dtype`, default x's dtype; float32 for int8 x). Or a
            :class:`mixq.QuantizedActivations` of M x N: the output leaves quantized for the next
            layer, the bytes :func:`mixq.quantize_activations` writes for the float32 output.
        bias: optional ``[N]`` float vector on the same device.
        clamp: None, ``"relu"``, ``"relu6"`` or ``(lo, hi)`` (None for an open side).
        stream: CUDA stream (int handle, torch.cuda.Stream or CuPy stream); None uses x's
            library's current stream. Ignored on the CPU.
        workspace: a uint8 array of at least ``workspace_size(prepared, M)`` bytes on the
            weight's device; None allocates one per call (calls on one weight may then run
            concurrently).
        out_dtype: dtype name ('float32', 'float16', 'bfloat16', 'int8') or torch dtype of an
            allocated output.
        num_threads: CPU threads (0: all, or MIXQ_NUM_THREADS).

    Returns:
        out.

    Raises:
        mixq.InvalidArgumentError: naming the argument (x, out, bias, workspace) and the values.
    """
    if isinstance(x, QuantizedActivations) or isinstance(out, QuantizedActivations):
        return _linear_acts(x, prepared, out, bias, clamp, stream, workspace, out_dtype,
                            num_threads)
    require_array(x, "x")
    x = detach(x)
    N = prepared.N
    M = math.prod(x.shape[:-1])
    if out is None:
        out = empty_like_place(x, tuple(x.shape[:-1]) + (N,), _out_dtype(x, out_dtype))
    if M == 0:
        return out
    if workspace is None:
        nbytes = prepared.workspace_size(M)
        if nbytes:
            workspace = empty_like_place(x, (nbytes,), "uint8")
    lo, hi = _clamp(clamp)
    _mixq.linear(x, prepared, out, detach(bias) if bias is not None else None, lo, hi,
                 current_stream(x, stream), workspace, num_threads)
    _record_streams(x, stream, (out, workspace))
    return out


def _linear_acts(x, prepared, out, bias, clamp, stream, workspace, out_dtype, num_threads):
    """linear with a quantized input (x), a quantized output (out), or both: 2-D arrays."""
    quant_x = isinstance(x, QuantizedActivations)
    anchor = x.q if quant_x else detach(x)  # the library and device of allocations and streams
    M = x.M if quant_x else int(x.shape[0])
    N = prepared.N
    if out is None:
        out = empty_like_place(anchor, (M, N), out_dtype or ("float32" if quant_x
                                                             else dtype_name(anchor)))
    quant_y = isinstance(out, QuantizedActivations)
    if M == 0:
        return out
    if workspace is None:
        nbytes = (_mixq.quantized_output_workspace_size(prepared, M, out.kind, out.block)
                  if quant_y else prepared.workspace_size(M))
        if nbytes:
            workspace = empty_like_place(anchor, (nbytes,), "uint8")
    xk, xb, xq, xs, xo, xsum = x._parts() if quant_x else ("", 0, None, None, None, None)
    yk, yb, yq, ys, yo, ysum = out._parts() if quant_y else ("", 0, None, None, None, None)
    lo, hi = _clamp(clamp)
    _mixq.linear_acts(None if quant_x else anchor, xk, xb, xq, xs, xo, xsum, prepared,
                      None if quant_y else out, yk, yb, yq, ys, yo, ysum,
                      detach(bias) if bias is not None else None, lo, hi,
                      current_stream(anchor, stream), workspace, num_threads)
    _record_streams(anchor, stream, (workspace,))
    return out


def conv2d(x, prepared, out=None, bias=None, clamp=None, stride=1, padding=0, dilation=1,
           layout="nchw", stream=None, *, out_dtype=None, num_threads=0):
    """2-D convolution with a prepared convolution weight (``prepare(qw, conv=(Ci, Kh, Kw))``).

    Args:
        x: ``[B, Ci, H, W]`` (``layout="nchw"``) or ``[B, H, W, Ci]`` (``"nhwc"``), contiguous.
        prepared: a convolution :class:`mixq.PreparedWeight` (CPU, reference or CUDA backend;
            CUDA: weight-only or act="int8-per-tensor" with int8 x).
        out: ``[B, Co, Ho, Wo]`` / ``[B, Ho, Wo, Co]``; None allocates one like x.
        bias, clamp, stream, out_dtype, num_threads: as for :func:`linear`.
        stride, padding, dilation: ints or ``(h, w)`` pairs.
        layout: ``"nchw"`` or ``"nhwc"``, of both x and out.

    Returns:
        out.
    """
    require_array(x, "x")
    x = detach(x)
    geom = prepared.conv_geometry
    if geom is None:
        raise ValueError("prepared: a linear weight; prepare it with conv=(Ci, Kh, Kw)")
    _, kh, kw = geom
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    if len(x.shape) != 4:
        raise ValueError(f"x: expected a 4-D array, got shape {tuple(x.shape)}")
    B, H, W = (x.shape[0], x.shape[2], x.shape[3]) if layout == "nchw" else x.shape[:3]
    Ho, Wo = _mixq.conv2d_output_size(H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    if out is None:
        shape = (B, prepared.N, Ho, Wo) if layout == "nchw" else (B, Ho, Wo, prepared.N)
        out = empty_like_place(x, shape, _out_dtype(x, out_dtype))
    # CUDA conv scratch (C++ conv2d_workspace_size): the GEMM's, sized by the B*Ho*Wo output
    # pixels, on Hopper an NCHW call's NHWC copies of x and y, without which it would run the
    # slower sm_80 kernel, and an INT8 stem's f16 copy of x. The CPU conv takes none. (An x dtype
    # the conv does not take gets none here: the call below names x.)
    workspace = None
    nbytes = 0
    dt = dtype_name(x)
    if prepared.backend == "cuda" and B * Ho * Wo > 0 and dt in _CONV_DTYPES:
        Ci = x.shape[1] if layout == "nchw" else x.shape[3]
        nbytes = _mixq.conv2d_workspace_size(prepared, B, Ci, H, W, dt, layout, sh, sw, ph, pw,
                                             dh, dw)
    if nbytes:
        workspace = empty_like_place(x, (nbytes,), "uint8")
    lo, hi = _clamp(clamp)
    _mixq.conv2d(x, prepared, out, detach(bias) if bias is not None else None, lo, hi, sh, sw,
                 ph, pw, dh, dw, layout, current_stream(x, stream), workspace, num_threads)
    _record_streams(x, stream, (out, workspace))
    return out
