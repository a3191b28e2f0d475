#!/usr/bin/env bash
# Session 24, call 8 (H100; prebuilt in the fp8-tma-epilogue worktree at 3424e78, main's code:
# bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli cuda_wo_sweep). The TMA-store epilogues
# only where N % 8 == 0. FP8 / INT8 / quantizer GPU tests and the three epilogue tests (a larger
# timeout: call 6's 200 s ended inside CudaFp8Block.EveryTileConfiguration), then memcheck and
# racecheck on the epilogue tests.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
EPI='CudaFp8Block.TmaStore*:CudaInt8Block.HopperTmaStore*:CudaWeightOnly.WgmmaTmaStore*'
timeout 60 $B/tests/mixq_gpu_tests --gtest_filter="$EPI" > "$OUT/epilogue_tests.log" 2>&1
echo "epilogue tests rc=$?"; summary "$OUT/epilogue_tests.log"; grep -E "Failure|Which is|trace:|kernel" "$OUT/epilogue_tests.log" | head -12
timeout 330 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block*:CudaInt8*:CudaActQuant*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"; grep -E "ms\)$" "$OUT/tests.log" | grep -E "[0-9]{5} ms" | head
timeout 90 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter="$EPI" > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/memcheck.log | tail -3
timeout 90 compute-sanitizer --tool racecheck $B/tests/mixq_gpu_tests --gtest_filter="CudaFp8Block.TmaStore*:CudaInt8Block.HopperTmaStore*" > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" /tmp/racecheck.log | tail -3
tail -5 /tmp/memcheck.log > "$OUT/sanitizers.txt"; tail -5 /tmp/racecheck.log >> "$OUT/sanitizers.txt"
