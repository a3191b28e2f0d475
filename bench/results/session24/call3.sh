#!/usr/bin/env bash
# Session 24, call 3 (H100; prebuilt: bash scripts/prebuild_gpu.sh mixq_gpu_tests cuda_wo_sweep
# mixq_cli). The MIXQ_WS_Y_ROWS=0 hang fixed; the planner keeps the wgmma kernel at every M for
# 16-bit outputs. Weight-only GPU tests, the y_rows A/B (direct, 128, 256 tokens a round; wgmma
# forced; W4 g128 f16, M = 256 / 1024 / 4096), M = 8192 / 16384 with the wgmma kernel and with
# dequantize + cuBLAS forced (paired cuBLAS), memcheck + racecheck on the epilogue test.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$1" | tail -8; }
timeout 200 $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.*' > "$OUT/wotests.log" 2>&1
echo "wotests rc=$?"; summary "$OUT/wotests.log"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
MIXQ_FORCE_KERNEL=wgmma timeout 130 $B/cuda_wo_sweep --shapes $NINE --m 256,1024,4096 --schemes w4g128 --act f16 \
  --no-baseline --variants "MIXQ_WS_Y_ROWS=0;MIXQ_WS_Y_ROWS=128;MIXQ_WS_Y_ROWS=256" --rounds 2 \
  --json "$OUT/ab_y_rows.json" > /tmp/ab.txt 2>&1
echo "A/B rc=$?"; python3 scripts/variants_table.py "$OUT/ab_y_rows.json" > "$OUT/ab_y_rows.md" 2>&1
for k in wgmma cublas; do
  MIXQ_FORCE_KERNEL=$k timeout 100 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,8192x8192,14336x4096 \
    --m 8192,16384 --schemes w4g128 --no-progress --json "/tmp/large_$k.json" > /tmp/large_$k.txt 2>&1
  echo "bench M = 8192 / 16384 forced $k rc=$?"
done
python3 - <<'PY' | tee "$OUT/large_m.txt"
import json
rows = {}
for k in ("wgmma", "cublas"):
    try: d = json.load(open(f"/tmp/large_{k}.json"))
    except Exception as e: print(k, "missing", e); continue
    for x in d["results"]:
        if x["scheme"] == "dense": continue
        rows.setdefault((x["K"], x["N"], x["M"]), {})[k] = (x["time_us"], x.get("paired_baseline_us", 0), x["rel_err"])
print("shape         M      wgmma  (x cuBLAS)   dequant+cuBLAS (x cuBLAS)   rel_err w / d")
for (K, N, M), v in rows.items():
    w = v.get("wgmma", (0, 0, 0)); c = v.get("cublas", (0, 0, 0))
    f = lambda t: f"{t[0]:8.1f} ({t[1] / t[0]:.3f})" if t[0] else "       -        "
    print(f"{K}x{N:<6} {M:<5} {f(w)}   {f(c)}   {w[2]:.1e} / {c[2]:.1e}")
PY
timeout 100 compute-sanitizer --tool memcheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaTmaStore*' > /tmp/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" /tmp/memcheck.log | tail -1
timeout 110 compute-sanitizer --tool racecheck $B/tests/mixq_gpu_tests --gtest_filter='CudaWeightOnly.WgmmaTmaStore*' > /tmp/racecheck.log 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" /tmp/racecheck.log | tail -1
tail -4 /tmp/memcheck.log > "$OUT/sanitizers.txt"; tail -4 /tmp/racecheck.log >> "$OUT/sanitizers.txt"
cut -c1-100 "$OUT/ab_y_rows.md"
