#!/usr/bin/env bash
# Session 17, call 10 (H100): the benchmark after the last library CUDA change (the dequantize
# kernel's pair index clamp). Same binaries as call 9 (final code), against main's (05e18f0,
# build-exp/main-bins/gpu-bins-main.tar.xz): M = 4096 on the six layers that run dequantize +
# cuBLAS, W4/W8 g128, f16 and bf16, cuBLAS in each process, main then final, two rounds.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash scripts/prebuild_gpu.sh unpack || exit 1
mkdir -p /tmp/old && tar -xJf build-exp/main-bins/gpu-bins-main.tar.xz -C /tmp/old || exit 1
SIX=4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192
for r in 1 2; do
  for v in main final; do
    B=build-gpu; [ $v = main ] && B=/tmp/old/build-gpu
    timeout 150 $B/cuda_wo_sweep --shapes $SIX --m 4096 --schemes w4g128,w8g128 --act f16,bf16 --json "$OUT/sweep_${v}_$r.json" > /tmp/s.txt 2>&1
    echo "== $v round $r rc=$?"; grep -E "^[0-9]+x" /tmp/s.txt
  done
done
