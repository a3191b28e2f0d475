#!/usr/bin/env bash
# Session 24, call 5 (H100; binaries of call 3). Two open rows of the weight-only table with the
# TMA-store epilogue: the token tile at M = 1024 ... 4096 on the K = 4096 layers (MIXQ_WGMMA_MT
# 128 against the planner's 256; 4096x6144 M = 1024 is the one M >= 1024 miss), and the bf16
# dequantization path at M = 1024 / 4096 (MIXQ_WS_BF16_NATIVE=0: the f32 path, =1: Bf16Zero, the
# default), W4 and W8 g128.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 150 $B/cuda_wo_sweep --shapes 4096x6144,4096x4096,4096x28672 --m 512,1024,2048,4096 --schemes w4g128 --act f16 \
  --no-baseline --variants "MIXQ_WGMMA_MT=256;MIXQ_WGMMA_MT=128" --rounds 3 --json "$OUT/mt.json" > /tmp/mt.txt 2>&1
echo "mt A/B rc=$?"; python3 scripts/variants_table.py "$OUT/mt.json" > "$OUT/mt.md" 2>&1
timeout 200 $B/cuda_wo_sweep --shapes 4096x4096,14336x4096,8192x8192,28672x8192 --m 1024,4096 --schemes w4g128,w8g128 --act bf16 \
  --no-baseline --variants "MIXQ_WS_BF16_NATIVE=1;MIXQ_WS_BF16_NATIVE=0" --rounds 2 --json "$OUT/bf16.json" > /tmp/bf16.txt 2>&1
echo "bf16 A/B rc=$?"; python3 scripts/variants_table.py "$OUT/bf16.json" > "$OUT/bf16.md" 2>&1
cut -c1-100 "$OUT/mt.md"; cut -c1-100 "$OUT/bf16.md"
