#!/usr/bin/env bash
# Session 21, call 6 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli;
# the code of call 4, fd53111). Session 20 kept the fixup kernel at token tiles >= 128 (and at 64 with
# > 2.5 pieces a tile) because the inline reduction measured 1-18% slower there; but its owner then
# resolved each contributor's slot with a 64-bit division, serialized with the loads at mt > 64
# (unroll 1). Same-process A/B MIXQ_WS_REDUCE=fixup|inline|auto (auto = the rule), nine layers,
# W4/W8 g128 f16, M = 64, 128, 256, 1024.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 400 $B/cuda_wo_sweep --shapes "$NINE" --m 64,128,256,1024 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_REDUCE=fixup;MIXQ_WS_REDUCE=inline;MIXQ_WS_REDUCE=auto' --rounds 2 --json "$OUT/ab_reduce.json" > /tmp/ab1.txt 2>&1
echo "ab reduce rc=$?"; python3 scripts/variants_table.py "$OUT/ab_reduce.json" > "$OUT/ab_reduce.table"
cut -c1-100 "$OUT/ab_reduce.table"
