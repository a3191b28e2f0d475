#!/usr/bin/env python3
"""Few-token W8A8 table: mixq bench rows of fp8b128:fp8 and w8g128:int8 (one JSON) beside
peers.py's cuBLASLt block FP8 (M padded to 16) and torch._int_mm (M padded to 32), with each row's
share of the streaming-read ceiling of the same run.
  python3 scripts/w8a8_small_m_table.py w8a8_small_m.json peers_w8a8.json"""
import json, re, sys

d = json.load(open(sys.argv[1]))
ceil = float(re.search(r"streaming-read ceiling ([0-9.]+) TB/s", d["device"]).group(1))
peer = {}
for r in json.load(open(sys.argv[2]))["rows"]:
    peer[(r["K"], r["N"], r["M"])] = r
rows = {}
for r in d["results"]:
    if not r.get("unsupported"):
        rows[(r["scheme"], r["K"], r["N"], r["M"])] = r
print("Device: %s\n" % d["device"])
print("| K×N | M | FP8 µs | % ceil | FP8 kernel | cuBLASLt µs | x | INT8 µs | % ceil | _int_mm µs | x |")
print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
keys = sorted({(K, N, M) for (_, K, N, M) in rows}, key=lambda k: (k[0] * k[1], k[2]))
for K, N, M in keys:
    f = rows.get(("fp8b128:fp8", K, N, M))
    i = rows.get(("w8g128:int8", K, N, M))
    pf = peer.get((K, N, max(16, (M + 15) // 16 * 16)), {}).get("cublas_fp8_block128")
    pi = peer.get((K, N, max(32, (M + 31) // 32 * 32)), {}).get("cublas_int8")
    def eff(r):
        return r["weight_bytes"] / (r["time_us"] * 1e-6) / (ceil * 1e12) * 100
    cells = ["%dx%d" % (K, N), str(M)]
    cells += ["%.1f" % f["time_us"] + ("" if f.get("ok") else " FAIL"), "%.0f%%" % eff(f), f["kernel"]] if f else ["-"] * 3
    cells += ["%.1f" % pf, "%.2f" % (pf / f["time_us"])] if f and pf else ["-"] * 2
    cells += ["%.1f" % i["time_us"] + ("" if i.get("ok") else " FAIL"), "%.0f%%" % eff(i)] if i else ["-"] * 2
    cells += ["%.1f" % pi, "%.2f" % (pi / i["time_us"])] if i and pi else ["-"] * 2
    print("| " + " | ".join(cells) + " |")
