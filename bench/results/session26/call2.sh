#!/usr/bin/env bash
# Session 26, call 2 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The skinny FP8 kernel with two consumer warpgroups, and the quantizer before it as a
# programmatic dependent launch: tests, sanitizers, then mixq bench W8A8 FP8 at M = 1..64 on the
# nine layers: default (PDL), MIXQ_SKINNY_PDL=0, and the 128-row tiles forced, all in one call,
# with cuBLASLt block FP8 (peers.py) and the weight-only FP8 decode (fp8b128, no activation
# quantization) for reference.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
cuobjdump --dump-sass $B/mixq 2>/dev/null | grep -A100000 "sm90_fp8_skinny_kernel" | grep -o "QGMMA\.[0-9x]*\.[A-Z0-9.]*" | sort | uniq -c | head -6
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" "$1" | head -30; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.*:CudaActQuant.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaFp8Block.SkinnyKernelOddShapesAndCutTiles:CudaFp8Block.SkinnyKernelEveryTokenCount' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log
done 2>&1 | tee "$OUT/sanitizers.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
MS=1,2,4,8,16,32,64
bench() { timeout 240 $B/mixq bench --backend cuda --act bf16 --shapes $NINE --m $MS --schemes $1 \
  --no-progress --json "$OUT/$2.json" > /tmp/$2.txt 2>&1; echo "bench $2 rc=$?"; }
bench fp8b128:fp8 skinny
MIXQ_SKINNY_PDL=0 bench fp8b128:fp8 skinny_nopdl
MIXQ_FORCE_KERNEL=sm90_fp8_block_gemm_bm128_bn128_s6 bench fp8b128:fp8 tiles128
MS=1,16,64 bench fp8b128 wo_fp8
OUT=$OUT TAG=fp8 CEIL=0 OPS=cublas_fp8_block128 MS=16,32,64 timeout 150 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"
LABEL="no PDL" python3 scripts/skinny_table.py "$OUT/skinny.json" "$OUT/skinny_nopdl.json" > "$OUT/pdl_ab.md"
python3 scripts/skinny_table.py "$OUT/skinny.json" "$OUT/tiles128.json" "$OUT/peers_fp8.json" | tee "$OUT/table.md"
grep -E "4096x4096|8192x8192|14336x21504" "$OUT/pdl_ab.md" | head -24
