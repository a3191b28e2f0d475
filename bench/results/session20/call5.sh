#!/usr/bin/env bash
# Session 20, call 5 (H100, prebuilt: call 4's binaries).
# PM-sampling timeline of back-to-back calls (one timed graph, ncu --graph-profiling graph,
# MIXQ_SWEEP_PROFILE_RANGE=1) with the stream-K pieces summed inline (default at mt = 16) and by
# the fixup kernel, W4 g128 f16 M = 16 on 28672x8192 (no gain from inline there) and 14336x21504.
# Parsed on the CPU machine with scripts/pm_timeline.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
for shape in 28672x8192 14336x21504; do
  for red in inline fixup; do
    MIXQ_WS_REDUCE=$red MIXQ_SWEEP_PROFILE_RANGE=1 timeout 120 ncu --profile-from-start off --graph-profiling graph \
      --launch-skip 7 --launch-count 1 --cache-control none --clock-control none --section PmSampling -o /tmp/pm \
      $B/cuda_wo_sweep --shapes $shape --m 16 --schemes w4g128 --act f16 --no-baseline > /tmp/pm.log 2>&1
    echo "ncu $shape $red rc=$?"; tail -1 /tmp/pm.log
    ncu --import /tmp/pm.ncu-rep --page raw --print-metric-instances values --csv > "$OUT/pm_${shape}_$red.csv" 2>&1
    rm -f /tmp/pm.ncu-rep
    python3 scripts/pm_timeline.py "$OUT/pm_${shape}_$red.csv"
  done
done
ls -la "$OUT"
