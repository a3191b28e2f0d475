#!/usr/bin/env bash
# Session 25, call 4 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). Token tiles of 32 in the two-CTAs-per-SM shape of the warp-specialized wgmma kernel
# (MIXQ_WS_SHAPE=2; the default stays one CTA). Weight-only GPU tests with the new
# WgmmaSmallTilesInBothCtaShapes, memcheck on it, and the same-process A/B of the two shapes at
# M = 17 / 24 / 32 (mt = 32) on the nine layers, W4 / W8 g128, f16 / bf16.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 330 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 200 $B/cuda_wo_sweep --shapes $NINE --m 17,24,32 --schemes w4g128,w8g128 --act f16,bf16 \
  --no-baseline --variants "MIXQ_WS_SHAPE=1;MIXQ_WS_SHAPE=2" --rounds 2 \
  --json "$OUT/ab_shape_mt32.json" > /tmp/ab.txt 2>&1
echo "A/B rc=$?"; python3 scripts/variants_table.py "$OUT/ab_shape_mt32.json" > "$OUT/ab_shape_mt32.md" 2>&1
timeout 200 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaSmallTilesInBothCtaShapes' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -3 /tmp/memcheck.log | tee "$OUT/sanitizers.txt"
cat "$OUT/ab_shape_mt32.md"
