#!/usr/bin/env bash
# Session 19, call 2 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# L2 prefetch of the next stages' weights before the dependency wait (MIXQ_WS_L2_PREFETCH = stages,
# experiment knob read per call): same-process A/B, W4/W8 g128 f16, the weight-stream-bound
# launches (M = 2 ... 16 on the large layers, W8 to M = 64), then the wgmma tests with it on.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
SH=14336x21504,8192x57344,28672x8192,4096x28672,8192x10240
timeout 330 $B/cuda_wo_sweep --shapes "$SH" --m 4,8,16,32 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_L2_PREFETCH=0;MIXQ_WS_L2_PREFETCH=4;MIXQ_WS_L2_PREFETCH=8;MIXQ_WS_L2_PREFETCH=16' \
  --rounds 2 --json "$OUT/ab_l2_prefetch.json" > "$OUT/ab_l2_prefetch.txt" 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_l2_prefetch.json" > "$OUT/ab_l2_prefetch.table"
F='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecode*'
MIXQ_WS_L2_PREFETCH=16 timeout 150 $B/tests/mixq_gpu_tests --gtest_filter="$F" > "$OUT/tests_l2_prefetch.log" 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/tests_l2_prefetch.log" | tail -5
cut -c1-110 "$OUT/ab_l2_prefetch.table"
