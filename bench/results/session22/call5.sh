#!/usr/bin/env bash
# Session 22, call 5 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). Final streaming kernel (call 3's code) + the re-measured planner
# thresholds (stream_max_m_wgmma). Weight-only GPU tests, then the whole weight-only table: both
# mixq bench runs and peers.py's tinygemm in one call. (memcheck / racecheck of this kernel code:
# call 3 and call 4.)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 240 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
OUT=$OUT TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 90 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; ls "$OUT"
grep -E "^ *(14336x21504|28672x8192|8192x57344|4096x4096) .*w4g128" /tmp/bench_cuda_f16.txt | head -40 | cut -c1-140
