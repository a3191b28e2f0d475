#!/usr/bin/env bash
# Session 17, call 7 (H100, prebuilt binaries: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli
# on main): (1) the committed tensor-core probe; (2) where dequantize + cuBLAS (weight-only M = 4096
# on the small layers) spends its time: ncu durations of the dequantize kernel and of the GEMM.
# (First run: the ncu filter let the read-ceiling kernels take all 40 profiled launches; rerun with
# the kernel filter below, in the same call as the steps above.)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash scripts/prebuild_gpu.sh unpack || exit 1
build-exp/probe/wgmma_fp8_probe | tee "$OUT/probe.txt"
S=build-gpu/cuda_wo_sweep
for shape in 4096x4096 4096x6144; do
  MIXQ_FORCE_KERNEL=wo_dequant_cublas timeout 60 $S --shapes $shape --m 4096 --schemes w4g128 --act f16 > /tmp/sweep.txt 2>&1
  echo "== $shape sweep rc=$?"; tail -3 /tmp/sweep.txt
  MIXQ_FORCE_KERNEL=wo_dequant_cublas timeout 90 ncu -k regex:"dequant|gemm|nvjet|cutlass|xmma|epilogue|Kernel" --launch-skip 0 --launch-count 12 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $S --shapes $shape --m 4096 --schemes w4g128 --act f16 --no-baseline > "$OUT/ncu_$shape.txt" 2>&1
  echo "ncu rc=$?"
  python3 - "$OUT/ncu_$shape.txt" <<'PY'
import re, sys, collections
name=None; rows=collections.defaultdict(list)
cur={}
for line in open(sys.argv[1]):
    m = re.match(r"\s{2}(\S+.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m: name = m.group(1)[:70]; continue
    m = re.match(r"\s+(gpu__time_duration.sum|dram__bytes_read.sum|dram__bytes_write.sum)\s+(\S+)\s+([\d.,]+)", line)
    if m and name: rows[name].append((m.group(1), m.group(2), m.group(3)))
for n, v in rows.items():
    print(n, len(v)//3, "launches;", " ".join(f"{a.split('__')[1].split('.')[0]}={c}{b}" for a,b,c in v[-3:]))
PY
done
