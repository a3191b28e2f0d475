#!/usr/bin/env bash
# Session 27, call 5 (H100; the binaries of call 4 = the final code). Every GPU test suite, then
# memcheck on a weight-only subset (the ops.cpp entry and the CPU staging changed this session).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|ms total\)$" "$1" | head -30; }
timeout 480 $B/tests/mixq_gpu_tests > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.OddShapesActOrderBiasClamp:CudaWeightOnly.BadInput' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -1 /tmp/memcheck.log | tee "$OUT/memcheck_tail.txt"
