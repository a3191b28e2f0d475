#!/usr/bin/env bash
# Session 26, call 1 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The few-token FP8 block-scaled GEMM (sm90_fp8_block_skinny_mt*): SASS check, the Fp8Block GPU
# tests, sanitizers on the new tests, then mixq bench W8A8 FP8 at M = 1..64 on the nine layers,
# the new kernel (default dispatch) against the 128-row tiles (forced) in the same call, with
# cuBLASLt block FP8 (peers.py) in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
cuobjdump --dump-sass -fun sm90_fp8_skinny_kernel $B/tests/mixq_gpu_tests 2>/dev/null | grep -o "QGMMA[.A-Z0-9x]*" | sort | uniq -c | head
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.*:CudaActQuant.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaFp8Block.SkinnyKernelOddShapesAndCutTiles' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log
done 2>&1 | tee "$OUT/sanitizers.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
MS=1,2,4,8,16,32,64
timeout 240 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m $MS --schemes fp8b128:fp8 \
  --no-progress --json "$OUT/skinny.json" > "$OUT/skinny.txt" 2>&1; echo "bench skinny rc=$?"
MIXQ_FORCE_KERNEL=sm90_fp8_block_gemm_bm128_bn128_s6 timeout 240 $B/mixq bench --backend cuda --act bf16 \
  --shapes $NINE --m $MS --schemes fp8b128:fp8 --no-progress --json "$OUT/tiles128.json" > "$OUT/tiles128.txt" 2>&1
echo "bench tiles128 rc=$?"
OUT=$OUT TAG=fp8 CEIL=0 OPS=cublas_fp8_block128 MS=16,32,64 timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; tail -3 /tmp/peers.txt
python3 scripts/skinny_table.py "$OUT/skinny.json" "$OUT/tiles128.json" "$OUT/peers_fp8.json" | tee "$OUT/table.md"
