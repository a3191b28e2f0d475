#!/usr/bin/env bash
# Session 16, call 1 (H100, prebuilt binaries carried): the weight-only GPU tests, then two
# same-process A/Bs on the wgmma kernel: the bf16 integer-zero dequantization (MIXQ_WS_BF16_NATIVE)
# and programmatic dependent launch of the kernel and its fixup (MIXQ_WGMMA_PDL).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$OUT/wotests.log" | tail -12
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
ab() {  # name act schemes ms variants
  timeout 200 $B/cuda_wo_sweep --shapes "$NINE" --m "$3" --schemes "$4" --act "$2" --no-baseline \
    --variants "$5" --rounds 2 --json "$OUT/ab_$1.json" > "$OUT/ab_$1.txt" 2>&1
  echo "== $1 rc=$?"; grep -m1 ceiling "$OUT/ab_$1.txt"
  python3 scripts/variants_table.py "$OUT/ab_$1.json" > "$OUT/ab_$1.table"
}
ab bf16 f16,bf16 4,16,32,64,128,256 w4g128 'MIXQ_WS_BF16_NATIVE=0;MIXQ_WS_BF16_NATIVE=1'
ab pdl f16 4,16,64,256 w4g128,w8g128 'MIXQ_WGMMA_PDL=0;MIXQ_WGMMA_PDL=1'
cat "$OUT/ab_bf16.table" "$OUT/ab_pdl.table"
