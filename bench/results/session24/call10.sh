#!/usr/bin/env bash
# Session 24, call 10 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli). The
# review mend: one eligibility rule for TMA-stored 16-bit rows (tma_stores_16bit_rows), the ws
# kernel's tile header split out, its staging rounds wholly past M skipped, ScopedEnv in the tests.
# Weight-only + FP8 weight-only tests, the epilogue tests, memcheck on them, and a timing check:
# mixq bench f16 W4 on two layers at M = 256 / 1024 / 4096 (paired cuBLAS), against call 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 220 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*:CudaFp8Block.TmaStore*:CudaInt8Block.HopperTmaStore*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
timeout 100 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaTmaStore*:CudaFp8Block.TmaStore*:CudaInt8Block.HopperTmaStore*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" /tmp/memcheck.log | tail -1; tail -4 /tmp/memcheck.log > "$OUT/memcheck.txt"
timeout 100 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,8192x57344 --m 256,1024,4096 --schemes w4g128 \
  --no-progress --json "$OUT/bench_check.json" > /tmp/bench.txt 2>&1
echo "bench rc=$?"
python3 - "$OUT/bench_check.json" <<'PY' | tee "$OUT/bench_check.txt"
import json, sys
for x in json.load(open(sys.argv[1]))["results"]:
    if x["scheme"] == "dense": continue
    b = x.get("paired_baseline_us", 0)
    print(f'{x["K"]}x{x["N"]:<6} M={x["M"]:<5} mixq {x["time_us"]:8.1f}  cuBLAS {b:8.1f}  x {b / x["time_us"]:.3f}  {x["kernel"]}')
PY
