#!/usr/bin/env bash
# Session 17, call 2 (H100): where the FP8 block GEMM's cycles go. Diagnostic harness (not on
# main): BlockGemmParams::mma_order reused as a switch, 1 = skip the promotion FFMAs, 2 = skip the
# wgmma (waits, scale reads, releases kept), 3 = skip both (TMA ring only); results are wrong by
# design for 1-3. Built as call 1's harness, output build-exp/fp8/fp8_sweep_diag.
# Timings (interleaved rounds) and ncu cycles of one M = 4096 launch per (tile, switch).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=build-exp/fp8/fp8_sweep_diag
timeout 200 $H --bench-only --ms 4096 --nk 7168,16384,21504,14336,24576,1536 --bn 128,192 --cluster 1 --order 0,1,2,3 --rounds 2 > "$OUT/diag.txt" 2>&1
echo "diag rc=$?"
M=sm__cycles_elapsed.avg,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum
for bn in 128 192; do for o in 0 1 2 3; do
  timeout 40 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 --metrics $M \
    $H --bench-only --ms 4096 --nk 21504,14336 --bn $bn --cluster 1 --order $o --rounds 1 > /tmp/ncu.txt 2>&1
  echo "bn=$bn diag=$o $(grep -E 'sm__cycles_elapsed|per_second|duration|inst_executed' /tmp/ncu.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
done; done
cat "$OUT/diag.txt"
