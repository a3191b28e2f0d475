#!/usr/bin/env bash
# Session 21, call 3 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# v2 of call 2, whose every nonzero skew cost a constant 3-5 us: the owner's sk_owner (a binary search
# of 64-bit divisions with a skew) is now resolved at the consumers' start, and the contributors'
# slots are 2 b (no division). Stream-K ranges skewed by CTA index (MIXQ_WS_SKEW, permille; 0 = equal
# ranges, the default here): the low CTA indices, which start first between back-to-back launches,
# get more work. Skew 0 against call 2's v0 column: the hoisted division alone.
# 1. weight-only GPU tests at the default and with MIXQ_WS_SKEW=150 (every wgmma stream-K launch
#    skewed, both reductions), memcheck with the skew on the inline-vs-fixup test;
# 2. same-process A/B of the skew, nine layers, W4 g128 f16, M = 4, 16, 32, 64; W8 M = 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 150 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
MIXQ_WS_SKEW=150 timeout 150 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/tests_skew150.log" 2>&1
echo "tests skew 150 rc=$?"; summary "$OUT/tests_skew150.log"
MIXQ_WS_SKEW=150 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee -a "$OUT/sanitizers_tail.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
V='MIXQ_WS_SKEW=0;MIXQ_WS_SKEW=15;MIXQ_WS_SKEW=30;MIXQ_WS_SKEW=50;MIXQ_WS_SKEW=80'
timeout 240 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,32,64 --schemes w4g128 --act f16 --no-baseline \
  --variants "$V" --rounds 2 --json "$OUT/ab_skew_w4.json" > /tmp/ab1.txt 2>&1
echo "ab w4 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_skew_w4.json" > "$OUT/ab_skew_w4.table"
timeout 100 $B/cuda_wo_sweep --shapes "$NINE" --m 4 --schemes w8g128 --act f16 --no-baseline \
  --variants "$V" --rounds 2 --json "$OUT/ab_skew_w8.json" > /tmp/ab2.txt 2>&1
echo "ab w8 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_skew_w8.json" > "$OUT/ab_skew_w8.table"
cut -c1-122 "$OUT/ab_skew_w4.table"; cut -c1-122 "$OUT/ab_skew_w8.table"
