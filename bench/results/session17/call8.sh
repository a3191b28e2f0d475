#!/usr/bin/env bash
# Session 17, call 8 (H100): the rewritten dequantize kernel of wo_dequant_cublas (direct pair
# stores from the fragment layout, no shared-memory transpose). Prebuilt (bash
# scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli) on the new code, and main's
# binaries (build-exp/main-bins/gpu-bins-main.tar.xz, the same script on 05e18f0) for before/after.
# Weight-only GPU tests, memcheck on the odd-shape cases, then M = 4096 on the six layers that run
# dequantize + cuBLAS, main then new then main then new (cuBLAS in each process), and ncu kernel times.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash scripts/prebuild_gpu.sh unpack || exit 1
mkdir -p /tmp/old && tar -xJf build-exp/main-bins/gpu-bins-main.tar.xz -C /tmp/old || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 build-gpu/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.OddShapesActOrderBiasClamp' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
SIX=4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192
for r in 1 2; do
  for v in old new; do
    B=build-gpu; [ $v = old ] && B=/tmp/old/build-gpu
    timeout 120 $B/cuda_wo_sweep --shapes $SIX --m 4096 --schemes w4g128,w8g128 --act f16 --json "$OUT/sweep_${v}_$r.json" > /tmp/s.txt 2>&1
    echo "== $v round $r rc=$?"; grep -E "^[0-9]+x" /tmp/s.txt
  done
done
for shape in 4096x4096 4096x6144; do
  timeout 90 ncu -k regex:"dequant|nvjet|gemm" --launch-count 4 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    build-gpu/cuda_wo_sweep --shapes $shape --m 4096 --schemes w4g128 --act f16 --no-baseline > /tmp/ncu.txt 2>&1
  echo "ncu $shape rc=$?"; grep -E "dequant_kernel|nvjet|duration|bytes" /tmp/ncu.txt | sed -E 's/ +/ /g' | head -16
done
