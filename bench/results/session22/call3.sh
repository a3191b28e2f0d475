#!/usr/bin/env bash
# Session 22, call 3 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). The streaming kernel: activations by cp.async in 4 pieces (the K
# loop waits per piece), run sums from an all-ones MMA (no shared-memory pass), the global split
# reduction shared by up to 4 blocks per tile with 16-byte loads. Weight-only GPU tests,
# memcheck + racecheck on the streaming-kernel tests, the probe (diag rows, as call 2), and the
# streaming kernel forced against the wgmma kernel, W4 and W8, M = 1-16.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaWeightOnly.StreamKernelClusterAndGlobalReduction:CudaWeightOnly.OddShapesActOrderBiasClamp' > /tmp/$tool.log 2>&1
  echo "$tool rc=$?"; tail -2 /tmp/$tool.log | tee -a "$OUT/sanitizers_tail.txt"
done
{
timeout 60 $B/cuda_wo_stream_probe 28672x8192 4 0 1 1,4,8
timeout 60 $B/cuda_wo_stream_probe 14336x21504,8192x57344,4096x4096,8192x8192 4 0 0 1,2,4,8
} > "$OUT/probe.txt" 2>&1
echo "probe rc=$?"
ALL=14336x21504,8192x57344,28672x8192,4096x4096,4096x6144,8192x8192,14336x4096,8192x10240,4096x28672
timeout 240 $B/cuda_wo_sweep --shapes "$ALL" --m 1,2,3,4,6,8,16 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_FORCE_KERNEL=stream;MIXQ_FORCE_KERNEL=wgmma' --rounds 1 --json "$OUT/sweep_stream_vs_wgmma.json" > /tmp/sweep.txt 2>&1
echo "sweep rc=$?"
grep -v "^$" "$OUT/probe.txt" | cut -c1-100
python3 scripts/variants_table.py "$OUT/sweep_stream_vs_wgmma.json" | cut -c1-75
