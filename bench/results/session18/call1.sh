#!/usr/bin/env bash
# Session 18, call 1 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# The warp-specialized wgmma kernel's stream-K pieces summed in the kernel (last warp of a tile,
# tickets) against the fixup kernel: weight-only GPU tests (the new bitwise test also with the
# two-CTA MT = 16 shape), sanitizers on it, then a same-process A/B (MIXQ_WS_REDUCE=kernel|inline),
# nine layers, W4/W8 g128 f16, M = 3 ... 256, two rounds.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
MIXQ_WS_SHAPE=2 timeout 60 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaStreamKReduction*:CudaWeightOnly.ChainedDecode*' > /tmp/shape2.log 2>&1
echo "two-CTA shape rc=$?"; summary /tmp/shape2.log
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.WgmmaStreamKReduction*:CudaWeightOnly.DeterministicAndGraphCapturable' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.WgmmaStreamKReduction*' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log
tail -3 /tmp/memcheck.log /tmp/racecheck.log /tmp/shape2.log > "$OUT/sanitizers_shape2.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 300 $B/cuda_wo_sweep --shapes "$NINE" --m 3,4,8,16,32,64,128,256 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_REDUCE=kernel;MIXQ_WS_REDUCE=inline' \
  --rounds 2 --json "$OUT/ab_reduce.json" > "$OUT/ab_reduce.txt" 2>&1
echo "ab rc=$?"; python3 scripts/variants_table.py "$OUT/ab_reduce.json" > "$OUT/ab_reduce.table"; cut -c1-120 "$OUT/ab_reduce.table" | head -160
