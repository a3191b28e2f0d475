#!/usr/bin/env bash
# Session 25, call 3 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). The final code: the bf16 int8 pair words' exactness check in double, the new test with
# f32 pairs too. Weight-only + FP8 weight-only GPU tests; memcheck and racecheck on the new test.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool $tool $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.Bf16Int8CodesWithoutF32' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; { echo "== $tool"; tail -4 /tmp/$tool.log; } | tee -a "$OUT/sanitizers.txt"
done
ls "$OUT"
