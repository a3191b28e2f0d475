#!/usr/bin/env bash
# Session 27, call 1 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests mixq_cli).
# The Hopper 128 x 128 INT8 kernel with K blocks of 64 (two promotions per 128-K stage; the block
# skeleton's consumer loop now walks scale blocks): the INT8, FP8 block (same skeleton) and
# quantizer GPU suites, the pre-quantized linear suite (CudaLinearQuantized), memcheck and racecheck on the small g = 64 cases, the SASS of the g = 64
# kernel (wgmma count, spills).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|ms total\)$" "$1" | head -30; }
timeout 330 $B/tests/mixq_gpu_tests --gtest_filter='CudaInt8*:CudaFp8Block.*:CudaActQuant.*:CudaLinearQuantized.*' > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; summary "$OUT/tests.log"
{
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperWgmmaG64OddBlocks:CudaLinearQuantized.*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -1 /tmp/memcheck.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaInt8Block.HopperWgmmaG64OddBlocks' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; tail -1 /tmp/racecheck.log
} 2>&1 | tee "$OUT/sanitizers.log"
# SASS of the g = 64 single-CTA kernels: wgmma per function, spills (the last template argument
# of Int8BlockPolicy is G).
cuobjdump --dump-sass $B/tests/mixq_gpu_tests 2>/dev/null | python3 -c "
import re, sys
fn = None; counts = {}
for line in sys.stdin:
    m = re.search(r'Function : (\S+)', line)
    if m: fn = m.group(1); counts[fn] = [0, 0, 0]; continue
    if fn and 'Int8BlockPolicy' in fn:
        counts[fn][0] += 'HGMMA' in line or 'IGMMA' in line
        counts[fn][1] += 'STL' in line
        counts[fn][2] += 'I2F' in line
for f, c in counts.items():
    if 'Int8BlockPolicy' in f: print(f'{f[-90:]}: wgmma {c[0]}, STL {c[1]}, I2F {c[2]}')
" | tee "$OUT/sass.txt"
