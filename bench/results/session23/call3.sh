#!/usr/bin/env bash
# Session 23, call 3 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). Call 2 found the bf16 streaming object (and sm90_w8a8_gemm's)
# with an empty ninja dependency record: they had not rebuilt on header changes. Now rebuilt
# (the prefetch of call 2 reverted: slower on every row).
# 1. The whole GPU test suite.
# 2. f16 against bf16 on the small layers with the rebuilt bf16 object (the "bf16 decode" lead).
# 3. ncu of the dequantize kernel of the M >= 1024 cuBLAS path (4096x4096, M = 4096).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 420 $B/tests/mixq_gpu_tests > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; summary "$OUT/gpu_tests.log"
timeout 150 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,14336x4096,8192x8192 --m 1,2,4,8 --schemes w4g128,w8g128 \
  --act f16,bf16 --no-baseline --variants ';' --rounds 2 --json "$OUT/f16_bf16.json" > /tmp/f16_bf16.txt 2>&1
echo "sweep rc=$?"
timeout 120 ncu --kernel-name regex:dequant_kernel --launch-count 1 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
  $B/cuda_wo_sweep --shapes 4096x4096 --m 4096 --schemes w4g128 --act f16 --no-baseline > "$OUT/ncu_dequant.txt" 2>&1
echo "ncu rc=$?"
python3 - "$OUT/f16_bf16.json" <<'PY'
import json, sys, collections, statistics
d = json.load(open(sys.argv[1]))
t = collections.defaultdict(list)
for r in d["rows"]:
    t[(r["K"], r["N"], r["scheme"], r["M"], r["act"])].append(r["mixq_us"])
keys = sorted({k[:4] for k in t})
print("shape        scheme  M   f16    bf16   bf16/f16")
for k in keys:
    a, b = statistics.median(t[k + ("f16",)]), statistics.median(t[k + ("bf16",)])
    print(f"{k[0]}x{k[1]:<7} {k[2]} {k[3]:<3} {a:6.2f} {b:6.2f} {b/a:6.3f}")
PY
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Stall|L2 Hit" "$OUT/ncu_dequant.txt" | head -30
