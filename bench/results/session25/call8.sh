#!/usr/bin/env bash
# Session 25, call 8 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). The final code: call 6's plus the planner's token tile of 128 (not 64) for short GEMMs
# with few tiles past M = 128 (call 7). Weight-only GPU tests, racecheck on the two-CTA test, then
# the whole weight-only table (mixq bench W4 + W8 g128, f16 and bf16, nine layers x 11 M; tinygemm
# in the same call).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 150 compute-sanitizer --tool racecheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaSmallTilesInBothCtaShapes' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -3 /tmp/racecheck.log | tee "$OUT/sanitizers.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 200 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
mkdir -p /tmp/tg; OUT=/tmp/tg TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 90 python3 peers/peers.py > /tmp/peers_tg.txt 2>&1
echo "tinygemm rc=$?"; cp /tmp/tg/peers_tinygemm.json "$OUT/" 2>/dev/null
ls "$OUT"
