"""quantize_ / quantize_convs_: replace a model's nn.Linear layers by QuantLinear, its nn.Conv2d
layers by QuantConv2d, in place."""

import fnmatch
import os
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from ..errors import InvalidArgumentError
from .conv import QuantConv2d, unsupported_reason
from .fused import DEFAULT_GROUPS, fuse_linears_
from .linear import QuantLinear, quantize_host

__all__ = ["quantize_", "quantize_convs_", "skipped", "linear_layers"]


def skipped(name, skip):
    """True when module `name` matches one of `skip`: a glob pattern matched anywhere in the
    name ('lm_head', '*.mlp.*', 'layers.0.*'), or a callable(name) -> bool."""
    if skip is None:
        return False
    if callable(skip):
        return bool(skip(name))
    if isinstance(skip, str):
        skip = (skip,)
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(name, f"*{p}*")
               for p in skip)


def linear_layers(model, skip=None):
    """Yields ``(parent, child_name, linear, full_name)`` for every ``nn.Linear`` of `model` (exact
    type: QuantLinear layers are not revisited) whose name `skip` does not match. The modules are
    listed first, so the caller may replace each child as it goes."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is not nn.Linear:
                continue
            full = f"{name}.{child_name}" if name else child_name
            if not skipped(full, skip):
                yield module, child_name, child, full


def quantize_(model, scheme, skip=None, *, backend="auto", act="none", device=None,
              workers=None, fuse=False, **kwargs):
    """Replace every ``nn.Linear`` of `model` (in place) by a :class:`QuantLinear` quantized
    with `scheme`.

    The host quantization of the layers runs on `workers` threads (default: one per CPU; the
    C++ quantizer releases the GIL), so an 8B model takes seconds, not minutes; the layers are
    then prepared one by one in model order.

    Args:
        model: an ``nn.Module``.
        scheme: mixq scheme name ('w4g128', 'w8g128', 'w4g128zp', 'fp8b128', ...), or a
            callable(name, linear) -> scheme name or None (None keeps that layer dense).
        skip: module names to keep dense (see :func:`skipped`), e.g. ``skip=("lm_head",)``.
        backend, act, device, kwargs: passed to :class:`QuantLinear` (as by
            :meth:`QuantLinear.from_linear`).
        workers: threads quantizing on the host (1: sequential).
        fuse: True to first fuse sibling projections that read the same input (q/k/v,
            gate/up; see :func:`fuse_linears_`), or a sequence of ``((members...), name)``
            groups; the fused linear is then quantized as one layer (one launch per group).

    Returns:
        The list of replaced module names.
    """
    if fuse:
        fuse_linears_(model, DEFAULT_GROUPS if fuse is True else fuse, skip=skip)
    todo = []
    for module, child_name, child, full in linear_layers(model, skip):
        s = scheme(full, child) if callable(scheme) else scheme
        if s is not None:
            todo.append((module, child_name, child, full, s))
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    with ThreadPoolExecutor(workers) as pool:
        qweights = pool.map(lambda t: quantize_host(t[2], t[4]), todo)
        for (module, child_name, child, _, _), qw in zip(todo, qweights):
            place = torch.device(device) if device is not None else child.weight.device
            setattr(module, child_name, QuantLinear(qw, child.bias, device=place,
                                                    backend=backend, act=act, **kwargs))
    return [t[3] for t in todo]


def quantize_convs_(model, scheme, skip=None, *, backend="auto", act="none", device=None,
                    **kwargs):
    """Replace every dense ``nn.Conv2d`` of `model` (in place; exact type, groups 1, zero
    padding) by a :class:`QuantConv2d` quantized with `scheme`.

    Args:
        model: an ``nn.Module``.
        scheme: a scheme name with blocks along Ci ('w4g64', 'w8g128', 'w8pc' per output
            channel, ...), or a callable(name, conv) -> scheme name or None (None keeps that
            layer dense), e.g. per channel for a 3-channel stem.
        skip, backend, act, device, kwargs: as for :func:`quantize_`.

    Returns:
        ``(replaced, kept)``: the replaced module names, and the names of the convolutions
        kept dense because mixq does not run them (grouped or depthwise, padding modes other
        than zeros, uneven 'same' padding), each with the reason.

    Raises:
        mixq.InvalidArgumentError naming the layer when `scheme` does not fit it (e.g. blocks
        of 64 along Ci = 3).
    """
    replaced, kept = [], []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is not nn.Conv2d:
                continue
            full = f"{name}.{child_name}" if name else child_name
            if skipped(full, skip):
                continue
            s = scheme(full, child) if callable(scheme) else scheme
            if s is None:
                continue
            reason = unsupported_reason(child)
            if reason:
                kept.append((full, reason))
                continue
            place = torch.device(device) if device is not None else child.weight.device
            try:
                q = QuantConv2d.from_conv(child, s, backend=backend, act=act, device=place, **kwargs)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"{full}: {e}") from e
            setattr(module, child_name, q)
            replaced.append(full)
    return replaced, kept
