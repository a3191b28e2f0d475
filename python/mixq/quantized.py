"""Activations quantized per row and block of K, in the layout the W8A8 / FP8 products take:
quantize them once for several weights, or let one layer write its output quantized for the next
(``mixq.linear(x, w1, out=yq)``, then ``mixq.linear(yq, w2)``)."""

from . import _mixq
from ._arrays import current_stream, detach, empty_like_place, require_array

__all__ = ["QuantizedActivations", "quantize_activations"]

_KINDS = ("fp8-block", "int8-block")


class QuantizedActivations:
    """Codes and per-(row, block) meta of ``M`` rows of ``K`` activations.

    ``kind``: ``"fp8-block"`` (e4m3 codes as uint8, one f32 scale per row and 128 columns:
    DeepSeek-V3's 1x128) or ``"int8-block"`` (int8 codes, f32 scale and offset and the int32 code
    sum per row and ``block`` columns, block 32, 64, 128 or 256). Arrays (the C++ layout,
    ``include/mixq/ops.hpp``): ``q`` ``[M, row_pitch]`` (K rounded up to 16), ``scale`` /
    ``offset`` / ``sums`` ``[n_blocks, meta_pitch]`` (M rounded up to 4); value (m, b) of a meta
    array at ``[b, m]``.
    """

    def __init__(self, kind, block, q, scale, offset=None, sums=None, K=None):
        if kind not in _KINDS:
            raise ValueError(f"kind '{kind}' is not one of {', '.join(_KINDS)}")
        self.kind, self.block = kind, int(block)
        self.q, self.scale, self.offset, self.sums = q, scale, offset, sums
        self.M = int(q.shape[0])
        self.K = int(K) if K is not None else int(q.shape[1])

    @classmethod
    def empty(cls, kind, M, K, block=128, like=None):
        """Uninitialised buffers for M x K activations, made by `like`'s library on its device
        (numpy when None)."""
        if kind not in _KINDS:
            raise ValueError(f"kind '{kind}' is not one of {', '.join(_KINDS)}")
        if kind == "fp8-block":
            block = 128
        if like is None:
            import numpy as np
            like = np.empty(0, dtype=np.float32)
        nb = (K + block - 1) // block
        rp, mp = _mixq.act_quant_row_pitch(K), _mixq.act_quant_meta_pitch(M)
        q = empty_like_place(like, (M, rp), "uint8" if kind == "fp8-block" else "int8")
        scale = empty_like_place(like, (nb, mp), "float32")
        offset = sums = None
        if kind == "int8-block":
            offset = empty_like_place(like, (nb, mp), "float32")
            sums = empty_like_place(like, (nb, mp), "int32")
        return cls(kind, block, q, scale, offset, sums, K=K)

    @property
    def n_blocks(self):
        return (self.K + self.block - 1) // self.block

    def _parts(self):
        """(kind, block, q, scale, offset, sums) as views of M rows x K columns."""
        meta = lambda a: None if a is None else a[:, :self.M]  # noqa: E731
        return (self.kind, self.block, self.q[:, :self.K], meta(self.scale), meta(self.offset),
                meta(self.sums))

    def __repr__(self):
        return f"QuantizedActivations({self.kind}, block {self.block}, {self.M} x {self.K})"


def quantize_activations(x, kind="fp8-block", block=128, out=None, stream=None):
    """Quantizes ``x`` ``[M, K]`` (float32 / float16 / bfloat16, on the CPU or a GPU) into
    `out` (a :class:`QuantizedActivations` of M x K; None allocates one next to x): the codes
    and meta ``linear`` with an ``act=kind`` weight computes inside the call, bit for bit.
    """
    require_array(x, "x")
    x = detach(x)
    if len(x.shape) != 2:
        raise ValueError(f"x must be [M, K], got shape {tuple(x.shape)}")
    M, K = int(x.shape[0]), int(x.shape[1])
    if out is None:
        out = QuantizedActivations.empty(kind, M, K, block, like=x)
    kind_, block_, q, scale, offset, sums = out._parts()
    _mixq.quantize_activations(x, kind_, block_, q, scale, offset, sums, current_stream(x, stream))
    return out
