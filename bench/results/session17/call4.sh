#!/usr/bin/env bash
# Session 17, call 4 (H100): the FP8 GEMM's parts timed alone. Diagnostic harness (not on main;
# build-exp/fp8/fp8_sweep_diag2): switch 0 the real kernel, 1 no promotion, 3 TMA ring only,
# 4 no TMA (consumers skip the full barriers, MMAs read stale shared memory) with promotion,
# 5 no TMA and no promotion (MMAs alone). Tiles 128 / 192, single CTAs at raster group 2 and
# pairs at 16, M = 4096, interleaved rounds; ncu cycles and clock for the 192 single CTAs.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=build-exp/fp8/fp8_sweep_diag2
for cfg in 192:1:2 192:2:16 128:1:2 128:2:16; do
  IFS=: read bn cl g <<< "$cfg"
  timeout 100 $H --bench-only --ms 4096 --nk 21504,14336,7168,16384 --bn $bn --cluster $cl --groups $g --order 0,1,3,4,5 --rounds 2 2>&1 | grep -v "^check\|^device\|  M  "
done
M=sm__cycles_elapsed.avg,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum
for o in 0 1 3 4 5; do
  timeout 40 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --metrics $M \
    $H --bench-only --ms 4096 --nk 21504,14336 --bn 192 --cluster 1 --groups 2 --order $o --rounds 1 > /tmp/ncu.txt 2>&1
  echo "bn=192 c=1 g=2 diag=$o $(grep -E 'sm__cycles|per_second|duration' /tmp/ncu.txt | awk '{print $1"="$(NF)}' | tr '\n' ' ')"
done
