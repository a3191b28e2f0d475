#!/usr/bin/env bash
# Session 16, call 2 (H100, prebuilt binaries carried): the weight-only GPU tests on the final
# rules, the wgmma tests with the bf16 integer-zero path forced on and off at every token tile,
# then compute-sanitizer (memcheck, racecheck) on the dependent-launch chain and the wgmma tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for v in 1 0; do
  MIXQ_WS_BF16_NATIVE=$v timeout 60 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel' > "$OUT/bf16native_$v.log" 2>&1
  echo "MIXQ_WS_BF16_NATIVE=$v wgmma tests rc=$?"; summary "$OUT/bf16native_$v.log"
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.ChainedDecodeCallsUnderDependentLaunch:CudaWeightOnly.DeterministicAndGraphCapturable' > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/san_memcheck.log"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecodeCallsUnderDependentLaunch' > "$OUT/san_racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -2 "$OUT/san_racecheck.log"
