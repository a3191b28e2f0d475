#!/usr/bin/env bash
# Session 17, call 9 (H100): the final code (main's dequantize kernel with the group index clamped,
# plus the two new K-padding test cases), prebuilt (bash scripts/prebuild_gpu.sh mixq_gpu_tests
# cuda_wo_sweep mixq_cli). Weight-only GPU tests and compute-sanitizer memcheck on the odd shapes.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 build-gpu/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.OddShapesActOrderBiasClamp' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
