#!/usr/bin/env bash
# Session 19, call 6 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The stream-K fixup kernel resolves its tile's contributors and slots before it waits for the main
# kernel (MIXQ_WS_FIXUP_PRE=1, the new default; 0 = the old order), so only loads, sums and stores
# stay on the critical path between back-to-back calls.
# 1. weight-only GPU tests (default = pre), memcheck + racecheck on the wgmma tests;
# 2. same-process A/B MIXQ_WS_FIXUP_PRE=0|1, nine layers, W4/W8 g128 f16, M = 4, 16, 128;
# 3. a ring of 8 stages with 8 / 4 / 2 of them loaded before the dependency wait (one process,
#    MIXQ_WS_STAGES=8; MIXQ_WS_EARLY per call) on the large W4 layers.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaWeightOnly.HopperWgmmaKernel' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log | tee -a "$OUT/sanitizers_tail.txt"
done
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 200 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,128 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_FIXUP_PRE=0;MIXQ_WS_FIXUP_PRE=1' --rounds 2 --json "$OUT/ab_fixup_pre.json" > /tmp/ab1.txt 2>&1
echo "ab fixup rc=$?"; python3 scripts/variants_table.py "$OUT/ab_fixup_pre.json" > "$OUT/ab_fixup_pre.table"
MIXQ_WS_STAGES=8 timeout 120 $B/cuda_wo_sweep --shapes 14336x21504,8192x57344,28672x8192,4096x28672 --m 4,16 --schemes w4g128 \
  --act f16 --no-baseline --variants 'MIXQ_WS_EARLY=-1;MIXQ_WS_EARLY=4;MIXQ_WS_EARLY=2' --rounds 2 \
  --json "$OUT/ab_s8_early.json" > /tmp/ab2.txt 2>&1
echo "ab s8 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_s8_early.json" > "$OUT/ab_s8_early.table"
cut -c1-100 "$OUT/ab_fixup_pre.table"; cut -c1-100 "$OUT/ab_s8_early.table"
