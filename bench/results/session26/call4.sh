#!/usr/bin/env bash
# Session 26, call 4 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# After call 3's fixes: every GPU test, sanitizers on the INT8 skinny tests, then the INT8 W8A8
# rows at M = 1..16 again (the quantizer's grid now counts band-padded rows).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|tests ran" "$1" | head -30; }
timeout 400 $B/tests/mixq_gpu_tests > "$OUT/tests.log" 2>&1
echo "all GPU tests rc=$?"; summary "$OUT/tests.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperSkinnyOddShapes:CudaInt8Block.BadInputs' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperSkinnyEveryTokenCount' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 150 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m 1,2,4,8,16 --schemes w8g128:int8 \
  --no-progress --json "$OUT/i8_skinny_small_m.json" > /tmp/b.txt 2>&1; echo "bench rc=$?"
grep -E "4096x4096|14336x21504" /tmp/b.txt | head -12
