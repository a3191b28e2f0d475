#!/usr/bin/env bash
# Session 27, call 6 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli). The
# review mend: the INT8 call picks its kernel once; the GPU tests use tests/gpu/device_checks.hpp
# for the Hopper check and the GPU skip. The suites it touches.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|ms total\)$" "$1" | head -30; }
timeout 400 $B/tests/mixq_gpu_tests --gtest_filter='CudaInt8*:CudaLinearQuantized.*:CudaWeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"; grep -c "SKIPPED" "$OUT/tests.log"
