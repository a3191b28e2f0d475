#!/usr/bin/env bash
# Session 16, call 5 (H100, prebuilt binaries carried): the final code. Weight-only GPU tests, the
# wgmma tests with the bf16 integer-zero path forced on and off, compute-sanitizer on the
# dependent-launch chain and the wgmma tests, then the weight-only table: both mixq bench runs
# (cuBLAS FP16/BF16 in-process) and peers.py's tinygemm in the same call.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for v in 1 0; do
  MIXQ_WS_BF16_NATIVE=$v timeout 60 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.HopperWgmmaKernel' > /tmp/bf16native_$v.log 2>&1
  echo "MIXQ_WS_BF16_NATIVE=$v wgmma tests rc=$?"; summary /tmp/bf16native_$v.log
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.ChainedDecodeCallsUnderDependentLaunch:CudaWeightOnly.DeterministicAndGraphCapturable' > "$OUT/san_memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/san_memcheck.log"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.HopperWgmmaKernel:CudaWeightOnly.ChainedDecodeCallsUnderDependentLaunch' > "$OUT/san_racecheck.log" 2>&1
echo "racecheck rc=$?"; tail -2 "$OUT/san_racecheck.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 200 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
OUT=$OUT TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 60 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"; ls "$OUT"
