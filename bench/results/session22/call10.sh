#!/usr/bin/env bash
# Session 22, call 10 (H100). Call 9's table: on the small layers bf16 did not gain what f16 did
# from the >= 8-chunk activation pieces (4096x4096 W4 M = 1: f16 8.33 -> 7.75 us, bf16 8.75 ->
# 8.74). The probe (now with MIXQ_PROBE_BF16=1) with diag rows, f16 against bf16, twice:
#   nvcc -O3 -std=c++17 -DMIXQ_STREAM_DIAG -I bench -I src -I include -gencode=arch=compute_90a,code=sm_90a \
#        --expt-relaxed-constexpr bench/cuda_wo_stream_probe.cu -o build-gpu/wo_stream_probe_p8
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for round in 1 2; do
  for bf in 0 1; do
    MIXQ_PROBE_BF16=$bf timeout 100 build-gpu/wo_stream_probe_p8 4096x4096,4096x6144 4 0 1 1,4
  done
done > "$OUT/probe_f16_bf16.txt" 2>&1
echo "rc=$?"
grep -v "^$" "$OUT/probe_f16_bf16.txt" | grep -v "^diag" | cut -c1-100 | head -80
