#!/usr/bin/env bash
# Session 23, call 7 (H100; call 6's prebuilt binaries, the final code).
# 1. How much do the M >= 1024 ratios move within one call? mixq bench at M = 1024 / 4096 on four
#    layers, W4 f16, three times back to back.
# 2. 4096x4096 / 4096x6144 at M = 1: fewer, longer splits (MIXQ_STREAM_MIN_CHUNKS 8 / 16,
#    MIXQ_STREAM_BLOCKS_PER_SM 2 / 3) against the planner's, same process.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
for r in 1 2 3; do
  timeout 150 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096,4096x6144,8192x8192,8192x57344 --m 1024,4096 \
    --schemes w4g128 --no-progress --json "$OUT/large_m_$r.json" > /tmp/large_m_$r.txt 2>&1
  echo "bench pass $r rc=$?"
done
timeout 120 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144 --m 1,4 --schemes w4g128 --act f16,bf16 --no-baseline --rounds 2 \
  --variants 'MIXQ_STREAM_MIN_CHUNKS=4;MIXQ_STREAM_MIN_CHUNKS=8;MIXQ_STREAM_MIN_CHUNKS=16;MIXQ_STREAM_BLOCKS_PER_SM=3;MIXQ_STREAM_BLOCKS_PER_SM=2' \
  --json "$OUT/splits.json" > /tmp/splits.txt 2>&1
echo "splits sweep rc=$?"
python3 - "$OUT" <<'PY'
import json, sys, collections
out = sys.argv[1]
rows = collections.defaultdict(list)
for r in (1, 2, 3):
    d = json.load(open(f"{out}/large_m_{r}.json"))
    dense = {(x["K"], x["N"], x["M"]): x["time_us"] for x in d["results"] if x["scheme"] == "dense"}
    for x in d["results"]:
        if x["scheme"] != "dense":
            k = (x["K"], x["N"], x["M"])
            rows[k].append((x["time_us"], dense[k]))
print("shape        M     pass: mixq / cuBLAS / ratio")
for k, v in rows.items():
    print(f"{k[0]}x{k[1]:<7} {k[2]:<5} " + "   ".join(f"{a:7.1f} {b:7.1f} {b/a:.3f}" for a, b in v))
PY
python3 scripts/variants_table.py "$OUT/splits.json" | cut -c1-140
