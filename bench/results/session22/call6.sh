#!/usr/bin/env bash
# Session 22, call 6 (H100, call 5's prebuilt binaries = the final code). The whole GPU test suite,
# then FP8 weight-only decode (issue #5's "FP8 at M <= 16 >= 85% of the read ceiling") on the three
# large layers with the new streaming kernel and planner, f16 and bf16 activations, W8 alongside.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 420 $B/tests/mixq_gpu_tests > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran" "$OUT/gpu_tests.log" | tail -8
for act in f16 bf16; do
  timeout 120 $B/mixq bench --backend cuda --act $act --shapes 14336x21504,8192x57344,28672x8192 --m 1,2,4,8,16 \
    --schemes fp8b128,w8g128 --no-progress --json "$OUT/fp8_wo_$act.json" > "$OUT/fp8_wo_$act.txt" 2>&1
  echo "fp8 wo $act rc=$?"
done
head -1 "$OUT/fp8_wo_f16.txt"; grep -h "^fp8b128" "$OUT"/fp8_wo_*.txt | cut -c1-95
