#!/usr/bin/env bash
# Session 26, call 3 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The skinny kernel generalized over a promotion policy, now also INT8 W8A8 (sm90_i8_skinny_mt*):
# the W8A8 GPU tests, sanitizers on the new INT8 tests, then mixq bench INT8 W8A8 g128 at
# M = 1..64 on the nine layers (default dispatch = skinny; the sm_80 kernels that ran before, forced)
# with torch._int_mm in the same call, and the FP8 skinny rows again (after the refactor).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 400 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.*:CudaInt8*:CudaActQuant.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaInt8Block.HopperSkinnyOddShapes' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log
done 2>&1 | tee -a "$OUT/tests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
bench() { timeout 200 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m $MS --schemes $1 \
  --no-progress --json "$OUT/$2.json" > /tmp/$2.txt 2>&1; echo "bench $2 rc=$?"; }
MS=1,2,4,8,16,32,64 bench w8g128:int8 i8_skinny
MS=1,2,4,8,16 MIXQ_FORCE_KERNEL=sm80_i8_16x32 bench w8g128:int8 i8_sm80_small
MS=32,64 MIXQ_FORCE_KERNEL=sm80_i8_64x64 bench w8g128:int8 i8_sm80_medium
MS=1,16,64 bench fp8b128:fp8 fp8_skinny
OUT=$OUT TAG=int8 CEIL=0 OPS=cublas_int8 MS=32,64 timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/int8_table.md"
import json, re, sys
out = sys.argv[1]
def load(n):
    d = json.load(open(f"{out}/{n}.json"))
    ceil = float(re.search(r"streaming-read ceiling ([0-9.]+) TB/s", d["device"]).group(1))
    return {(r["K"], r["N"], r["M"]): r for r in d["results"] if not r.get("unsupported")}, ceil, d["device"]
new, ceil, dev = load("i8_skinny")
old = {**load("i8_sm80_small")[0], **load("i8_sm80_medium")[0]}
peer = {(r["K"], r["N"], r["M"]): r.get("cublas_int8") for r in json.load(open(f"{out}/peers_int8.json"))["rows"]}
print("Device: %s\n" % dev)
print("| K×N | M | mixq INT8 µs | % read ceiling | ok | kernel | sm_80 kernel µs | speedup | _int_mm µs (M→32k) | x _int_mm |")
print("|---|---:|---:|---:|---|---|---:|---:|---:|---:|")
for (K, N, M), r in sorted(new.items(), key=lambda kv: (kv[0][0] * kv[0][1], kv[0][2])):
    us = r["time_us"]; o = old.get((K, N, M)); pm = max(32, (M + 31) // 32 * 32); p = peer.get((K, N, pm))
    print("| %dx%d | %d | %.1f | %.0f%% | %s | %s | %s | %s | %s | %s |" % (K, N, M, us,
          r["weight_bytes"] / (us * 1e-6) / (ceil * 1e12) * 100, "ok" if r.get("ok") else "FAIL", r["kernel"],
          "%.1f" % o["time_us"] if o else "-", "%.2f" % (o["time_us"] / us) if o else "-",
          "%.1f" % p if p else "-", "%.2f" % (p / us) if p else "-"))
PY
python3 scripts/skinny_table.py "$OUT/fp8_skinny.json" | tail -28 > "$OUT/fp8_table.md"; head -12 "$OUT/fp8_table.md"
