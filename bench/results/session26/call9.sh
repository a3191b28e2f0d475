#!/usr/bin/env bash
# Session 26, call 9 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The final code (the review mend: the shared skinny workspace layout, the quantizer through
# WoLaunchConfig): the FP8 block, INT8 and quantizer GPU suites, memcheck
# on the skinny odd-shape tests, and a spot check of call 5's rows (and INT8 M = 128) on an H100.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.*:CudaInt8*:CudaActQuant.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperSkinnyOddShapes:CudaFp8Block.SkinnyKernelOddShapesAndCutTiles' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -1 /tmp/memcheck.log
timeout 100 $B/mixq bench --backend cuda --act bf16 --shapes 14336x21504,4096x4096 --m 1,16,64,128 \
  --schemes fp8b128:fp8,w8g128:int8 --no-progress --json "$OUT/spot.json" > "$OUT/spot.txt" 2>&1
echo "bench rc=$?"; grep -E "skinny" "$OUT/spot.txt"
