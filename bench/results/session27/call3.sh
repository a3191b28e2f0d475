#!/usr/bin/env bash
# Session 27, call 3 (H100; the binaries of call 1). INT8 g128 at M = 65-128: the skinny 128-token
# tile (the default there since session 26) against the Hopper 128 x 128 kernel forced, nine layers,
# same call; and g64 there (128 x 128, call 2's default) for reference.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 100 $B/mixq bench --backend cuda --act bf16 --schemes w8g128:int8 --shapes $NINE \
  --m 65,96,128 --no-progress --json "$OUT/skinny.json" > /tmp/a.txt 2>&1
echo "skinny rc=$?"
MIXQ_FORCE_KERNEL=sm90_i8_128x128 timeout 100 $B/mixq bench --backend cuda --act bf16 \
  --schemes w8g128:int8 --shapes $NINE --m 65,96,128 --no-progress --json "$OUT/tiles.json" > /tmp/b.txt 2>&1
echo "128x128 rc=$?"
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, os, sys
o = sys.argv[1]
ld = lambda f: {(r["K"], r["N"], r["M"]): r for r in json.load(open(os.path.join(o, f)))["results"]}
s, t = ld("skinny.json"), ld("tiles.json")
print("| K×N | M | skinny mt128 µs | 128x128 µs | skinny / 128x128 time |")
print("|---|---:|---:|---:|---:|")
for k in sorted(s):
    a, b = s[k]["time_us"], t.get(k, {}).get("time_us", 0)
    print(f"| {k[0]}x{k[1]} | {k[2]} | {a:.1f} ({s[k]['kernel']}) | {b:.1f} | {a / b if b else 0:.2f} |")
PY
