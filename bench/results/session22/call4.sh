#!/usr/bin/env bash
# Session 22, call 4 (H100, call 3's prebuilt binaries). Call 3's racecheck reported one hazard on
# CudaWeightOnly.StreamKernelClusterAndGlobalReduction + OddShapesActOrderBiasClamp: which test,
# which lines. Then the streaming kernel forced against the wgmma kernel with bf16 activations
# (call 3 had f16), for the planner's thresholds.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
for t in StreamKernelClusterAndGlobalReduction OddShapesActOrderBiasClamp; do
  timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 4 $B/tests/mixq_gpu_tests \
    --gtest_filter="CudaWeightOnly.$t" > "$OUT/racecheck_$t.log" 2>&1
  echo "racecheck $t rc=$?"; grep -E "Error|Race|at 0x|SUMMARY|by thread" "$OUT/racecheck_$t.log" | head -16 | cut -c1-200
done
ALL=14336x21504,8192x57344,28672x8192,4096x4096,4096x6144,8192x8192,14336x4096,8192x10240,4096x28672
timeout 240 $B/cuda_wo_sweep --shapes "$ALL" --m 1,2,3,4,6,8 --schemes w4g128,w8g128 --act bf16 --no-baseline \
  --variants 'MIXQ_FORCE_KERNEL=stream;MIXQ_FORCE_KERNEL=wgmma' --rounds 1 --json "$OUT/sweep_stream_vs_wgmma_bf16.json" > /tmp/sweep.txt 2>&1
echo "sweep rc=$?"
python3 scripts/variants_table.py "$OUT/sweep_stream_vs_wgmma_bf16.json" | cut -c1-75
