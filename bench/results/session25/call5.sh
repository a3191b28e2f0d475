#!/usr/bin/env bash
# Session 25, call 5 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). (1) The default two CTAs per SM at mt = 32 for W4 >= 48 MB (bf16: >= 24 MB), from
# call 4; (2) mt = 64 built in both shapes (MIXQ_WS_SHAPE=2; default one CTA); (3) stream-K ranges
# before whole tiles (MIXQ_WS_SK_FIRST=1; default off). Weight-only GPU tests (the stream-K test
# now also runs ranges first, bit-identical), the same-process A/B of the mt = 64 shapes at
# M = 33 / 48 / 64, and of the stream-K order and reduction at M = 256 / 1024 / 4096 (W4 f16),
# memcheck on the two changed tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 330 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 150 $B/cuda_wo_sweep --shapes $NINE --m 33,48,64 --schemes w4g128,w8g128 --act f16,bf16 \
  --no-baseline --variants "MIXQ_WS_SHAPE=1;MIXQ_WS_SHAPE=2" --rounds 2 \
  --json "$OUT/ab_shape_mt64.json" > /tmp/ab1.txt 2>&1
echo "A/B mt64 rc=$?"; python3 scripts/variants_table.py "$OUT/ab_shape_mt64.json" > "$OUT/ab_shape_mt64.md" 2>&1
timeout 200 $B/cuda_wo_sweep --shapes $NINE --m 256,1024,4096 --schemes w4g128 --act f16 --no-baseline \
  --variants "MIXQ_WS_SK_FIRST=0;MIXQ_WS_REDUCE=inline;MIXQ_WS_SK_FIRST=1,MIXQ_WS_REDUCE=inline;MIXQ_WS_SK_FIRST=1" \
  --rounds 2 --json "$OUT/ab_sk_first.json" > /tmp/ab2.txt 2>&1
echo "A/B sk_first rc=$?"; python3 scripts/variants_table.py "$OUT/ab_sk_first.json" > "$OUT/ab_sk_first.md" 2>&1
timeout 150 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.WgmmaSmallTilesInBothCtaShapes:CudaWeightOnly.StreamKInlineReductionMatchesFixupKernel' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -3 /tmp/memcheck.log | tee "$OUT/sanitizers.txt"
cat "$OUT/ab_sk_first.md"
