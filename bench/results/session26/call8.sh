#!/usr/bin/env bash
# Session 26, call 8 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The 128-token skinny tile: the skinny tests (and the W8A8 suites), memcheck on the new cases,
# then M = 65 / 96 / 128 on the nine layers: INT8 g128 (default: skinny mt128) against the sm_80
# 64x64 tiles that ran there before (forced), FP8 with the skinny mt128 forced against the default
# 128-row tiles, with cuBLASLt block FP8 and torch._int_mm at M = 128 in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.*:CudaInt8*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
{
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaFp8Block.SkinnyKernelEveryTokenCount' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -1 /tmp/memcheck.log
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaFp8Block.SkinnyKernelEveryTokenCount' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -1 /tmp/racecheck.log
} 2>&1 | tee -a "$OUT/tests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
bench() { timeout 120 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m 65,96,128 --schemes $1 \
  --no-progress --json "$OUT/$2.json" > /tmp/$2.txt 2>&1; echo "bench $2 rc=$?"; }
bench w8g128:int8,fp8b128:fp8 default
MIXQ_FORCE_KERNEL=sm80_i8_64x64 bench w8g128:int8 i8_sm80
MIXQ_FORCE_KERNEL=sm90_fp8_block_skinny_mt128 bench fp8b128:fp8 fp8_mt128
OUT=$OUT TAG=w8a8 CEIL=0 OPS=cublas_fp8_block128,cublas_int8 MS=128 timeout 100 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"
python3 - "$OUT" <<'PY' > "$OUT/table.md"
import json, re, sys
out = sys.argv[1]
def load(n):
    d = json.load(open(f"{out}/{n}.json"))
    return {(r["scheme"], r["K"], r["N"], r["M"]): r for r in d["results"] if not r.get("unsupported")}, d["device"]
dflt, dev = load("default"); i8 = load("i8_sm80")[0]; f8 = load("fp8_mt128")[0]
peer = {(r["K"], r["N"]): r for r in json.load(open(f"{out}/peers_w8a8.json"))["rows"]}
print("Device: %s\n" % dev)
print("| K×N | M | INT8 skinny µs | kernel | sm80 64x64 µs | x | _int_mm (M=128) µs | FP8 128-row tiles µs | FP8 skinny mt128 µs | x | cuBLASLt (M=128) µs |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for (s, K, N, M), r in sorted(dflt.items(), key=lambda kv: (kv[0][1] * kv[0][2], kv[0][3])):
    if s != "w8g128:int8": continue
    o = i8.get((s, K, N, M)); f = dflt.get(("fp8b128:fp8", K, N, M)); g = f8.get(("fp8b128:fp8", K, N, M)); p = peer.get((K, N), {})
    fmt = lambda v: "%.1f" % v if v else "-"
    print("| %dx%d | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |" % (K, N, M, r["time_us"], r["kernel"],
          fmt(o and o["time_us"]), "%.2f" % (o["time_us"] / r["time_us"]) if o else "-", fmt(p.get("cublas_int8")),
          fmt(f and f["time_us"]), fmt(g and g["time_us"]), "%.2f" % (f["time_us"] / g["time_us"]) if f and g else "-",
          fmt(p.get("cublas_fp8_block128"))))
PY
cat "$OUT/table.md"; grep -c "FAIL" /tmp/default.txt /tmp/i8_sm80.txt /tmp/fp8_mt128.txt
