#!/usr/bin/env bash
# Session 24, call 4 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). Kernels and planner as call 3 (the wgmma kernel's TMA-store epilogue; the wgmma
# kernel at every M for 16-bit outputs); `mixq bench` gives mixq a 16-bit output like cuBLAS.
# Weight-only + FP8 weight-only GPU tests, the whole weight-only table (both runs and tinygemm in
# one call), then session 23's stability check: M = 1024 / 4096 on four layers, three passes.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*:CudaFp8WeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
for act in f16 bf16; do
  timeout 280 $B/mixq bench --backend cuda --act $act --shapes $NINE --m 1,2,4,8,16,32,64,128,256,1024,4096 \
    --schemes w4g128,w8g128 --no-progress --json "$OUT/bench_cuda_$act.json" > /tmp/bench_cuda_$act.txt 2>&1
  echo "mixq bench --act $act rc=$?"
done
OUT=$OUT TAG=tinygemm CEIL=0 OPS=torch_tinygemm_w4g128_bf16 MS=1,2,4,8,16,32,64,128,256 timeout 90 python3 peers/peers.py > /tmp/peers.txt 2>&1
echo "peers rc=$?"
for r in 1 2 3; do
  timeout 150 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,4096x6144,8192x8192,8192x57344 --m 1024,4096 \
    --schemes w4g128 --no-progress --json "/tmp/large_m_$r.json" > /tmp/large_m_$r.txt 2>&1
  echo "stability pass $r rc=$?"
done
python3 - <<'PY' | tee "$OUT/stability.txt"
import json, collections
rows = collections.defaultdict(list)
for r in (1, 2, 3):
    d = json.load(open(f"/tmp/large_m_{r}.json"))
    dense = {(x["K"], x["N"], x["M"]): x["time_us"] for x in d["results"] if x["scheme"] == "dense"}
    for x in d["results"]:
        if x["scheme"] != "dense":
            k = (x["K"], x["N"], x["M"])
            rows[k].append((x["time_us"], x.get("paired_baseline_us", 0), dense[k]))
print("shape        M     per pass: mixq / paired cuBLAS / paired ratio / unpaired ratio")
for k, v in rows.items():
    print(f"{k[0]}x{k[1]:<7} {k[2]:<5} " + "   ".join(f"{a:7.1f} {b:7.1f} {b/a:.3f} {c/a:.3f}" for a, b, c in v))
PY
ls "$OUT"
