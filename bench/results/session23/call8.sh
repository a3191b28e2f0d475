#!/usr/bin/env bash
# Session 23, call 8 (H100; call 6's prebuilt binaries, the final code).
# 1. The M = 128 / 256 rows that miss cuBLAS FP16 (4096x4096, 4096x6144, 8192x8192, 8192x10240):
#    the wgmma kernel's token tile forced to 64 / 128 / 256 against the planner's, same process,
#    with cuBLAS in the same run.
# 2. ncu warp-state and instruction statistics of dequant16_kernel (4096x4096, M = 4096).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 200 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,8192x8192,8192x10240 --m 128,256,512 --schemes w4g128 \
  --act f16,bf16 --rounds 2 --variants 'MIXQ_WGMMA_V1=0;MIXQ_WGMMA_MT=64;MIXQ_WGMMA_MT=128;MIXQ_WGMMA_MT=256' \
  --json "$OUT/mt.json" > "$OUT/mt.txt" 2>&1
echo "mt sweep rc=$?"
timeout 90 ncu --kernel-name regex:dequant16 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B/cuda_wo_sweep --shapes 4096x4096 --m 4096 --schemes w4g128 --act f16 --no-baseline > "$OUT/ncu_dequant16.txt" 2>&1
echo "ncu rc=$?"
python3 scripts/variants_table.py "$OUT/mt.json" | cut -c1-150
grep -E "^4096x|^8192x" "$OUT/mt.txt" | awk '{print $1, $3, $4, $6}' | sort -u | head -30
grep -E "Stall|Warp Cycles|Issue Slot|Executed Ipc|Issued Ipc|L2 Cache Throughput|DRAM Throughput|Duration" "$OUT/ncu_dequant16.txt" | head -30
