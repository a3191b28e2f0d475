"""Tensor-parallel shards of a quantized weight.

Column-parallel (``axis="column"``) splits N: rank r holds output rows ``shard_range(N, r,
world)`` and the ranks' outputs concatenated along the last dimension are the global output.
Row-parallel (``axis="row"``) splits K: rank r holds input columns ``shard_range(K, r, world)``
(original order, also for act-order GPTQ: no rank permutes the global input) and the global
output is the sum of the ranks' outputs, so a bias or clamp belongs after the sum.

Any split is accepted: a cut through a quantization group or an FP8 128x128 block keeps that
block's scale whole and records where the shard starts in it, so every element of a shard
dequantizes to the global weight's bits. Every backend runs such shards weight-only; the
INT8 / FP8 activation paths need K cut on whole blocks (``granularity`` = the block size).
"""

from . import _mixq

__all__ = ["shard", "shard_range", "load_shard", "check_shard_set"]


def shard_range(dim, rank, world, granularity=1):
    """``(begin, end)`` of `dim` held by `rank` of `world`: balanced contiguous ranges cut on
    multiples of `granularity` (the first ``units % world`` ranks hold one unit more).

    Raises:
        mixq.InvalidArgumentError: a bad rank / world / granularity, or a rank left empty.
    """
    return tuple(_mixq.shard_range(int(dim), int(rank), int(world), int(granularity)))


def shard(w, rank, world, axis="column", granularity=1):
    """The :class:`mixq.QuantizedWeight` of one shard of `w` (any scheme, any split).

    Args:
        w: the global quantized weight ``[N, K]``.
        rank, world: this shard's index and the number of shards.
        axis: ``"column"`` (split N) or ``"row"`` (split K).
        granularity: split points on multiples of this many elements (1: anywhere; e.g. the
            group size, for kernels that need whole groups).
    """
    return _mixq.shard(w, int(rank), int(world), axis, int(granularity))


def load_shard(path, tensor, rank, world, axis="column", granularity=1):
    """Read one shard of a checkpoint weight; equal to ``shard(load(path, tensor), ...)``. GGUF
    and mixq's own layout read only the shard's rows for column-parallel shards."""
    return _mixq.load_shard(str(path), tensor, int(rank), int(world), axis, int(granularity))


def check_shard_set(shards, world, axis="column", granularity=1, ranks=None):
    """Check that `shards` (rank order, or the ranks given) are one complete split of one weight:
    every rank once, one scheme, the unsplit dimension equal. Raises
    :class:`mixq.InvalidArgumentError` naming the first mismatch."""
    ranks = list(range(len(shards))) if ranks is None else [int(r) for r in ranks]
    _mixq.check_shard_set(list(shards), ranks, int(world), axis, int(granularity))
