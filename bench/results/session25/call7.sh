#!/usr/bin/env bash
# Session 25, call 7 (H100; call 6's binaries, code at eb37ca5). The token tile at M = 128-1024 on
# the K <= 14336 layers after call 5's inline-reduction rule: same-process A/B of MIXQ_WGMMA_MT
# = 64 / 128 / 256 against the planner (W4 g128, f16 and bf16).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 300 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,8192x8192,8192x10240,14336x4096 --m 128,256,512,1024 \
  --schemes w4g128 --act f16,bf16 --no-baseline \
  --variants "MIXQ_WS_GROUP_N=8;MIXQ_WGMMA_MT=64;MIXQ_WGMMA_MT=128;MIXQ_WGMMA_MT=256" --rounds 2 \
  --json "$OUT/ab_mt.json" > /tmp/ab.txt 2>&1
echo "A/B rc=$?"; python3 scripts/variants_table.py "$OUT/ab_mt.json" > "$OUT/ab_mt.md" 2>&1
cat "$OUT/ab_mt.md"
