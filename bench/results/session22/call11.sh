#!/usr/bin/env bash
# Session 22, call 11 (H100, call 9's prebuilt binaries). The library's bf16 streaming call on the
# small layers is ~12% behind f16 (call 9) where the probe's is 2-4% (call 10): the same sweep for
# both activation types, with the reduction and launch modes forced (cluster / global partials,
# PDL on / off), 4096x4096 and 4096x6144 W4, M = 1 and 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
for act in f16 bf16; do
  timeout 120 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144 --m 1,4 --schemes w4g128 --act $act --no-baseline \
    --variants 'MIXQ_STREAM_PDL=1;MIXQ_STREAM_PDL=0;MIXQ_STREAM_CLUSTER=0;MIXQ_STREAM_CLUSTER=0,MIXQ_STREAM_PDL=1' --rounds 2 \
    --json "$OUT/sweep_$act.json" > /tmp/sweep_$act.txt 2>&1
  echo "sweep $act rc=$?"
  python3 scripts/variants_table.py "$OUT/sweep_$act.json" | cut -c1-110
done
