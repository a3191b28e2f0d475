#!/usr/bin/env bash
# Session 20, call 3 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The planner's rule for the inline stream-K reduction (ws_inline_reduce: mt <= 16, or mt <= 64
# with at most ~2 pieces per cut tile) and the owner's contributor loads unrolled by 4 (mt <= 64).
# 1. weight-only GPU tests, memcheck on the bitwise inline-vs-fixup test;
# 2. same-process A/B MIXQ_WS_REDUCE=fixup|inline|auto (the rule), nine layers, W4/W8 g128 f16,
#    M = 8, 32, 64, 256.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee -a "$OUT/sanitizers_tail.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 300 $B/cuda_wo_sweep --shapes "$NINE" --m 8,32,64,256 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_REDUCE=fixup;MIXQ_WS_REDUCE=inline;MIXQ_WS_REDUCE=auto' --rounds 2 --json "$OUT/ab_reduce3.json" > /tmp/ab1.txt 2>&1
echo "ab reduce rc=$?"; python3 scripts/variants_table.py "$OUT/ab_reduce3.json" > "$OUT/ab_reduce3.table"
cut -c1-80 "$OUT/ab_reduce3.table"
