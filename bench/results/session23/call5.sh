#!/usr/bin/env bash
# Session 23, call 5 (H100; prebuilt as call 4). dequant16_kernel with whole-sector stores (each
# store instruction writes 64 contiguous bytes of a row per quad; call 4's wrote 16-byte halves of
# sectors); the dequantize chunk size as a knob (MIXQ_DEQUANT_CHUNK_MB): does an L2-sized chunk
# (the 16-bit rows re-read by cuBLAS from L2) beat one chunk for the whole weight?
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/tests.log"
for shp in 4096x4096 4096x14336; do
  timeout 90 ncu --kernel-name regex:dequant16 --launch-count 1 --section SpeedOfLight --section Occupancy \
    $B/cuda_wo_sweep --shapes $shp --m 4096 --schemes w4g128 --act f16 --no-baseline > /tmp/ncu_$shp.txt 2>&1
  echo "ncu $shp rc=$?"; grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy" /tmp/ncu_$shp.txt | tee -a "$OUT/ncu_dequant16.txt"
done
timeout 240 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,14336x4096,8192x8192,8192x10240,4096x28672 --m 4096 \
  --schemes w4g128 --act f16 --no-baseline --rounds 2 \
  --variants 'MIXQ_FORCE_KERNEL=cublas,MIXQ_DEQUANT_CHUNK_MB=256;MIXQ_FORCE_KERNEL=cublas,MIXQ_DEQUANT_CHUNK_MB=24;MIXQ_FORCE_KERNEL=cublas,MIXQ_DEQUANT_CHUNK_MB=8' \
  --json "$OUT/chunks.json" > /tmp/chunks.txt 2>&1
echo "chunk sweep rc=$?"
python3 scripts/variants_table.py "$OUT/chunks.json" | cut -c1-110
