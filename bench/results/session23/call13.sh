#!/usr/bin/env bash
# Session 23, call 13 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). Review mend 2: the dequantize launch takes the SM count from
# the device caps; mixq bench's paired / unpaired timing in one replay loop with events made
# once. Weight-only + FP8 weight-only tests, memcheck on the dequantize + cuBLAS tests, and a
# bench subset (decode and M = 4096, paired) against call 10.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/wotests.log" | tail -4
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.EveryMOnBothKernels:CudaFp8WeightOnly.F32ActivationsAndOddShapes' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/sanitizer_tail.txt"
timeout 120 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,14336x4096 --m 1,4096 \
  --schemes w4g128,w8g128 --no-progress --json "$OUT/subset.json" > "$OUT/subset.txt" 2>&1
echo "bench rc=$?"; grep -E "w4g128|w8g128|dense" "$OUT/subset.txt" | head -12
