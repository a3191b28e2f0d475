#!/usr/bin/env bash
# Session 24, call 7 (H100; binaries of call 6): the block GEMM epilogue tests alone, whole log
# (call 6's memcheck run reported both failing, its log cut).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 120 $B/tests/mixq_gpu_tests --gtest_filter='CudaFp8Block.TmaStore*:CudaInt8Block.HopperTmaStore*' > "$OUT/epilogue_tests.log" 2>&1
echo "rc=$?"; grep -vE "^\[ +OK|^\[ RUN" "$OUT/epilogue_tests.log" | head -60
