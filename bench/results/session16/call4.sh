#!/usr/bin/env bash
# Session 16, call 4 (H100, prebuilt): where the wgmma kernel's small-M regression of call 3 comes
# from. Same-process A/B of the producer's early weight stages (MIXQ_WS_EARLY: 0 = wait first, the
# session 15 order) with and without dependent launch, W4/W8 g128 f16, M = 8 ... 256.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 400 $B/cuda_wo_sweep --shapes "$NINE" --m 8,16,32,64,128,256 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_EARLY=0,MIXQ_WGMMA_PDL=0;MIXQ_WS_EARLY=0;MIXQ_WS_EARLY=1;MIXQ_WS_EARLY=2;MIXQ_WS_EARLY=-1' \
  --rounds 2 --json "$OUT/ab_early.json" > "$OUT/ab_early.txt" 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_early.json" | tee "$OUT/ab_early.table" | cut -c1-110
