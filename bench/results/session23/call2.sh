#!/usr/bin/env bash
# Session 23, call 2 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe, plus build-gpu/wo_stream_probe_nodiag: the probe built with
# -DMIXQ_PROBE_NO_DIAG, the kernel as the library compiles it).
# 1. The streaming kernel's weight prefetch (chunks past the register ring copied into shared
#    memory before the grid-dependency wait): GPU tests at the default (2), stream tests at 1 and 4,
#    memcheck; same-process A/B MIXQ_STREAM_PREFETCH=0/2/4 on seven layers, W4/W8, M = 1-16.
# 2. The bf16 decode lead (call 1: the bf16 kernel, not the data, loses PDL's gain in the library):
#    eager module loading, and the probe without its diag code.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/tests.log"
for pre in 1 4; do
  MIXQ_STREAM_PREFETCH=$pre timeout 120 $B/tests/mixq_gpu_tests \
    --gtest_filter='CudaWeightOnly.StreamKernelClusterAndGlobalReduction:CudaWeightOnly.EveryMOnBothKernels:CudaWeightOnly.DeterministicAndGraphCapturable:CudaFp8WeightOnly.*' >> "$OUT/tests.log" 2>&1
  echo "prefetch $pre tests rc=$?"; summary "$OUT/tests.log" | tail -2
done
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.StreamKernelClusterAndGlobalReduction' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/sanitizer_tail.txt"
timeout 240 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,14336x4096,8192x10240,8192x8192,28672x8192,14336x21504 \
  --m 1,2,4,8,16 --schemes w4g128,w8g128 --act f16 --no-baseline \
  --variants 'MIXQ_STREAM_PREFETCH=0;MIXQ_STREAM_PREFETCH=2;MIXQ_STREAM_PREFETCH=4' --rounds 2 \
  --json "$OUT/prefetch_f16.json" > /tmp/prefetch_f16.txt 2>&1
echo "sweep f16 rc=$?"
timeout 100 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144 --m 1,4 --schemes w4g128 --act bf16,f16 --no-baseline \
  --variants 'MIXQ_STREAM_PREFETCH=0;MIXQ_STREAM_PREFETCH=2;MIXQ_STREAM_PREFETCH=0,MIXQ_STREAM_PDL=0;MIXQ_STREAM_PREFETCH=2,MIXQ_STREAM_PDL=0' \
  --rounds 2 --json "$OUT/prefetch_bf16.json" > /tmp/prefetch_bf16.txt 2>&1
echo "sweep bf16 rc=$?"
{
  for load in LAZY EAGER; do
    echo "== CUDA_MODULE_LOADING=$load"
    CUDA_MODULE_LOADING=$load timeout 60 $B/cuda_wo_sweep --shapes 4096x4096 --m 1 --schemes w4g128 --act f16,bf16 --no-baseline \
      --variants 'MIXQ_STREAM_PREFETCH=0' --rounds 2 2>&1 | grep -E "^4096"
  done
  for bf in 0 1; do
    for pre in 0 2; do
      echo "== probe without diag code, MIXQ_PROBE_BF16=$bf MIXQ_PROBE_PREFETCH=$pre"
      MIXQ_PROBE_BF16=$bf MIXQ_PROBE_PREFETCH=$pre timeout 60 $B/wo_stream_probe_nodiag 4096x4096,4096x6144 4 0 0 1,4 2>&1 | grep -E "^[0-9]|full"
    done
  done
  echo "== probe with diag rows (prefetch 2), f16"
  timeout 90 $B/cuda_wo_stream_probe 4096x4096,28672x8192 4 0 1 1,4 2>&1 | grep -vE "^$"
} > "$OUT/bf16_lead.txt" 2>&1
echo "bf16 lead done"
python3 scripts/variants_table.py "$OUT/prefetch_f16.json" | cut -c1-120
python3 scripts/variants_table.py "$OUT/prefetch_bf16.json" | cut -c1-120
grep -E "^== |full" "$OUT/bf16_lead.txt" | head -40
