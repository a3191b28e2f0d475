#!/usr/bin/env bash
# Session 23, call 4 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli cuda_wo_stream_probe). The dequantize kernel of the cuBLAS path rewritten for 16-bit
# outputs (dequant16_kernel: no shared memory, quad-shuffle transpose, lane-order pairs, next tile's
# words in flight); call 3's ncu: the old one ran at 93% of L1 and 22% of DRAM, 27.4 us on 4096x4096.
# 1. weight-only + FP8 weight-only GPU tests; memcheck on the both-kernels test.
# 2. ncu of the new kernel (4096x4096 and 14336x4096, M = 4096).
# 3. M = 1024 / 4096 on the nine layers, W4 and W8 f16, with cuBLAS: default and forced dequant+cuBLAS.
# 4. f16 against bf16 on the small layers (call 3's sweep had a bad --variants argument).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 240 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/tests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/tests.log"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/mixq_gpu_tests \
  --gtest_filter='CudaWeightOnly.EveryMOnBothKernels:CudaFp8WeightOnly.F32ActivationsAndOddShapes' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -2 /tmp/memcheck.log | tee "$OUT/sanitizer_tail.txt"
for shp in 4096x4096 4096x14336; do
  timeout 90 ncu --kernel-name regex:dequant16 --launch-count 1 --section SpeedOfLight --section Occupancy \
    $B/cuda_wo_sweep --shapes $shp --m 4096 --schemes w4g128 --act f16 --no-baseline > /tmp/ncu_$shp.txt 2>&1
  echo "ncu $shp rc=$?"; grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy" /tmp/ncu_$shp.txt | tee -a "$OUT/ncu_dequant16.txt"
done
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 300 $B/cuda_wo_sweep --shapes $NINE --m 1024,4096 --schemes w4g128,w8g128 --act f16 \
  --variants ';MIXQ_FORCE_KERNEL=cublas' --json "$OUT/large_m.json" > "$OUT/large_m.txt" 2>&1
echo "large-M sweep rc=$?"
timeout 150 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144,14336x4096,8192x8192 --m 1,2,4,8 --schemes w4g128,w8g128 \
  --act f16,bf16 --no-baseline --rounds 2 --json "$OUT/f16_bf16.json" > /tmp/f16_bf16.txt 2>&1
echo "f16/bf16 sweep rc=$?"
python3 - "$OUT/large_m.json" "$OUT/f16_bf16.json" <<'PY'
import json, sys, collections, statistics
d = json.load(open(sys.argv[1]))
print("shape        scheme  M     variant                   mixq    cublas  x_cublas  kernel")
for r in d["rows"]:
    print(f"{r['K']}x{r['N']:<7} {r['scheme']} {r['M']:<5} {r['variant'] or 'default':<25} {r['mixq_us']:7.1f} {r['cublas_us']:7.1f} {r['cublas_us']/r['mixq_us']:6.3f}  {r['kernel']}")
d = json.load(open(sys.argv[2]))
t = collections.defaultdict(list)
for r in d["rows"]:
    t[(r["K"], r["N"], r["scheme"], r["M"], r["act"])].append(r["mixq_us"])
print("shape        scheme  M   f16    bf16   bf16/f16")
for k in sorted({k[:4] for k in t}):
    a, b = statistics.median(t[k + ("f16",)]), statistics.median(t[k + ("bf16",)])
    print(f"{k[0]}x{k[1]:<7} {k[2]} {k[3]:<3} {a:6.2f} {b:6.2f} {b/a:6.3f}")
PY
