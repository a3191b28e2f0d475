#!/usr/bin/env bash
# Session 23, call 11 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). The review mend (one pack2 in kernels/dequant_codes.cuh for the
# wgmma dequantizer and dequant16_kernel; the tile-count check): the whole GPU suite, memcheck on
# the dequantize + cuBLAS tests, and the M = 4096 dequantize rows against call 10.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 420 $B/tests/mixq_gpu_tests > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; summary "$OUT/gpu_tests.log"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.EveryMOnBothKernels:CudaFp8WeightOnly.F32ActivationsAndOddShapes' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/sanitizer_tail.txt"
timeout 100 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,4096x6144,14336x4096 --m 4096 \
  --schemes w4g128 --no-progress --json "$OUT/m4096.json" > "$OUT/m4096.txt" 2>&1
echo "bench rc=$?"; grep -E "w4g128" "$OUT/m4096.txt" | head
