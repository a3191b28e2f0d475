#!/usr/bin/env bash
# Session 21, call 12 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# After the review: the owner's last-contributor arithmetic moved from the kernel into
# StreamKCursor::last_contributor (wo_stream_k.hpp, unit-tested; same expressions). Weight-only GPU
# tests, memcheck on the wgmma and inline tests, and call 10's sweep (same harness) as a check.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 150 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee -a "$OUT/sanitizers_tail.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 120 $B/cuda_wo_sweep --shapes "$NINE" --m 4,16,32,64 --schemes w4g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_REDUCE=auto' --rounds 2 --json "$OUT/sweep_w4.json" > /tmp/sweep.txt 2>&1
echo "sweep rc=$?"; python3 scripts/variants_table.py "$OUT/sweep_w4.json" | cut -c1-60
