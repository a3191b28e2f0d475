"""The clocks of sustained load for the torch peer scripts: a case's own calls, untimed, before it is timed.

`mixq bench` settles each case the same way (docs/decisions/bench-settle.md), so that both sides of
a comparison run at the clocks a long run of that work holds.
"""
import time

import torch


def settle(calls, settle_ms):
    """Runs the zero-argument `calls` in rounds, synchronising after each, for settle_ms of wall
    clock (a short queue: the wall clock tracks the GPU's work)."""
    end = time.perf_counter() + settle_ms / 1e3
    while time.perf_counter() < end:
        for c in calls:
            c()
        torch.cuda.synchronize()
