#!/usr/bin/env bash
# Session 21, call 11 (H100, call 10's binaries). Call 10's table has 4096x4096 W4 f16 M = 1 at 9.15 us
# (call 4: 8.22) on the streaming kernel, which no change of the session touched (its bf16 row: 8.5).
# The same mixq bench command on that layer, three times in a row.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
for i in 1 2 3; do
  timeout 60 $B/mixq bench --backend cuda --act f16 --shapes 4096x4096 --m 1,2,4 --schemes w4g128 --no-progress \
    --json "$OUT/bench_4096_f16_$i.json" > /tmp/b$i.txt 2>&1
  echo "run $i rc=$?"; grep -E "^ *4096" /tmp/b$i.txt | head -6
done
