#!/usr/bin/env bash
# Session 26, call 5 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The final code: the skinny tests (FP8 and INT8) and sanitizers on them, then the few-token W8A8
# tables: mixq bench FP8 block and INT8 g128 at M = 1..64 on the nine layers (activation
# quantization inside the call, 16-bit output) with cuBLASLt block FP8 and torch._int_mm (GEMM
# only, pre-quantized inputs, no scales for INT8) in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='*Skinny*:CudaInt8Block.BadInputs:CudaInt8Block.ShapesAndBlocks' > "$OUT/tests.log" 2>&1
echo "skinny tests rc=$?"; summary "$OUT/tests.log"
{
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperSkinnyOddShapes:CudaFp8Block.SkinnyKernelOddShapesAndCutTiles' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaFp8Block.SkinnyKernelOddShapesAndCutTiles' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -2 /tmp/racecheck.log
} 2>&1 | tee -a "$OUT/tests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 200 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m 1,2,4,8,16,32,64 \
  --schemes fp8b128:fp8,w8g128:int8 --no-progress --json "$OUT/w8a8_small_m.json" > /tmp/b.txt 2>&1
echo "bench rc=$?"
OUT=$OUT TAG=w8a8 CEIL=0 OPS=cublas_fp8_block128,cublas_int8 MS=16,32,64 timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"
python3 scripts/w8a8_small_m_table.py "$OUT/w8a8_small_m.json" "$OUT/peers_w8a8.json" | tee "$OUT/table.md" | head -40
