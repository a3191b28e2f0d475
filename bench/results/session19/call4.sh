#!/usr/bin/env bash
# Session 19, call 4 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# 1. A start-up ramp for the wgmma kernel's producer (MIXQ_WS_RAMP = stages issued before it waits
#    for stage 0 to land; MIXQ_WS_EARLY = weight stages issued before the dependency wait): same-process
#    A/B on the stream-bound launches, W4/W8 g128 f16.
# 2. The PM-sampling timeline of back-to-back calls (a whole timed graph, ncu --graph-profiling graph,
#    MIXQ_SWEEP_PROFILE_RANGE=1), 28672x8192 W4 M = 16, default and ramp.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
SH=14336x21504,8192x57344,28672x8192,4096x28672
timeout 300 $B/cuda_wo_sweep --shapes "$SH" --m 4,16 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants ';MIXQ_WS_EARLY=1,MIXQ_WS_RAMP=1;MIXQ_WS_EARLY=2,MIXQ_WS_RAMP=2;MIXQ_WS_RAMP=1;MIXQ_WS_EARLY=0' \
  --rounds 2 --json "$OUT/ab_ramp.json" > "$OUT/ab_ramp.txt" 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_ramp.json" > "$OUT/ab_ramp.table"
for v in default ramp1; do
  if [ $v = ramp1 ]; then export MIXQ_WS_EARLY=1 MIXQ_WS_RAMP=1; fi
  MIXQ_SWEEP_PROFILE_RANGE=1 timeout 120 ncu --profile-from-start off --graph-profiling graph --launch-skip 7 --launch-count 1 \
    --cache-control none --clock-control none --section PmSampling -o /tmp/pm_$v \
    $B/cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 --act f16 --no-baseline > /tmp/pm_$v.log 2>&1
  echo "ncu $v rc=$?"; tail -2 /tmp/pm_$v.log
  ncu --import /tmp/pm_$v.ncu-rep --page raw --print-metric-instances values --csv > "$OUT/pm_graph_$v.csv" 2>&1
done
ls -la "$OUT"
cut -c1-120 "$OUT/ab_ramp.table"
