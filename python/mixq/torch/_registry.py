"""Prepared weights by integer handle.

torch custom ops take tensors and scalars, not arbitrary Python objects; a module passes its
prepared weight's handle (a Python int, constant for the module's life) instead. Under
torch.compile the handle is a constant of the traced graph, so forward traces with
fullgraph=True, and the fake implementation reads N from the registry without touching data.
"""

import itertools
import threading

_lock = threading.Lock()
_next = itertools.count(1)
_weights = {}


def register(prepared):
    """Store a PreparedWeight; returns its handle (an int > 0)."""
    with _lock:
        handle = next(_next)
        _weights[handle] = prepared
    return handle


def get(handle):
    """The PreparedWeight of `handle`; KeyError (with the handle) when released or unknown."""
    try:
        return _weights[handle]
    except KeyError:
        raise KeyError(f"mixq: no prepared weight with handle {handle} (released with its "
                       "module?)") from None


def release(handle):
    """Forget a handle (called when its QuantLinear is garbage-collected)."""
    with _lock:
        _weights.pop(handle, None)


def count():
    """Number of live handles (tests)."""
    return len(_weights)
