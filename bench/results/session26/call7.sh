#!/usr/bin/env bash
# Session 26, call 7 (H100; call 6's binaries). The INT8 quantizer's task bands at M < 8: INT8 W8A8
# rows at M = 1, 2, 4 read slower than M = 8 on the small layers after the grid fix (call 5:
# 4096x6144 18.7 us at M = 1 against 16.6 at M = 8). A/B of MIXQ_ACT_QUANT_BAND=0
# (row-major tasks) against the default 8-row bands, two rounds each, in one call (the knob is read
# once per process: each setting is its own mixq bench process).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
S=4096x4096,4096x6144,8192x8192,14336x21504
for r in 1 2; do
  for band in default 0; do
    if [ $band = default ]; then unset MIXQ_ACT_QUANT_BAND; else export MIXQ_ACT_QUANT_BAND=$band; fi
    timeout 100 $B/mixq bench --backend cuda --act bf16 --shapes $S --m 1,2,4,8 --schemes w8g128:int8 \
      --no-progress --json "$OUT/band_${band}_r$r.json" > /tmp/b.txt 2>&1; echo "band $band round $r rc=$?"
  done
done
unset MIXQ_ACT_QUANT_BAND
python3 - "$OUT" <<'PY' | tee "$OUT/band_ab.md"
import json, sys
out = sys.argv[1]
def load(n):
    return {(r["K"], r["N"], r["M"]): r["time_us"] for r in json.load(open(f"{out}/{n}.json"))["results"] if not r.get("unsupported") and r["scheme"] != "dense"}
d = [load(f"band_default_r{r}") for r in (1, 2)]; z = [load(f"band_0_r{r}") for r in (1, 2)]
print("| K×N | M | 8-row bands µs (r1 / r2) | row-major µs (r1 / r2) |")
print("|---|---:|---:|---:|")
for k in sorted(d[0], key=lambda k: (k[0] * k[1], k[2])):
    print("| %dx%d | %d | %.1f / %.1f | %.1f / %.1f |" % (k[0], k[1], k[2], d[0][k], d[1][k], z[0][k], z[1][k]))
PY
