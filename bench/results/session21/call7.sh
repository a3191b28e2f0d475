#!/usr/bin/env bash
# Session 21, call 7 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# A start-only L2 prefetch in the wgmma kernel's producer (MIXQ_WS_L2_EARLY = E stages): before the
# wait for the previous grid, after the ring's early weight loads, the weights and pairs of the next
# E stages go to L2 (TMA prefetch), into the DRAM time the previous grid's straggler tail leaves idle.
# 1. the wgmma tests with E = 16; 2. same-process A/B E = 0 / 4 / 8 / 16 / 32, nine layers, W4 g128 f16
# M = 4, 16, 32, 64, and W8 M = 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
MIXQ_WS_L2_EARLY=16 timeout 100 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel:CudaWeightOnly.DeterministicAndGraphCapturable' > "$OUT/tests_l2early16.log" 2>&1
echo "tests E=16 rc=$?"; summary "$OUT/tests_l2early16.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
V='MIXQ_WS_L2_EARLY=0;MIXQ_WS_L2_EARLY=4;MIXQ_WS_L2_EARLY=8;MIXQ_WS_L2_EARLY=16;MIXQ_WS_L2_EARLY=32'
timeout 240 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,32,64 --schemes w4g128 --act f16 --no-baseline \
  --variants "$V" --rounds 2 --json "$OUT/ab_l2early_w4.json" > /tmp/ab1.txt 2>&1
echo "ab w4 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_l2early_w4.json" > "$OUT/ab_l2early_w4.table"
timeout 100 $B/cuda_wo_sweep --shapes "$NINE" --m 4 --schemes w8g128 --act f16 --no-baseline \
  --variants "$V" --rounds 2 --json "$OUT/ab_l2early_w8.json" > /tmp/ab2.txt 2>&1
echo "ab w8 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_l2early_w8.json" > "$OUT/ab_l2early_w8.table"
cut -c1-122 "$OUT/ab_l2early_w4.table"; cut -c1-122 "$OUT/ab_l2early_w8.table"
