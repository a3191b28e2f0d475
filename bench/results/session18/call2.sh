#!/usr/bin/env bash
# Session 18, call 2 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The warp-specialized wgmma kernel's scale-after-MMA fold on the f16x2 path (f16 activations, f16
# pairs, integer zero, a group per stage): MIXQ_WS_FOLD_HALF=1 (experiment knob, read per call).
# wgmma tests with it on (one-CTA and two-CTA MT = 16 shapes), memcheck, then a same-process A/B,
# nine layers, W4/W8 g128 f16, M = 3 ... 64, two rounds.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
F='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.DeterministicAndGraphCapturable:CudaWeightOnly.ChainedDecode*:CudaWeightOnly.EveryM*'
MIXQ_WS_FOLD_HALF=1 timeout 150 $B/tests/mixq_gpu_tests --gtest_filter="$F" > "$OUT/tests_fold_half.log" 2>&1
echo "tests fold-half rc=$?"; summary "$OUT/tests_fold_half.log"
MIXQ_WS_FOLD_HALF=1 MIXQ_WS_SHAPE=2 timeout 100 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecode*' > "$OUT/tests_fold_half_shape2.log" 2>&1
echo "tests fold-half two-CTA rc=$?"; summary "$OUT/tests_fold_half_shape2.log"
MIXQ_WS_FOLD_HALF=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/memcheck_tail.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 300 $B/cuda_wo_sweep --shapes "$NINE" --m 3,4,8,16,32,64 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_FOLD_HALF=0;MIXQ_WS_FOLD_HALF=1' \
  --rounds 2 --json "$OUT/ab_fold_half.json" > "$OUT/ab_fold_half.txt" 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_fold_half.json" > "$OUT/ab_fold_half.table"; cut -c1-62 "$OUT/ab_fold_half.table" | head -120
