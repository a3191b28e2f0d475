#!/usr/bin/env bash
# Session 25, call 1 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). bf16 activations x int8 codes without the f32 round trip: the streaming kernel's MMA
# on u - 128 (bf16x2_u8_minus_128), the wgmma kernel's bf16 integer-zero path for int8 (where
# (128 - zc) s is exact in bf16: symmetric codes). Weight-only GPU tests, memcheck on the new test,
# the same-process A/B of the wgmma path (MIXQ_WS_BF16_NATIVE=1 new, 0 the f32 path), and the W8
# rows of the weight-only table for f16 and bf16 (mixq bench, paired cuBLAS).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 300 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
timeout 240 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.Bf16Int8CodesWithoutF32' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -3 /tmp/memcheck.log | tee "$OUT/sanitizers.txt"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 200 $B/cuda_wo_sweep --shapes $NINE --m 16,64,256,1024,4096 --schemes w8g128 --act bf16 \
  --no-baseline --variants "MIXQ_WS_BF16_NATIVE=1;MIXQ_WS_BF16_NATIVE=0" --rounds 2 \
  --json "$OUT/ab_bf16_int8.json" > /tmp/ab.txt 2>&1
echo "A/B rc=$?"; python3 scripts/variants_table.py "$OUT/ab_bf16_int8.json" > "$OUT/ab_bf16_int8.md" 2>&1
for act in f16 bf16; do
  timeout 200 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w8g128 --no-progress --json "$OUT/bench_w8_$act.json" > /tmp/bench_w8_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
OUT=$OUT python3 - <<'PY' | tee "$OUT/w8_bf16_vs_f16.txt"
import json, os
D = {}
for a in ("f16", "bf16"):
    for x in json.load(open(os.environ.get("OUT", "/tmp/out") + f"/bench_w8_{a}.json"))["results"]:
        if x["scheme"] == "w8g128": D[(a, x["K"], x["N"], x["M"])] = x
ok = tot = 0
print("K x N          M      f16 us   bf16 us  bf16/f16  bf16 kernel")
for (a, k, n, m), x in sorted(D.items(), key=lambda t: t[0][1:]):
    if a != "f16" or ("bf16", k, n, m) not in D: continue
    y = D[("bf16", k, n, m)]; r = y["time_us"] / x["time_us"]; tot += 1; ok += r <= 1.05
    print(f"{k}x{n:<8} {m:<5} {x['time_us']:8.1f} {y['time_us']:8.1f}  {r:6.3f}{'  MISS' if r > 1.05 else ''}  {y['kernel']}")
print(f"W8 bf16 within 5% of f16: {ok} of {tot}")
PY
ls "$OUT"
