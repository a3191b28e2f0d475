#!/usr/bin/env python3
"""Table of a same-process A/B (cuda_wo_sweep --variants ... --json FILE): one row per
(shape, scheme, act, M), one column per variant with the median over the rounds in us, then each
variant's time relative to the first variant (< 1: faster)."""
import json
import statistics
import sys

rows = json.load(open(sys.argv[1]))["rows"]
variants = []
times = {}
kernels = {}
for r in rows:
    v = r.get("variant", "")
    if v not in variants:
        variants.append(v)
    key = (r["K"], r["N"], r["scheme"], r["act"], r["M"])
    times.setdefault(key, {}).setdefault(v, []).append(r["mixq_us"])
    kernels.setdefault(key, {})[v] = r["kernel"]
for i, v in enumerate(variants):
    print(f"v{i} = {v or 'default'}")
print("K x N        scheme  act  M    " + " ".join(f"{'v%d' % i:>7}" for i in range(len(variants))) +
      "   " + " ".join(f"{'v%d/v0' % i:>6}" for i in range(1, len(variants))) + "   kernel(v0 .. vn)")
for key, per in times.items():
    med = [statistics.median(per[v]) if v in per else float("nan") for v in variants]
    rel = [m / med[0] for m in med[1:]]
    ks = " ".join(kernels[key].get(v, "-").replace("sm80_wo_stream_", "") for v in variants)
    print(f"{key[0]}x{key[1]:<7} {key[2]:<7} {key[3]:<4} {key[4]:<4} " + " ".join(f"{m:7.1f}" for m in med) +
          "   " + " ".join(f"{x:6.3f}" for x in rel) + "   " + ks)
