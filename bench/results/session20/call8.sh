#!/usr/bin/env bash
# Session 20, call 8 (H100, prebuilt at 6ebf552): after moving the stream-K reductions into
# kernels/sm90_wo_stream_k_reduce.cuh (a move, no change): weight-only GPU tests, memcheck on the
# wgmma test and the inline-vs-fixup test, and a short bench row set against call 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/sanitizers_tail.txt"
timeout 120 $B/mixq bench --backend cuda --act f16 --shapes 14336x21504,4096x4096,8192x8192,28672x8192 --m 1,4,16,32,64,256 \
  --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_f16_subset.json" > "$OUT/bench_f16_subset.txt" 2>&1
echo "bench rc=$?"; tail -60 "$OUT/bench_f16_subset.txt" | cut -c1-120
