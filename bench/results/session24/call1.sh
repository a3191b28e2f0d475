#!/usr/bin/env bash
# Session 24, call 1 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). The warp-specialized wgmma kernel's TMA-store epilogue (MIXQ_WS_Y_TMA, default on at
# token tiles of 128 and 256): its test, a same-process A/B against the direct stores on the nine
# layers (wgmma forced, M = 128 ... 4096; a third variant: direct stores with the ring cut to the
# 4 stages the staging tiles leave at mt = 256; raster groups of 16 and 4 N blocks instead of 8,
# MIXQ_WS_GROUP_N, with the staging on), `mixq bench` with the wgmma kernel forced at
# M = 1024 / 4096 (paired cuBLAS), the weight-only GPU tests, memcheck on the new test.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 120 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaTmaStore*' > /tmp/newtest.log 2>&1
echo "new test rc=$?"; summary /tmp/newtest.log; grep -E "Failure|Expected|Which is|trace" /tmp/newtest.log | head -20
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
MIXQ_FORCE_KERNEL=wgmma timeout 200 $B/cuda_wo_sweep --shapes $NINE --m 128,256,1024,4096 --schemes w4g128 --act f16 \
  --no-baseline --variants "MIXQ_WS_Y_TMA=0;MIXQ_WS_Y_TMA=1;MIXQ_WS_Y_TMA=0,MIXQ_WS_STAGES=4;MIXQ_WS_Y_TMA=1,MIXQ_WS_GROUP_N=16;MIXQ_WS_Y_TMA=1,MIXQ_WS_GROUP_N=4" --rounds 2 \
  --json "$OUT/ab_y_tma.json" > /tmp/ab.txt 2>&1
echo "A/B rc=$?"; python3 scripts/variants_table.py "$OUT/ab_y_tma.json" > "$OUT/ab_y_tma.md" 2>&1
MIXQ_FORCE_KERNEL=wgmma timeout 150 $B/mixq bench --backend cuda --act f16 --shapes $NINE --m 1024,4096 \
  --schemes w4g128 --no-progress --json "$OUT/bench_ws_forced.json" > /tmp/bench_ws.txt 2>&1
echo "bench forced wgmma rc=$?"
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 100 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaTmaStore*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/memcheck.log | tail -3; cp /tmp/memcheck.log "$OUT/" 
python3 - "$OUT/bench_ws_forced.json" <<'PY' | tee "$OUT/bench_ws_forced.txt"
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["results"]:
    if x["scheme"] == "dense": continue
    b = x.get("paired_baseline_us", 0)
    print(f'{x["K"]}x{x["N"]:<6} M={x["M"]:<5} mixq {x["time_us"]:8.1f}  cuBLAS {b:8.1f}  x {b / x["time_us"]:.3f}  {x.get("kernel", "")}')
PY
cat "$OUT/ab_y_tma.md"
