#!/usr/bin/env python3
"""INT8 W8A8 g = 64 table of a device call (bench/results/session27/call2.sh):
   python3 scripts/int8_g64_table.py OUT_DIR
OUT_DIR holds int8.json (mixq bench, w8g64:int8 and w8g128:int8 on the default dispatch),
int8_sm80_large.json / int8_sm80_medium.json (w8g64:int8 forced onto the sm_80 kernels that ran it
before) and peers_int8*.json (peers.py: cublas_int8 = torch._int_mm, cublas_fp16)."""
import glob
import json
import os
import sys


def rows(path, scheme):
    if not os.path.exists(path):
        return {}
    return {(r["K"], r["N"], r["M"]): r for r in json.load(open(path))["results"]
            if r["scheme"] == scheme}


def main(out):
    g64 = rows(os.path.join(out, "int8.json"), "w8g64:int8")
    g128 = rows(os.path.join(out, "int8.json"), "w8g128:int8")
    old = rows(os.path.join(out, "int8_sm80_large.json"), "w8g64:int8")
    old.update(rows(os.path.join(out, "int8_sm80_medium.json"), "w8g64:int8"))
    peers = {}
    for f in glob.glob(os.path.join(out, "peers_int8*.json")):
        for r in json.load(open(f)).get("rows", []):
            peers[(r["K"], r["N"], r["M"])] = r
    print("| K×N | M | g64 µs | TOP/s | kernel | sm_80 µs | × sm_80 | g128 µs | g64 / g128 time |"
          " _int_mm µs | × _int_mm | FP16 µs | × FP16 |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    n = hi = fp = 0
    for key in sorted(g64):
        K, N, M = key
        r = g64[key]
        t = r["time_us"]
        o = old.get(key, {}).get("time_us", 0)
        b = g128.get(key, {}).get("time_us", 0)
        p = peers.get(key, {})
        im, f16 = p.get("cublas_int8") or 0, p.get("cublas_fp16") or 0
        cell = lambda v, fmt: (fmt % v) if v else "—"
        print(f"| {K}x{N} | {M} | {t:.1f} | {2 * M * N * K / t / 1e6:.0f} | {r['kernel']} | "
              f"{cell(o, '%.1f')} | {cell(o / t if o else 0, '%.2f')} | {cell(b, '%.1f')} | "
              f"{cell(t / b if b else 0, '%.2f')} | {cell(im, '%.1f')} | "
              f"{cell(im / t if im else 0, '%.2f')} | {cell(f16, '%.1f')} | "
              f"{cell(f16 / t if f16 else 0, '%.2f')} |")
        if im and f16:
            n += 1
            hi += im / t >= 0.9
            fp += f16 / t >= 1.25
    print(f"\ng = 64 rows with peers: >= 0.9x _int_mm {hi} of {n}; "
          f">= 1.25x cuBLAS FP16 {fp} of {n}")


if __name__ == "__main__":
    main(sys.argv[1])
