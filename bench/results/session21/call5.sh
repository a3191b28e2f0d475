#!/usr/bin/env bash
# Session 21, call 5 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# Calls 2-3 again, without their confound: a stream-K skew by CTA index (MIXQ_WS_SKEW, permille; the
# low indices, which start first between back-to-back launches, get more work) on call 4's code,
# with sk_owner inverted in closed form (a sqrt and a correction step) instead of call 2-3's binary
# search of 64-bit divisions, whose cost (at the consumers' start in call 3) every skewed variant
# paid. 1. the wgmma and inline-vs-fixup tests with MIXQ_WS_SKEW=150; 2. same-process A/B of the
# skew, nine layers, W4 g128 f16, M = 4, 16, 32.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
MIXQ_WS_SKEW=150 timeout 100 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel:CudaWeightOnly.DeterministicAndGraphCapturable' > "$OUT/tests_skew150.log" 2>&1
echo "tests skew 150 rc=$?"; summary "$OUT/tests_skew150.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
V='MIXQ_WS_SKEW=0;MIXQ_WS_SKEW=10;MIXQ_WS_SKEW=20;MIXQ_WS_SKEW=35;MIXQ_WS_SKEW=50'
timeout 240 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,32 --schemes w4g128 --act f16 --no-baseline \
  --variants "$V" --rounds 2 --json "$OUT/ab_skew_w4.json" > /tmp/ab1.txt 2>&1
echo "ab w4 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_skew_w4.json" > "$OUT/ab_skew_w4.table"
cut -c1-122 "$OUT/ab_skew_w4.table"
