#!/usr/bin/env python3
"""shared/bench/peers.py with every case settled first, as `mixq bench` settles its own
(docs/decisions/bench-settle.md): each peer's calls run untimed for SETTLE_MS (default 200) before
its timed replays, so both sides of a comparison run at the clocks of sustained load.

peers.py is carried to the GPU machine as peers/peers.py (an ignored folder); its environment
variables (OPS, MS, SHAPES, TAG, CEIL, OUT) work unchanged:

    OUT=$OUT TAG=big_settled CEIL=0 OPS=cublas_fp8_block128 MS=2048,4096 SHAPES=16384x7168 \
        python3 bench/peers_settled.py
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "peers"))
sys.path.insert(0, here)

import peers  # noqa: E402  (shared/bench/peers.py)
from torch_settle import settle  # noqa: E402

SETTLE_MS = float(os.environ.get("SETTLE_MS", "200"))
_time_calls = peers.time_calls


def settled_time_calls(make_call, n_rot, reps=30):
    """peers.time_calls after SETTLE_MS of the same rotation of calls."""
    settle([make_call(i % n_rot) for i in range(max(n_rot, 10))], SETTLE_MS)
    return _time_calls(make_call, n_rot, reps)


peers.time_calls = settled_time_calls
peers.results["notes"].append("each case settled for %g ms of its own calls before it was timed" % SETTLE_MS)
peers.main()
