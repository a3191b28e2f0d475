#!/usr/bin/env bash
# Session 19, call 3 (H100). Carried: build-exp/probe/dram_pattern_probe
# (nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ibench bench/dram_pattern_probe.cu)
# and call 2's prebuilt binaries.
# 1. Does the packed layout's read order (a stage = 8 strided 1 KB pieces) cost DRAM throughput
#    against contiguous 8 KB stages and a linear read? (same bytes, same in-flight depth)
# 2. The PM-sampling timeline of the wgmma kernel (28672x8192 W4 M = 16): DRAM throughput over time.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 120 build-exp/probe/dram_pattern_probe | tee "$OUT/dram_pattern.txt"
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 120 ncu --cache-control all --clock-control none --section PmSampling --kernel-name regex:wo_wgmma_ws_kernel \
  --launch-skip 30 --launch-count 1 -o "$OUT/pm" build-gpu/cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 \
  --act f16 --no-baseline > /tmp/pm.log 2>&1
echo "ncu rc=$?"
ncu --import "$OUT/pm.ncu-rep" --page raw --print-metric-instances values --csv > "$OUT/pm_raw.csv" 2>&1
ls -la "$OUT"; head -c 600 "$OUT/pm_raw.csv"
