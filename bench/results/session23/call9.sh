#!/usr/bin/env bash
# Session 23, call 9 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). The final code: call 6's plus dequant16_kernel with 32-bit tile
# coordinates advanced without a division per tile, and the K-bound test only in a row's last
# chunk (call 8's ncu: issue slots 55% busy, IPC 2.66). Weight-only + FP8 weight-only GPU tests;
# memcheck + racecheck on the streaming kernel's tests, memcheck on dequantize + cuBLAS tests; ncu
# of the dequantize kernel; then the whole weight-only table (both mixq bench runs and peers.py's
# tinygemm in one call).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for tool in memcheck racecheck; do
  filter=CudaWeightOnly.StreamKernelClusterAndGlobalReduction
  [ $tool = memcheck ] && filter="$filter:CudaWeightOnly.DeterministicAndGraphCapturable:CudaWeightOnly.EveryMOnBothKernels:CudaFp8WeightOnly.F32ActivationsAndOddShapes"
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests --gtest_filter="$filter" > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log | tee -a "$OUT/sanitizers_tail.txt"
done
timeout 90 ncu --kernel-name regex:dequant16 --launch-count 1 --section SpeedOfLight --section Occupancy \
  $B/cuda_wo_sweep --shapes 4096x4096 --m 4096 --schemes w4g128 --act f16 --no-baseline > /tmp/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy" /tmp/ncu.txt | tee -a "$OUT/sanitizers_tail.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 240 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
OUT=$OUT TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 90 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; ls "$OUT"
