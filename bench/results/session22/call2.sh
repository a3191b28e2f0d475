#!/usr/bin/env bash
# Session 22, call 2 (H100; carry build-gpu/cuda_wo_stream_probe, built here with
# `cmake --build build-gpu --target cuda_wo_stream_probe`). Call 1: the streaming kernel's time
# grows ~2.2 us per token at M = 1..8 with the same MMA work. Hypothesis: the staged activations
# take the SM's shared memory from its L1, which holds the weight loads in flight. Probe rows:
#  a) M = 1 with each block's allocation padded to M = 8's (same work, less L1);
#  b) M = 8 with the staging capped at 64 / 96 KB per SM (more, shorter stages);
#  c) M = 1 and 8 with parts switched off (where the time goes).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
P=build-gpu/cuda_wo_stream_probe
L3=28672x8192,8192x57344,14336x21504
run() { echo "== $*"; }
{
run "baseline M=1,8"; timeout 60 $P $L3 4 0 0 1,8
for pad in 25000 60000; do run "M=1 pad $pad"; MIXQ_PROBE_SMEM_PAD=$pad timeout 60 $P $L3 4 0 0 1; done
for b in 32768 65536 98304; do run "M=8 budget $b"; MIXQ_PROBE_SMEM_BUDGET=$b timeout 60 $P $L3 4 0 0 4,8; done
run "diag rows"; timeout 100 $P 28672x8192 4 0 1 1,8
} > "$OUT/probe2.txt" 2>&1
echo "rc=$?"
grep -v "^$" "$OUT/probe2.txt" | cut -c1-130
