#!/usr/bin/env bash
# One device call for the Hopper weight-only wgmma work (sm90_wo_wgmma*.cu): build (sm_90a only),
# wgmma + weight-only GPU tests, memcheck on a small subset, the sweep (cuBLAS side by side), and
# optionally the v1 kernel for comparison. Logs under $OUT.
#   bash scripts/wgmma_device.sh [v1] [ncu]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
SHAPES=${SHAPES:-14336x21504,4096x4096,8192x28672,28672x8192}
MS=${MS:-16,32,64,128,256,1024}
MIXQ_CUDA_ARCHS=90a MIXQ_TARGETS="mixq_gpu_tests cuda_wo_sweep" bash scripts/device_run.sh > "$OUT/build.txt" 2>&1
tail -3 "$OUT/build.txt"
[ -x $B/cuda_wo_sweep ] || exit 1
timeout ${TEST_TIMEOUT:-120} $B/tests/mixq_gpu_tests --gtest_filter='*Wgmma*:CudaWeightOnly.*' > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED) |tests ran|Failure" "$OUT/tests.txt" | head -20
# the warp-specialized kernel at every M (the default sends M <= 64 to v1)
MIXQ_WGMMA_V1=0 timeout ${TEST_TIMEOUT:-120} $B/tests/mixq_gpu_tests --gtest_filter='*Wgmma*:CudaWeightOnly.Deterministic*:CudaWeightOnly.Concurrent*' > "$OUT/tests_ws.txt" 2>&1
echo "tests (ws everywhere) rc=$?"; grep -E "^\[  (FAILED|PASSED) |Failure" "$OUT/tests_ws.txt" | head -10
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.DeterministicAndGraphCapturable' > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.txt"
MIXQ_FORCE_KERNEL=${FORCE-wgmma} timeout ${SWEEP_TIMEOUT:-150} $B/cuda_wo_sweep --shapes $SHAPES --m $MS --schemes w4g128,w8g128 --act f16,bf16 \
  --json "$OUT/sweep_ws.json" > "$OUT/sweep_ws.txt" 2>&1
echo "sweep rc=$?"
for a in "$@"; do
  case "$a" in
    v1) MIXQ_WGMMA_V1=1 MIXQ_FORCE_KERNEL=wgmma timeout 80 $B/cuda_wo_sweep --shapes $SHAPES --m $MS --schemes w4g128 --act f16 --no-baseline \
          > "$OUT/sweep_v1.txt" 2>&1; echo "v1 sweep rc=$?" ;;
    cublas)  # the dequantize + cuBLAS path at the M where the dispatcher chooses between them
      MIXQ_FORCE_KERNEL=cublas timeout 60 $B/cuda_wo_sweep --shapes $SHAPES --m 128,256,1024 --schemes w4g128 --act f16 --no-baseline \
          > "$OUT/sweep_cublas.txt" 2>&1; echo "cublas sweep rc=$?"
      grep -E "^[0-9]+x" "$OUT/sweep_cublas.txt" | awk '{printf "dq+cublas %s %s M=%s %s\n",$1,$2,$4,$5}' ;;
    diag)  # timing with parts of the producer's copies left out (wrong results, timing only)
      for d in ${DIAGS:-1 2 4 7}; do
        echo "diag=$d: $(MIXQ_WS_DIAG=$d MIXQ_FORCE_KERNEL=wgmma timeout 40 $B/cuda_wo_sweep --shapes 14336x21504 --m 16,128,256 --schemes w4g128 --act f16 --no-baseline 2>&1 | grep -E '^[0-9]+x' | awk '{print $4 ":" $5}' | tr '\n' ' ')"
      done ;;
    ncu)
      MIXQ_FORCE_KERNEL=wgmma timeout 100 ncu --clock-control none -k regex:wo_wgmma_ws --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
        $B/cuda_wo_sweep --shapes 14336x21504 --m ${NCU_M:-128} --schemes w4g128 --act f16 --no-baseline > "$OUT/ncu.txt" 2>&1
      echo "ncu rc=$?"
      grep -E "Duration|DRAM Throughput|Compute \(SM\)|L1/TEX Hit|L2 Hit|Stall|Warp Cycles Per Issued|Issued Ipc|Executed Ipc" "$OUT/ncu.txt" | head -20 ;;
  esac
done
grep -E "^[0-9]+x" "$OUT/sweep_ws.txt" | awk '{printf "%s %s %s M=%s ws=%s cublas=%s x=%s %s\n",$1,$2,$3,$4,$5,$6,$7,$10}'
[ -f "$OUT/sweep_v1.txt" ] && grep -E "^[0-9]+x" "$OUT/sweep_v1.txt" | awk '{printf "v1 %s %s M=%s %s %s\n",$1,$2,$4,$5,$10}'
exit 0
