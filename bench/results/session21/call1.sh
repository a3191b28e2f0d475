#!/usr/bin/env bash
# Session 21, call 1 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# Paired stream-K: with two CTAs per SM (W4 weights >= 48 MB at token tile 16), each CTA claims the
# virtual index 2 x SM + its arrival order on the SM and the older CTA gets MIXQ_WS_PAIR_SKEW
# permille of a CTA's work more (-1: no claims, the previous kernel).
# 1. weight-only GPU tests (new: PairedStreamKIsCorrectAndDeterministic, CudaStreamKClaims.*),
#    memcheck on both new tests, racecheck on the claims test;
# 2. same-process A/B of the skew on the four two-CTA layers, W4 g128 f16, M = 1, 4, 8, 16.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaStreamKClaims.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"; grep "claims got" "$OUT/tests.log"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.PairedStreamKIsCorrectAndDeterministic:CudaStreamKClaims.*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee -a "$OUT/sanitizers_tail.txt"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaStreamKClaims.*' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log | tee -a "$OUT/sanitizers_tail.txt"
TWO=14336x21504,8192x57344,28672x8192,4096x28672
timeout 300 $B/cuda_wo_sweep --shapes "$TWO" --m 1,4,8,16 --schemes w4g128 --act f16 --no-baseline \
  --variants 'MIXQ_WS_PAIR_SKEW=-1;MIXQ_WS_PAIR_SKEW=0;MIXQ_WS_PAIR_SKEW=15;MIXQ_WS_PAIR_SKEW=30;MIXQ_WS_PAIR_SKEW=45;MIXQ_WS_PAIR_SKEW=70' \
  --rounds 2 --json "$OUT/ab_skew.json" > /tmp/ab1.txt 2>&1
echo "ab skew rc=$?"; tail -3 /tmp/ab1.txt; python3 scripts/variants_table.py "$OUT/ab_skew.json" > "$OUT/ab_skew.table"
cut -c1-150 "$OUT/ab_skew.table"
