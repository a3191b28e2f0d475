#!/usr/bin/env bash
# Session 27, call 4 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli). The
# final kernels: the INT8 and pre-quantized suites after the M = 65-128 dispatch change; then the
# issue-5 big-M shapes (FP8 block, INT8 g128 and g64; the block skeleton changed this session),
# mixq bench with the peers (cuBLASLt block FP8, _int_mm, cuBLAS FP16) in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|ms total\)$" "$1" | head -30; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaInt8*:CudaLinearQuantized.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
SH=16384x7168,1536x24576,14336x21504,8192x57344
timeout 150 $B/mixq bench --backend cuda --act bf16 --schemes fp8b128:fp8,w8g128:int8,w8g64:int8 \
  --shapes $SH --m 2048,4096 --no-progress --json "$OUT/big_m.json" > /tmp/big.txt 2>&1
echo "mixq bench rc=$?"
mkdir -p /tmp/peers; OUT=/tmp/peers TAG=big CEIL=0 OPS=cublas_fp8_block128,cublas_int8,cublas_fp16 MS=2048,4096 SHAPES=$SH timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; cp /tmp/peers/*.json "$OUT/" 2>/dev/null
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
out = sys.argv[1]
P = {}
for f in glob.glob(os.path.join(out, "peers*.json")):
    for r in json.load(open(f)).get("rows", []): P[(r["K"], r["N"], r["M"])] = r
R = {(r["scheme"], r["K"], r["N"], r["M"]): r for r in json.load(open(os.path.join(out, "big_m.json")))["results"]}
g = lambda a, b: f"{a / b:.2f}" if a and b else "-"
print("| K×N | M | FP8 µs | TFLOP/s | cuBLASLt µs | x cuBLASLt | INT8 g128 µs | _int_mm µs | x _int_mm | cuBLAS FP16 µs | x FP16 | INT8 g64 µs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (s, K, N, M), r in sorted(R.items(), key=lambda t: (t[0][1], t[0][2], t[0][3])):
    if s != "fp8b128:fp8": continue
    f = r["time_us"]; i = R.get(("w8g128:int8", K, N, M), {}).get("time_us", 0)
    i64 = R.get(("w8g64:int8", K, N, M), {}).get("time_us", 0)
    p = P.get((K, N, M), {})
    lt, im, fp = p.get("cublas_fp8_block128", 0), p.get("cublas_int8", 0), p.get("cublas_fp16", 0)
    print(f"| {K}x{N} | {M} | {f:.1f} | {2 * M * N * K / f / 1e6:.0f} | {lt:.1f} | {g(lt, f)} | {i:.1f} | {im:.1f} | {g(im, i)} | {fp:.1f} | {g(fp, i)} | {i64:.1f} |")
PY
