"""Prepared weights by integer handle.

torch custom ops take tensors and scalars, not arbitrary Python objects; a module passes its
prepared weight's handle (a Python int, constant for the module's life) instead. Under
torch.compile the handle is a constant of the traced graph, so forward traces with
fullgraph=True, and the fake implementation reads N from the registry without touching data.
Each entry caches what the op reads on every call (K, N, the device, workspace sizes per M), so
a call costs dictionary lookups, not calls into the extension.
"""

import itertools
import threading

from .. import _mixq

_lock = threading.Lock()
_next = itertools.count(1)
_entries = {}


class Entry:
    """A registered PreparedWeight and the facts the op needs per call."""

    __slots__ = ("prepared", "K", "N", "device", "conv", "_workspace", "_conv_workspace", "plans")

    def __init__(self, prepared):
        self.prepared = prepared
        self.K = prepared.K
        self.N = prepared.N
        # -1: host memory (cpu / ref backends), else the CUDA ordinal.
        self.device = prepared.device if prepared.backend == "cuda" else -1
        # (Ci, Kh, Kw) of a convolution weight, else None (linear weights, experts)
        self.conv = getattr(prepared, "conv_geometry", None)
        self._workspace = {}
        self._conv_workspace = {}
        self.plans = {}  # (M, torch dtype) -> (workspace bytes, dtype code): see ops.linear_eager

    def workspace_bytes(self, M):
        """Workspace bytes of a call with M rows (asked once per M)."""
        n = self._workspace.get(M)
        if n is None:
            n = self._workspace[M] = self.prepared.workspace_size(M)
        return n

    def conv_workspace_bytes(self, B, H, W, dtype, layout, stride, padding, dilation):
        """Workspace bytes of a conv2d call on a [B, Ci, H, W] image of `dtype` (mixq's name:
        'f16', ...) in `layout` ('nchw' / 'nhwc'), asked once per geometry: on CUDA an NCHW
        call's NHWC copies count besides its B * Ho * Wo GEMM rows."""
        key = (B, H, W, dtype, layout, stride[0], stride[1], padding[0], padding[1], dilation[0],
               dilation[1])
        n = self._conv_workspace.get(key)
        if n is None:
            n = self._conv_workspace[key] = _mixq.conv2d_workspace_size(
                self.prepared, B, self.conv[0], H, W, dtype, layout, *key[5:])
        return n


def register(prepared):
    """Store a PreparedWeight; returns its handle (an int > 0)."""
    e = Entry(prepared)
    with _lock:
        handle = next(_next)
        _entries[handle] = e
    return handle


def entry(handle):
    """The Entry of `handle`; KeyError (with the handle) when released or unknown."""
    try:
        return _entries[handle]
    except KeyError:
        raise KeyError(f"mixq: no prepared weight with handle {handle} (released with its "
                       "module?)") from None


def get(handle):
    """The PreparedWeight of `handle` (KeyError when released or unknown)."""
    return entry(handle).prepared


def release(handle):
    """Forget a handle (called when its QuantLinear is garbage-collected)."""
    with _lock:
        _entries.pop(handle, None)


def count():
    """Number of live handles (tests)."""
    return len(_entries)
