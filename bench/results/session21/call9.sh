#!/usr/bin/env bash
# Session 21, call 9 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The producer's stream-K cursor built once, before the early weight loads and the wait for the
# previous grid, instead of a second time after the wait (its 64-bit divisions then sat between the
# previous grid's end and the first activation load). MIXQ_WS_LATE_CURSOR=1 restores the old order
# (experiment knob). 1. weight-only tests; 2. same-process A/B late vs early, nine layers, W4 g128
# f16 M = 4 ... 256, W8 M = 4 and 64.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 150 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
V='MIXQ_WS_LATE_CURSOR=1;MIXQ_WS_LATE_CURSOR=0'
timeout 200 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,32,64,128,256 --schemes w4g128 --act f16 --no-baseline \
  --variants "$V" --rounds 3 --json "$OUT/ab_cursor_w4.json" > /tmp/ab1.txt 2>&1
echo "ab w4 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_cursor_w4.json" > "$OUT/ab_cursor_w4.table"
timeout 100 $B/cuda_wo_sweep --shapes "$NINE" --m 4,64 --schemes w8g128 --act f16 --no-baseline \
  --variants "$V" --rounds 3 --json "$OUT/ab_cursor_w8.json" > /tmp/ab2.txt 2>&1
echo "ab w8 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_cursor_w8.json" > "$OUT/ab_cursor_w8.table"
cut -c1-90 "$OUT/ab_cursor_w4.table"; cut -c1-90 "$OUT/ab_cursor_w8.table"
