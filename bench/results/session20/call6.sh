#!/usr/bin/env bash
# Session 20, call 6 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# Experiment: rolling L2 prefetch in the wgmma kernel's producer (MIXQ_WS_L2_AHEAD = D: with stage
# k's loads, a TMA L2 prefetch of stage k + D's weights and pairs), meant for the grid's tail, where
# the CTAs still running cannot fill the DRAM with their rings alone (call 5's timelines).
# 1. wgmma tests with D = 8; 2. same-process A/B D = 0 / 4 / 8 / 16, nine layers, W4/W8 g128 f16,
# M = 4, 16, 64; 3. the graph PM timeline of 28672x8192 M = 16 at D = 8.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
MIXQ_WS_L2_AHEAD=8 timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.StreamKInline*:CudaWeightOnly.Chained*' > "$OUT/tests_ahead8.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests_ahead8.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 300 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,64 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_L2_AHEAD=0;MIXQ_WS_L2_AHEAD=4;MIXQ_WS_L2_AHEAD=8;MIXQ_WS_L2_AHEAD=16' --rounds 2 --json "$OUT/ab_ahead.json" > /tmp/ab1.txt 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_ahead.json" > "$OUT/ab_ahead.table"
MIXQ_WS_L2_AHEAD=8 MIXQ_SWEEP_PROFILE_RANGE=1 timeout 120 ncu --profile-from-start off --graph-profiling graph \
  --launch-skip 7 --launch-count 1 --cache-control none --clock-control none --section PmSampling -o /tmp/pm \
  $B/cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 --act f16 --no-baseline > /tmp/pm.log 2>&1
echo "ncu rc=$?"
ncu --import /tmp/pm.ncu-rep --page raw --print-metric-instances values --csv > "$OUT/pm_28672x8192_ahead8.csv" 2>&1
python3 scripts/pm_timeline.py "$OUT/pm_28672x8192_ahead8.csv"
cut -c1-90 "$OUT/ab_ahead.table"
