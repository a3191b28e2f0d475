#!/usr/bin/env bash
# Session 19, call 5 (H100, prebuilt binaries of call 4). Between two back-to-back calls the DRAM idles
# for ~3 PM samples (4.5 us; call 4's graph timeline): the next grid's early weight loads (its
# ring) are done and it waits for the fixup kernel. Does a deeper ring (more early bytes) help?
# MIXQ_WS_STAGES is read once per process: one process per depth, interleaved twice.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
SH=14336x21504,8192x57344,28672x8192,4096x28672
for rep in 1 2; do
  for st in 4 6 8; do
    MIXQ_WS_STAGES=$st timeout 100 $B/cuda_wo_sweep --shapes "$SH" --m 4,16 --schemes w4g128,w8g128 --act f16 --no-baseline \
      --json "$OUT/stages${st}_r$rep.json" > /tmp/stages${st}_r$rep.txt 2>&1
    echo "stages $st rep $rep rc=$?"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/stages.table"
import json, sys, statistics, os
out = sys.argv[1]; t = {}
for st in (4, 6, 8):
    for rep in (1, 2):
        for r in json.load(open(f"{out}/stages{st}_r{rep}.json"))["rows"]:
            t.setdefault((r["K"], r["N"], r["scheme"], r["M"]), {}).setdefault(st, []).append(r["mixq_us"])
print("K x N          scheme  M     S=4     S=6     S=8   6/4   8/4")
for k, v in t.items():
    m = {s: statistics.median(v[s]) for s in v}
    print(f"{k[0]}x{k[1]:<8} {k[2]:7} {k[3]:<3} {m[4]:7.1f} {m[6]:7.1f} {m[8]:7.1f} {m[6]/m[4]:.3f} {m[8]/m[4]:.3f}")
PY
MIXQ_WS_STAGES=8 MIXQ_SWEEP_PROFILE_RANGE=1 timeout 120 ncu --profile-from-start off --graph-profiling graph --launch-skip 7 --launch-count 1 \
  --cache-control none --clock-control none --section PmSampling -o /tmp/pm_s8 \
  $B/cuda_wo_sweep --shapes 28672x8192 --m 16 --schemes w4g128 --act f16 --no-baseline > /tmp/pm_s8.log 2>&1
echo "ncu rc=$?"
ncu --import /tmp/pm_s8.ncu-rep --page raw --print-metric-instances values --csv > "$OUT/pm_graph_stages8.csv" 2>&1
ls "$OUT"
