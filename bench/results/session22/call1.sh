#!/usr/bin/env bash
# Session 22, call 1 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). The streaming kernel stages its activations with cp.async (all
# copies in flight at once) instead of a loop of plain loads. Weight-only GPU tests; the staging
# A/B in one process (probe: diag row "staging by plain loads (before)"); the streaming kernel
# forced against the wgmma kernel at M = 1-8 on the large layers (where the planner's
# stream_max_m_wgmma boundary sits).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 150 $B/cuda_wo_stream_probe 14336x21504,28672x8192,8192x57344,4096x4096,8192x8192 4 0 2 1,2,4,8 > "$OUT/probe.txt" 2>&1
echo "probe rc=$?"
LARGE=14336x21504,8192x57344,28672x8192,4096x4096,4096x6144,8192x8192
timeout 200 $B/cuda_wo_sweep --shapes "$LARGE" --m 1,2,4,6,8,16 --schemes w4g128 --act f16 --no-baseline \
  --variants 'MIXQ_FORCE_KERNEL=stream;MIXQ_FORCE_KERNEL=wgmma' --rounds 2 --json "$OUT/sweep_stream_vs_wgmma.json" > /tmp/sweep.txt 2>&1
echo "sweep rc=$?"
cat "$OUT/probe.txt" | grep -v "^$" | cut -c1-100
python3 scripts/variants_table.py "$OUT/sweep_stream_vs_wgmma.json" | cut -c1-90
