#!/usr/bin/env bash
# Session 18, call 3 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The final code (the f16 fold at mt = 16 by ws_fold_half's rule): weight-only GPU tests, the wgmma
# tests with the f16 fold forced on / off and on with the two-CTA MT = 16 shape, racecheck and
# memcheck with it forced on.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for v in 1 0; do
  MIXQ_WS_FOLD_HALF=$v timeout 90 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel' > /tmp/fh_$v.log 2>&1
  echo "MIXQ_WS_FOLD_HALF=$v wgmma tests rc=$?"; summary /tmp/fh_$v.log
done
MIXQ_WS_FOLD_HALF=1 MIXQ_WS_SHAPE=2 timeout 90 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecode*' > /tmp/fh_shape2.log 2>&1
echo "MIXQ_WS_FOLD_HALF=1 MIXQ_WS_SHAPE=2 rc=$?"; summary /tmp/fh_shape2.log
MIXQ_WS_FOLD_HALF=1 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.ChainedDecode*:CudaWeightOnly.DeterministicAndGraphCapturable' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log
MIXQ_WS_FOLD_HALF=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecode*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log
for f in /tmp/fh_1.log /tmp/fh_0.log /tmp/fh_shape2.log /tmp/racecheck.log /tmp/memcheck.log; do echo "== $f"; tail -3 $f; done > "$OUT/knobs_sanitizers.txt"
