#!/usr/bin/env python3
"""Tallies issue #4's targets from bench/results/cuda_weight_only.md (the table make_cuda_results.py
writes): python3 scripts/wo_targets.py [bench/results/cuda_weight_only.md]"""
import re
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results/cuda_weight_only.md"
text = open(path).read()
ceil = float(re.search(r"streaming-read ceiling ([0-9.]+) TB/s", text).group(1))
rows = []
for line in text.splitlines():
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) < 15 or not re.fullmatch(r"\d+x\d+", c[0]):
        continue
    f = lambda s: float(s) if s not in ("", "–", "-") else None
    rows.append(dict(shape=c[0], M=int(c[1]), cub=f(c[2]), w4=f(c[3]), x=f(c[4]), pct=c[5], w8=f(c[6]),
                     cubb=f(c[8]), w4b=f(c[9]), w8b=f(c[11]), tg=f(c[12]), marlin=f(c[13]), kern=c[14]))
large = ("14336x21504", "8192x57344", "28672x8192")
out = []
def tally(name, items):
    ok = sum(1 for _, good, _ in items if good)
    out.append(f"{name}: {ok} of {len(items)}")
    for label, good, detail in items:
        if not good:
            out.append(f"  miss {label}: {detail}")
def w8_pct(r):  # int8 codes + f16 scale pairs (4 bytes per group of 128), as the table counts W4
    K, N = map(int, r["shape"].split("x"))
    return N * K * (1 + 2 / 128) / (r["w8"] * 1e-6) / (ceil * 1e12)
tally("#4 M=1,4,16 W4 large >= 85% of the ceiling",
      [(f"{r['shape']} M={r['M']}", int(r["pct"].rstrip("%")) >= 85, r["pct"]) for r in rows
       if r["shape"] in large and r["M"] in (1, 4, 16)])
tally("#4 M=1 W4 faster than Marlin (f16) and tinygemm (bf16)",
      [(r["shape"], r["w4"] < r["marlin"] and r["w4b"] < r["tg"], f"f16 {r['w4']} vs Marlin {r['marlin']}, bf16 {r['w4b']} vs tinygemm {r['tg']}")
       for r in rows if r["M"] == 1])
tally("#4 M=32-256 W4 faster than Marlin and cuBLAS FP16",
      [(f"{r['shape']} M={r['M']}", r["w4"] < r["cub"] and (r["marlin"] is None or r["w4"] < r["marlin"]),
        f"{r['w4']} vs cuBLAS {r['cub']} ({r['cub'] / r['w4']:.2f}x), Marlin {r['marlin']}") for r in rows if 32 <= r["M"] <= 256])
tally("#4 M>=1024 W4 >= 0.95x cuBLAS FP16",
      [(f"{r['shape']} M={r['M']}", r["cub"] / r["w4"] >= 0.95, f"{r['cub'] / r['w4']:.2f}x ({r['kern']})") for r in rows if r["M"] >= 1024])
tally("#4 W8 M=1 large >= 85% (approx.: codes + scales)",
      [(r["shape"], w8_pct(r) >= 0.85, f"{100 * w8_pct(r):.0f}%") for r in rows if r["M"] == 1 and r["shape"] in large])
bf = []
for r in rows:
    for s, a, b in (("W4", r["w4"], r["w4b"]), ("W8", r["w8"], r["w8b"])):
        bf.append((f"{r['shape']} M={r['M']} {s}", b <= 1.05 * a, f"bf16 {b} vs f16 {a} ({b / a:.2f})"))
tally("#4 BF16 within 5% of FP16", bf)
print("\n".join(out))
