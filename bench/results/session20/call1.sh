#!/usr/bin/env bash
# Session 20, call 1 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# Stream-K pieces summed inside the wgmma kernel by the tile's owner CTA (per-tile, per-warp
# completion flags; the default now) instead of the fixup kernel (MIXQ_WS_REDUCE=fixup).
# 1. weight-only GPU tests (incl. the new bitwise inline-vs-fixup test), memcheck + racecheck;
# 2. same-process A/B MIXQ_WS_REDUCE=fixup|inline, nine layers, W4/W8 g128 f16, M = 4 ... 1024.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel:CudaWeightOnly.HopperWgmmaKernel' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log | tee -a "$OUT/sanitizers_tail.txt"
done
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 240 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,64,128,256,1024 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_REDUCE=fixup;MIXQ_WS_REDUCE=inline' --rounds 2 --json "$OUT/ab_reduce.json" > /tmp/ab1.txt 2>&1
echo "ab reduce rc=$?"; python3 scripts/variants_table.py "$OUT/ab_reduce.json" > "$OUT/ab_reduce.table"
cut -c1-110 "$OUT/ab_reduce.table"
