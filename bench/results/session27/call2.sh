#!/usr/bin/env bash
# Session 27, call 2 (H100; the binaries of call 1). INT8 W8A8 with K blocks of 64 on the nine
# layers: mixq bench w8g64:int8 and w8g128:int8 (bf16 activations, 16-bit output, activation
# quantization inside the call) at M = 65, 128, 1024, 4096; g = 64 forced onto the sm_80 kernels
# that ran it before (128 x 128 at M >= 1024, 64 x 64 at M <= 128); peers.py cuBLAS INT8
# (torch._int_mm, no scales) and cuBLAS FP16 in the same call at M = 1024 / 4096.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-gpu
bash scripts/prebuild_gpu.sh unpack || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
timeout 200 $B/mixq bench --backend cuda --act bf16 --schemes w8g64:int8,w8g128:int8 --shapes $NINE \
  --m 65,128,1024,4096 --no-progress --json "$OUT/int8.json" > /tmp/int8.txt 2>&1
echo "bench rc=$?"
MIXQ_FORCE_KERNEL=sm80_i8_128x128 timeout 120 $B/mixq bench --backend cuda --act bf16 \
  --schemes w8g64:int8 --shapes $NINE --m 1024,4096 --no-progress --json "$OUT/int8_sm80_large.json" > /tmp/l.txt 2>&1
echo "sm80 large rc=$?"
MIXQ_FORCE_KERNEL=sm80_i8_64x64 timeout 60 $B/mixq bench --backend cuda --act bf16 \
  --schemes w8g64:int8 --shapes $NINE --m 65,128 --no-progress --json "$OUT/int8_sm80_medium.json" > /tmp/m.txt 2>&1
echo "sm80 medium rc=$?"
mkdir -p /tmp/pi; OUT=/tmp/pi TAG=int8 CEIL=0 OPS=cublas_int8,cublas_fp16 MS=1024,4096 SHAPES=$NINE timeout 150 python3 peers/peers.py > /tmp/peers_i8.txt 2>&1
echo "peers rc=$?"; cp /tmp/pi/*.json "$OUT/" 2>/dev/null
python3 scripts/int8_g64_table.py "$OUT" | tee "$OUT/table.md"
