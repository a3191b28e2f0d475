#!/usr/bin/env bash
# Session 25, call 2 (H100; the binaries of call 1, code at 4ab88d8). The whole weight-only table
# on the session's code (mixq bench W4 + W8 g128, f16 and bf16, nine layers x 11 M; tinygemm in
# the same call), then the INT8 W8A8 nine-layer table that session 24 left unmeasured (mixq bench
# w8g128:int8, bf16 activations, 16-bit output, activation quantization inside the call; peers.py
# cuBLAS INT8 (torch._int_mm) and cuBLAS FP16 in the same call, M = 1024 / 4096).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 200 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
mkdir -p /tmp/tg; OUT=/tmp/tg TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 90 python3 peers/peers.py > /tmp/peers_tg.txt 2>&1
echo "tinygemm rc=$?"; cp /tmp/tg/peers_tinygemm.json "$OUT/" 2>/dev/null
timeout 150 $B/mixq bench --backend cuda --act bf16 --schemes w8g128:int8 --shapes $NINE --m 1024,4096 \
  --no-progress --json "$OUT/int8_nine.json" > /tmp/int8_nine.txt 2>&1
echo "mixq bench int8 rc=$?"
mkdir -p /tmp/pi; OUT=/tmp/pi TAG=int8 CEIL=0 OPS=cublas_int8,cublas_fp16 MS=1024,4096 SHAPES=$NINE timeout 150 python3 peers/peers.py > /tmp/peers_i8.txt 2>&1
echo "peers int8 rc=$?"; cp /tmp/pi/*.json "$OUT/" 2>/dev/null; ls /tmp/pi
python3 - "$OUT" <<'PY' | tee "$OUT/int8_nine.md"
import glob, json, os, sys
out = sys.argv[1]
P = {}
for f in glob.glob(os.path.join(out, "peers_int8*.json")):
    for r in json.load(open(f)).get("rows", []): P[(r["K"], r["N"], r["M"])] = r
R = {}
for r in json.load(open(os.path.join(out, "int8_nine.json")))["results"]:
    if r["scheme"] == "w8g128:int8": R[(r["K"], r["N"], r["M"])] = r
print("| K×N | M | mixq INT8 µs | TOP/s | _int_mm µs | x _int_mm | cuBLAS FP16 µs | x FP16 | kernel |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
a = b = n = 0
for (K, N, M), r in sorted(R.items()):
    p = P.get((K, N, M), {}); t = r["time_us"]
    im, fp = p.get("cublas_int8") or 0, p.get("cublas_fp16") or 0
    xi = im / t if im else 0; xf = fp / t if fp else 0
    n += 1; a += xi >= 0.9; b += xf >= 1.25
    print(f"| {K}x{N} | {M} | {t:.1f} | {2 * M * N * K / t / 1e6:.0f} | {im:.1f} | {xi:.2f} | {fp:.1f} | {xf:.2f} | {r['kernel']} |")
print(f"\n>= 0.9x _int_mm: {a} of {n}; >= 1.25x cuBLAS FP16: {b} of {n}")
PY
ls "$OUT"
