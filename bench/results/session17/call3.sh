#!/usr/bin/env bash
# Session 17, call 3 (H100): is the FP8 GEMM's operand delivery (TMA, L2 -> shared memory) the
# limit, and does the raster or CTA-pair multicast move it? Call 2's diagnostic harness: switch 0
# (the real kernel) and 3 (TMA ring only: no MMA, no promotion) x tiles 128 / 192 x single CTAs /
# pairs x raster groups 1-16, interleaved rounds; then ncu bytes for a few.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=build-exp/fp8/fp8_sweep_diag
timeout 300 $H --bench-only --ms 4096 --nk 21504,14336,7168,16384 --bn 128,192 --cluster 1,2 --groups 1,2,4,8,16 --order 0,3 --rounds 2 > "$OUT/raster.txt" 2>&1
echo "raster rc=$?"
M=sm__cycles_elapsed.avg,gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum
for cfg in 192:1:2:3 192:2:2:3 192:1:8:3 192:2:8:3 192:1:2:0 192:2:2:0; do
  IFS=: read bn cl g o <<< "$cfg"
  timeout 40 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --metrics $M \
    $H --bench-only --ms 4096 --nk 21504,14336 --bn $bn --cluster $cl --groups $g --order $o --rounds 1 > /tmp/ncu.txt 2>&1
  echo "bn=$bn c=$cl g=$g diag=$o $(grep -E 'sm__cycles|duration|dram__|lts__' /tmp/ncu.txt | awk '{print $1"="$(NF)}' | tr '\n' ' ')"
done
grep -v "^check" "$OUT/raster.txt"
