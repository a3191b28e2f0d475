#!/usr/bin/env bash
# Session 22, call 12 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). After the review mend (one ticket reset after both reduction
# paths; no change in behaviour): weight-only GPU tests, memcheck + racecheck on the streaming
# kernel's tests, and call 3's streaming-kernel timings on four layers as a sanity check.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for tool in memcheck racecheck; do
  filter=CudaWeightOnly.StreamKernelClusterAndGlobalReduction
  [ $tool = memcheck ] && filter="$filter:CudaWeightOnly.DeterministicAndGraphCapturable"
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests --gtest_filter="$filter" > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log | tee -a "$OUT/sanitizers_tail.txt"
done
timeout 120 $B/cuda_wo_sweep --shapes 28672x8192,14336x21504,4096x4096,8192x8192 --m 1,4,8 --schemes w4g128 --act f16 --no-baseline \
  --variants 'MIXQ_FORCE_KERNEL=stream' --rounds 1 --json "$OUT/sweep_stream.json" > /tmp/sweep.txt 2>&1
echo "sweep rc=$?"; python3 scripts/variants_table.py "$OUT/sweep_stream.json" | cut -c1-75
