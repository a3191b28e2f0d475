#!/usr/bin/env bash
# Session 21, call 8 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli;
# the code of call 4, fd53111). The token tile the planner picks at M = 64 ... 512 was measured
# before the inline reduction and this session's division fixes, which sped up mt = 16 ... 64 most.
# Same-process A/B MIXQ_WGMMA_MT=32|64|128|256 against the planner's choice, nine layers, W4/W8 g128
# f16, M = 128, 256, 512.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 400 $B/cuda_wo_sweep --shapes "$NINE" --m 128,256,512 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WGMMA_MT=0;MIXQ_WGMMA_MT=32;MIXQ_WGMMA_MT=64;MIXQ_WGMMA_MT=128;MIXQ_WGMMA_MT=256' --rounds 2 \
  --json "$OUT/ab_mt.json" > /tmp/ab1.txt 2>&1
echo "ab mt rc=$?"; tail -3 /tmp/ab1.txt; python3 scripts/variants_table.py "$OUT/ab_mt.json" > "$OUT/ab_mt.table"
cut -c1-140 "$OUT/ab_mt.table"
