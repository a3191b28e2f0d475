#!/usr/bin/env bash
# Session 19, call 1 (H100, prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep mixq_cli).
# Where the fixed cost of the W4 decode path goes (#4, M = 4 / 16 on the large layers):
# 1. the time against the weight size at M = 1 (streaming kernel) and M = 4 / 16 (wgmma kernel),
#    W4 g128 f16, K x N with 117 ... 235 MB of codes: slope = marginal rate, intercept = fixed cost;
# 2. ncu durations of every kernel of a call (main kernel vs stream-K fixup), cold L2;
# 3. ncu full set with SASS source counters (stall reasons) of the wgmma kernel, 28672x8192 M = 16.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
SH=8192x14336,8192x28672,8192x57344,16384x28672,28672x8192,57344x8192,14336x21504
timeout 150 $B/cuda_wo_sweep --shapes "$SH" --m 1,4,16 --schemes w4g128 --act f16 --no-baseline \
  --json "$OUT/size_sweep.json" > /tmp/size_sweep.txt 2>&1
echo "sweep rc=$?"; python3 scripts/variants_table.py "$OUT/size_sweep.json" > "$OUT/size_sweep.table"
NC="ncu --cache-control all --clock-control none"
: > "$OUT/durations.csv"
for cfg in "28672x8192 1" "28672x8192 4" "28672x8192 16" "14336x21504 16" "8192x57344 4"; do
  set -- $cfg
  echo "# $1 M=$2" >> "$OUT/durations.csv"
  timeout 120 $NC --kernel-name regex:'wo_wgmma_ws_kernel|stream_k_fixup|wo_stream|reduce' --launch-skip 40 --launch-count 8 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv \
    $B/cuda_wo_sweep --shapes $1 --m $2 --schemes w4g128 --act f16 --no-baseline 2>/dev/null \
    | grep -v '^==' | cut -d, -f5,11- >> "$OUT/durations.csv"
done
echo "durations done"
timeout 240 $NC --kernel-name regex:wo_wgmma_ws_kernel --launch-skip 30 --launch-count 1 --set full --import-source yes \
  -o "$OUT/ws_28672x8192_m16" $B/cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 --act f16 --no-baseline > /tmp/ncu_full.log 2>&1
echo "ncu full rc=$?"; tail -3 /tmp/ncu_full.log
ncu --import "$OUT/ws_28672x8192_m16.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1
ncu --import "$OUT/ws_28672x8192_m16.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_source_sass.csv" 2>&1
ls -la "$OUT"
cat "$OUT/durations.csv" | head -60
cut -c1-90 "$OUT/size_sweep.table"
grep -E "Duration|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued|Issued Ipc|No Eligible|Achieved Occupancy" "$OUT/ws_details.txt" | head -20
