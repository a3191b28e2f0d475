#!/usr/bin/env bash
# Session 17, call 1 (H100): the FP8 block GEMM with the consumer warpgroups' MMAs issued in turn
# (BlockGemmParams::mma_order). Harness built here:
#   nvcc -O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude \
#     --expt-relaxed-constexpr bench/cuda_fp8_sweep.cu src/cuda/sm90_fp8_gemm.cu src/core/error.cpp \
#     -o build-exp/fp8/fp8_sweep_order
# Checks with both orders, then the same-process A/B (order 0 / 1 x tiles 128 / 192, interleaved
# rounds), ncu cycles of one launch each, and cuBLASLt's block FP8 in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
H=build-exp/fp8/fp8_sweep_order
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
timeout 150 $H --check-only --order 0,1 > "$OUT/checks.txt" 2>&1
echo "checks rc=$?"; grep -cE " OK$" "$OUT/checks.txt"; grep -E "FAIL|error|illegal|checks:" "$OUT/checks.txt" | head
timeout 240 $H --bench-only --ms 2048,4096 --bn 128,192 --cluster 1 --order 0,1 --rounds 3 --json "$OUT/ab.json" > "$OUT/ab.txt" 2>&1
echo "ab rc=$?"
for o in 0 1; do
  timeout 60 ncu --clock-control none -k regex:block_gemm --launch-skip 3 --launch-count 1 \
    --metrics sm__cycles_elapsed.avg,gpc__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    $H --bench-only --ms 4096 --nk 21504,14336 --bn 192 --cluster 1 --order $o --rounds 1 > "$OUT/ncu_order$o.txt" 2>&1
  echo "ncu order=$o rc=$?"; grep -E "cycles_elapsed|per_second|duration|gmma" "$OUT/ncu_order$o.txt"
done
OUT=$OUT TAG=fp8 CEIL=0 OPS=cublas_fp8_block128 MS=2048,4096 SHAPES=16384x7168,1536x24576,14336x21504,8192x57344 \
  timeout 120 python3 peers/peers.py > "$OUT/peers.txt" 2>&1
echo "peers rc=$?"; grep -E "cublas|us" "$OUT/peers.txt" | head -20
cat "$OUT/ab.txt"
