#!/usr/bin/env bash
# Session 23, call 1 (H100, prebuilt binaries of 2e62bee + the sweep's DATA:DECLARED/OUT act forms).
# Why is the library's bf16 decode ~12% behind f16 on the small layers, when the kernels' SASS
# prologues and register counts are identical? Same process, same prepared weights: f16 and bf16,
# each kernel fed the other type's bit patterns (data vs kernel), and f32 outputs (output type),
# PDL on / off, 4096x4096 and 4096x6144 W4, M = 1 and 4.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
timeout 200 $B/cuda_wo_sweep --shapes 4096x4096,4096x6144 --m 1,4 --schemes w4g128 \
  --act 'f16,bf16,bf16:f16,f16:bf16,f16/f32,bf16/f32' --no-baseline \
  --variants 'MIXQ_STREAM_PDL=1;MIXQ_STREAM_PDL=0' --rounds 2 --json "$OUT/acts.json" > "$OUT/acts.txt" 2>&1
echo "sweep rc=$?"
python3 - "$OUT/acts.json" <<'PY'
import json, sys, collections
d = json.load(open(sys.argv[1]))
t = collections.defaultdict(list)
for r in d["rows"]:
    t[(r["K"], r["N"], r["M"], r["act"], r["variant"])].append(r["mixq_us"])
for k, v in sorted(t.items()):
    print(*k, " ".join(f"{x:.2f}" for x in v))
PY
