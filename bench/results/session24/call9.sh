#!/usr/bin/env bash
# Session 24, call 9 (H100; binaries of call 8, main's code at 3424e78). FP8 block and INT8 W8A8 end
# to end (mixq bench, bf16 activations, 16-bit output) with the direct stores
# (MIXQ_BLOCK_GEMM_Y_TMA=0) and the staged epilogue (default), and the peers (cuBLASLt block FP8,
# cuBLAS INT8, cuBLAS FP16) in the same call (call 6's peers.py run had no output folder).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
SH=16384x7168,1536x24576,14336x21504,8192x57344
for y in 0 1; do
  MIXQ_BLOCK_GEMM_Y_TMA=$y timeout 120 $B/mixq bench --backend cuda --act bf16 --schemes fp8b128:fp8,w8g128:int8 \
    --shapes $SH --m 2048,4096 --no-progress --json "$OUT/act_bench_y$y.json" > /tmp/act_$y.txt 2>&1
  echo "mixq bench y_tma=$y rc=$?"
done
mkdir -p /tmp/peers; OUT=/tmp/peers TAG=fp8 CEIL=0 OPS=cublas_fp8_block128,cublas_int8,cublas_fp16 MS=2048,4096 SHAPES=$SH timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; cp /tmp/peers/*.json "$OUT/" 2>/dev/null; ls /tmp/peers
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
out = sys.argv[1]
P = {}
for f in glob.glob(os.path.join(out, "peers*.json")):
    for r in json.load(open(f)).get("rows", []): P[(r["K"], r["N"], r["M"])] = r
R = {}
for y in (0, 1):
    try: d = json.load(open(os.path.join(out, f"act_bench_y{y}.json")))
    except Exception as e: print("missing", y, e); continue
    for r in d["results"]:
        if r["scheme"] != "dense": R[(r["scheme"], r["K"], r["N"], r["M"], y)] = r
print("| K×N | M | FP8 direct µs | FP8 staged µs | TFLOP/s | cuBLASLt µs | x cuBLASLt | INT8 direct | INT8 staged | _int_mm | x | cuBLAS FP16 | INT8 x FP16 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (s, K, N, M, y), r in sorted(R.items(), key=lambda t: (t[0][1], t[0][2], t[0][3])):
    if s != "fp8b128:fp8" or y != 1: continue
    f0 = R.get((s, K, N, M, 0), {}).get("time_us", 0); f1 = r["time_us"]
    i0 = R.get(("w8g128:int8", K, N, M, 0), {}).get("time_us", 0); i1 = R.get(("w8g128:int8", K, N, M, 1), {}).get("time_us", 0)
    p = P.get((K, N, M), {})
    lt, im, fp = p.get("cublas_fp8_block128", 0), p.get("cublas_int8", 0), p.get("cublas_fp16", 0)
    tf = 2 * M * N * K / f1 / 1e6
    g = lambda a, b: f"{a / b:.2f}" if a and b else "-"
    print(f"| {K}x{N} | {M} | {f0:.1f} | {f1:.1f} | {tf:.0f} | {lt:.1f} | {g(lt, f1)} | {i0:.1f} | {i1:.1f} | {im:.1f} | {g(im, i1)} | {fp:.1f} | {g(fp, i1)} |")
PY
