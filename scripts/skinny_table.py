#!/usr/bin/env python3
"""Table of the few-token FP8 W8A8 rows: mixq bench JSON of the default dispatch (the skinny
kernel), of the 128-row tiles forced, and peers.py's cuBLASLt block FP8 (M padded to 16 there).
  python3 scripts/skinny_table.py skinny.json tiles128.json peers_fp8.json
  LABEL="no PDL" python3 scripts/skinny_table.py skinny.json skinny_nopdl.json   (other baseline)"""
import json, os, re, sys


def rows(path):
    d = json.load(open(path))
    ceil = float(re.search(r"streaming-read ceiling ([0-9.]+) TB/s", d["device"]).group(1))
    out = {}
    for r in d["results"]:
        if not r.get("unsupported"):
            out[(r["K"], r["N"], r["M"])] = r
    return out, ceil, d["device"]


new, ceil, dev = rows(sys.argv[1])
old = rows(sys.argv[2])[0] if len(sys.argv) > 2 else {}
peer = {}
if len(sys.argv) > 3:
    try:
        for r in json.load(open(sys.argv[3]))["rows"]:
            if r.get("cublas_fp8_block128"):
                peer[(r["K"], r["N"], r["M"])] = r["cublas_fp8_block128"]
    except (OSError, ValueError):
        pass
print("Device: %s\n" % dev)
label = os.environ.get("LABEL", "128-row tiles")
print("| K×N | M | mixq µs | %% read ceiling | ok | kernel | %s µs | speedup | cuBLASLt µs (M→16k) | x cuBLASLt |" % label)
print("|---|---:|---:|---:|---|---|---:|---:|---:|---:|")
for (K, N, M), r in sorted(new.items(), key=lambda kv: (kv[0][0] * kv[0][1], kv[0][2])):
    us = r["time_us"]
    eff = r["weight_bytes"] / (us * 1e-6) / (ceil * 1e12) * 100
    o = old.get((K, N, M))
    pm = max(16, (M + 15) // 16 * 16)
    p = peer.get((K, N, pm))
    print("| %dx%d | %d | %.1f | %.0f%% | %s | %s | %s | %s | %s | %s |" % (
        K, N, M, us, eff, "ok" if r.get("ok") else "FAIL", r["kernel"],
        "%.1f" % o["time_us"] if o else "-", "%.2f" % (o["time_us"] / us) if o else "-",
        "%.1f" % p if p else "-", "%.2f" % (p / us) if p else "-"))
