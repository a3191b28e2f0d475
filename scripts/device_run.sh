#!/usr/bin/env bash
# The GPU-machine runner: builds every target with CUDA (or reuses a build already there), then the
# named steps, each writing its log / JSON under $OUT and a short summary on stdout.
#   bash scripts/device_run.sh [test] [sanitize] [bench_wo] [bench_w8a8] [peers] [moe] [w4a8] [conv]
# Env: MIXQ_CUDA_ARCHS (default "80;90a"), MIXQ_BUILD_DIR (default build-gpu), JOBS (default 16),
#   CTEST_REGEX (test: only the tests it matches).
#   bench_wo:   the nine layers of anchors.md x M = 1 ... 4096, W4/W8 g128, f16 and bf16, cuBLAS
#               timed in the same process (BENCH_WO_ACTS, BENCH_WO_MS, BENCH_WO_SCHEMES narrow it)
#   bench_w8a8: FP8 block and INT8 W8A8 (activation quantization in the timed call) at large M
#   moe:        the mixture-of-experts GPU tests (tests/gpu/test_moe*_cuda.cpp), a memcheck of
#               the grouped, routing and schedule kernels, and `mixq bench --op moe` (MOE_MS,
#               MOE_MODELS, MOE_SCHEMES narrow it) into moe_bench.json
#   conv:       the CUDA conv2d GPU tests (tests/gpu/test_cuda_conv*.cpp) and a compute-sanitizer
#               memcheck + racecheck of a subset of them (the Python bench_conv runs separately)
#   tp:         tensor parallel: shard and multi-GPU tests, a memcheck, `mixq bench --tp`
#   ggml:       GGUF weights at native width: GPU tests, memcheck, mixq vs llama.cpp CUDA
#               (LLAMA_SRC + LLAMA_BUILD: llama.cpp built by scripts/build_llamacpp.sh ... cuda)
#   w4a8:       W4A8 (4-bit weights x e4m3 activations): its GPU tests (plain and grouped), a
#               memcheck of a subset, the bench of bench/results/cuda_w4a8.md into cuda_w4a8.json
#               and the grouped W4A16 / W4A8 MoE bench on DeepSeek-V3 into moe_w4a8.json
#   peers:      shared/bench/peers.py (carried as peers/peers.py): cuBLASLt block FP8, _int_mm,
#               tinygemm, in the same call (PEERS_OPS, PEERS_MS, PEERS_SHAPES; PEERS_SETTLE_MS:
#               each case settled first, through bench/peers_settled.py)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUILD=${MIXQ_BUILD_DIR:-build-gpu}
LOGS=/tmp/mixq-logs; mkdir -p "$LOGS"
NINE=14336x21504,4096x6144,4096x4096,4096x28672,14336x4096,8192x10240,8192x8192,8192x57344,28672x8192
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"

t0=$(date +%s)
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXQ_CUDA=ON \
    "-DMIXQ_CUDA_ARCHS=${MIXQ_CUDA_ARCHS:-80;90a}" > "$LOGS/cmake.log" 2>&1 \
    || { cp "$LOGS/cmake.log" "$OUT/"; tail -30 "$LOGS/cmake.log"; exit 1; }
fi
# every target (the library, the CLI, the unit, GPU and oracle tools, the benchmarks), or those
# BUILD_TARGETS names
cmake --build "$BUILD" -j "${JOBS:-16}" ${BUILD_TARGETS:+--target $BUILD_TARGETS} > "$LOGS/build.log" 2>&1 \
  || { cp "$LOGS/build.log" "$OUT/"; grep -E "error|FAILED" "$LOGS/build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s ($(grep -c 'Building' "$LOGS/build.log") objects)"

for step in "$@"; do
  case "$step" in
    test)
      (cd "$BUILD" && ctest -j 8 --timeout 600 --output-on-failure -L "unit|gpu" ${CTEST_REGEX:+-R "$CTEST_REGEX"} > "$OUT/ctest.log" 2>&1)
      echo "ctest rc=$?"; grep -E "tests passed|tests failed|Failed|\*\*\*|Not Run" "$OUT/ctest.log" | head -30
      echo "skipped lines: $(grep -c "Skipped\|SKIPPED" "$OUT/ctest.log" || true)" ;;
    sanitize)
      # memcheck over every kernel family (cuBLAS included through the dequantize path), racecheck
      # on mixq's own kernels (cuBLAS's kernels report hazards of their own)
      mem='CudaWeightOnly.SchemesAndBlockSizes:CudaWeightOnly.Deterministic*:CudaWeightOnly.Concurrent*:CudaActQuant.Fp8MatchesHost:CudaActQuant.Int8MatchesHost:CudaFp8Block.OddShapesBiasClamp:CudaInt8Block.HopperWgmma:CudaFp8WeightOnly.F32ActivationsAndOddShapes:CudaLinearQuantized.*'
      race='CudaWeightOnly.SchemesAndBlockSizes:CudaWeightOnly.HopperWgmmaKernel:CudaFp8Block.OddShapesBiasClamp:CudaInt8Block.HopperWgmma'
      for tool in memcheck racecheck; do
        filter=$mem; [ $tool = racecheck ] && filter=$race
        timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
          --gtest_filter="$filter" > "$OUT/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize_$tool.log" | tail -4
      done ;;
    bench_wo)
      for act in ${BENCH_WO_ACTS:-f16 bf16}; do
        timeout 560 "$BUILD/mixq" bench --backend cuda --act "$act" --shapes "${BENCH_WO_SHAPES:-$NINE}" \
          --m "${BENCH_WO_MS:-1,2,4,8,16,32,64,128,256,1024,4096}" --schemes "${BENCH_WO_SCHEMES:-w4g128,w8g128}" \
          --no-progress --json "$OUT/bench_wo_$act.json" > "$OUT/bench_wo_$act.txt" 2>&1
        echo "mixq bench wo $act rc=$?"; grep -c " ok " "$OUT/bench_wo_$act.txt" | sed 's/^/rows ok: /'
      done ;;
    bench_w8a8)
      timeout 560 "$BUILD/mixq" bench --backend cuda --act bf16 --schemes fp8b128:fp8,w8g128:int8 \
        --shapes "${BENCH_W8A8_SHAPES:-16384x7168,1536x24576,14336x21504,8192x57344}" --m "${BENCH_W8A8_MS:-2048,4096}" \
        --no-progress --json "$OUT/bench_w8a8.json" > "$OUT/bench_w8a8.txt" 2>&1
      echo "mixq bench w8a8 rc=$?"; grep -E "^(fp8|w8)" "$OUT/bench_w8a8.txt" | awk '{print $1, $2, $3, $4, $10, $11}' ;;
    peers)
      if [ -f peers/peers.py ]; then
        # PEERS_SETTLE_MS: each case settled that long first (bench/peers_settled.py), as mixq bench does
        harness=peers/peers.py; [ -n "${PEERS_SETTLE_MS:-}" ] && harness=bench/peers_settled.py
        OUT="$OUT" TAG=${PEERS_TAG:-peers} CEIL=0 OPS="${PEERS_OPS:-cublas_fp8_block128,cublas_int8,cublas_fp16}" \
          MS="${PEERS_MS:-2048,4096}" SHAPES="${PEERS_SHAPES:-16384x7168,1536x24576,14336x21504,8192x57344}" \
          SETTLE_MS="${PEERS_SETTLE_MS:-0}" timeout 400 python3 "$harness" > "$OUT/peers.log" 2>&1
        echo "peers.py rc=$?"; tail -3 "$OUT/peers.log"
      else
        echo "peers: peers/peers.py not carried"
      fi ;;
    moe)
      timeout 400 "$BUILD/tests/mixq_gpu_tests" --gtest_filter='CudaMoe.*:CudaMoeFp8.*:*CudaMoeInt8*' > "$OUT/moe_tests.log" 2>&1
      echo "moe gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/moe_tests.log" | head -20
      timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
        --gtest_filter='CudaMoe.*:CudaMoeFp8.*:*CudaMoeInt8*' > "$OUT/moe_memcheck.log" 2>&1
      echo "moe memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/moe_memcheck.log" | tail -2
      timeout 500 "$BUILD/mixq" bench --op moe --backend cuda --m "${MOE_MS:-1,8,64,512,4096}" \
        ${MOE_MODELS:+--models "$MOE_MODELS"} ${MOE_SCHEMES:+--schemes "$MOE_SCHEMES"} \
        --json "$OUT/moe_bench.json" > "$OUT/moe_bench.log" 2>&1
      echo "moe bench rc=$?"; tail -5 "$OUT/moe_bench.log" ;;
    w4a8)
      timeout 300 "$BUILD/tests/mixq_gpu_tests" --gtest_filter='CudaW4A8.*:CudaMoe.W4A8*' > "$OUT/w4a8_tests.log" 2>&1
      echo "w4a8 gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$OUT/w4a8_tests.log" | head -20
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
        --gtest_filter='CudaW4A8.ActivationFactorsMatchHost:CudaW4A8.QuantizedActivationsAndGraphsSameBits:CudaMoe.W4A8*' \
        > "$OUT/w4a8_memcheck.log" 2>&1
      echo "w4a8 memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/w4a8_memcheck.log" | tail -2
      timeout 300 "$BUILD/mixq" bench --backend cuda --act bf16 --shapes 4096x7168,7168x2048,8192x8192 \
        --m 1,16,256,1024,4096 --schemes w4g128,w4g128:fp8,fp8b128:fp8 --json "$OUT/cuda_w4a8.json" > "$OUT/w4a8_bench.log" 2>&1
      echo "w4a8 bench rc=$?"; grep -E "^w4g128:fp8" "$OUT/w4a8_bench.log" | awk '{print $2, $3, $4 " us", $NF}'
      timeout 300 "$BUILD/mixq" bench --op moe --backend cuda --models deepseek-v3 --m "${MOE_MS:-64,512,4096}" \
        --routing uniform --schemes w4g128,w4g128:fp8 --json "$OUT/moe_w4a8.json" > "$OUT/moe_w4a8.log" 2>&1
      echo "w4a8 moe bench rc=$?"; tail -8 "$OUT/moe_w4a8.log" ;;
    conv)
      # the CUDA conv2d tests, then memcheck and racecheck of the conv kernels on a subset (both
      # layouts, both K orders, every dtype, odd shapes, two streams)
      timeout 500 "$BUILD/tests/mixq_gpu_tests" --gtest_filter='CudaConv.*' > "$OUT/conv_tests.log" 2>&1
      echo "conv gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|expected" "$OUT/conv_tests.log" | head -30
      for tool in memcheck racecheck; do
        timeout 500 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
          --gtest_filter='CudaConv.GeometrySweep:CudaConv.DtypesBiasAndClamp:CudaConv.TwoStreamsAtOnce' \
          > "$OUT/conv_sanitize_$tool.log" 2>&1
        echo "conv compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/conv_sanitize_$tool.log" | tail -4
      done ;;
    tp)
      # tensor parallel: the cut-group shard tests on one GPU, the multi-GPU layer tests over NCCL,
      # a memcheck of the shard kernels' subset, then `mixq bench --tp` (TP_MS, TP_MODELS,
      # TP_SCHEMES, TP_SIZES narrow it; TP_LAUNCH=threads: one process over every GPU)
      nvidia-smi topo -m > "$OUT/tp_topology.txt" 2>&1 || true
      # the machine's own NCCL first (torch, one process per GPU): all-reduces from 4 KB to 64 MB,
      # so that a hang below is known to be mixq's or the machine's
      timeout 120 python3 - > "$OUT/tp_nccl_check.log" 2>&1 <<'PY'
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, world):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    for n in (1 << 10, 1 << 15, 1 << 18, 1 << 21, 1 << 24):
        t = torch.full((n,), float(rank + 1), device="cuda")
        dist.all_reduce(t); torch.cuda.synchronize()
        if rank == 0: print(f"all_reduce {4 * n} bytes: {t[0].item()} (want {world * (world + 1) / 2})", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    w = torch.cuda.device_count(); mp.spawn(run, args=(w,), nprocs=w)
PY
      echo "torch nccl check rc=$?"; cat "$OUT/tp_nccl_check.log" | grep all_reduce
      timeout 240 "$BUILD/tests/mixq_gpu_tests" --gtest_filter='CudaWeightOnly.Shard*:CudaTensorParallel.*' \
        > "$OUT/tp_tests.log" 2>&1
      echo "tp gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|rank" "$OUT/tp_tests.log" | head -30
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
        --gtest_filter='CudaWeightOnly.ShardPhaseAndHolesSubset' > "$OUT/tp_memcheck.log" 2>&1
      echo "shard memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/tp_memcheck.log" | tail -2
      timeout 560 "$BUILD/mixq" bench --tp "${TP_SIZES:-1,2,4}" --models "${TP_MODELS:-llama3-70b,qwen2.5-72b}" \
        --m "${TP_MS:-1,16,256,4096}" --schemes "${TP_SCHEMES:-w4g128}" ${TP_LAUNCH:+--launch "$TP_LAUNCH"} --json "$OUT/tp_bench.json" \
        > "$OUT/tp_bench.txt" 2>&1
      echo "tp bench rc=$?"; cat "$OUT/tp_bench.txt" | tail -40 ;;
    ggml)
      # GGUF at native width: the GPU tests, a memcheck of a subset, then mixq against llama.cpp's
      # CUDA backend on the same file (LLAMA_SRC: a llama.cpp / ggml source tree laid out as
      # scripts/build_llamacpp.sh expects; without it, mixq bench FILE alone). GGML_TYPES,
      # GGML_SHAPES, GGML_MS narrow it; PYTHONPATH must reach the gguf package.
      timeout 300 "$BUILD/tests/mixq_gpu_tests" --gtest_filter='*CudaGgmlNative*' > "$OUT/ggml_tests.log" 2>&1
      echo "ggml gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|error" "$OUT/ggml_tests.log" | head -30
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/tests/mixq_gpu_tests" \
        --gtest_filter='Types/CudaGgmlNativeTypes.BothPathsMatchFloat64/Q4_K:Types/CudaGgmlNativeTypes.BothPathsMatchFloat64/Q3_K:Types/CudaGgmlNativeTypes.BothPathsMatchFloat64/IQ4_XS:Types/CudaGgmlNativeTypes.SplitsEndInPartialSteps/Q5_0:CudaGgmlNative.GraphReplaysOnNewInputs' \
        > "$OUT/ggml_memcheck.log" 2>&1
      echo "ggml memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/ggml_memcheck.log" | tail -2
      gguf=/tmp/mixq_bench.gguf
      timeout 200 python3 bench/make_bench_gguf.py -o "$gguf" --types "${GGML_TYPES:-q4_0,q4_k,q5_k,q6_k,q8_0,iq4_xs}" \
        --shapes "${GGML_SHAPES:-4096x4096,4096x14336,14336x4096,4096x6144,14336x21504}" > "$OUT/ggml_gguf.log" 2>&1
      echo "bench gguf rc=$?"
      if [ -n "${LLAMA_SRC:-}" ] && [ -f "$LLAMA_BUILD/bin/llamacpp_driver" ]; then
        timeout 500 python3 bench/llamacpp_compare.py --gguf "$gguf" --mixq "$BUILD/mixq" --backend cuda \
          --driver "$LLAMA_BUILD/bin/llamacpp_driver" --m "${GGML_MS:-1,4,16,64,512}" --label cuda \
          -o "$OUT/cuda_vs_llamacpp" > "$OUT/ggml_compare.log" 2>&1
        echo "llamacpp_compare rc=$?"; tail -25 "$OUT/ggml_compare.log"
      else
        timeout 400 "$BUILD/mixq" bench "$gguf" --backend cuda --m "${GGML_MS:-1,4,16,64,512}" --no-progress \
          --json "$OUT/ggml_bench.json" > "$OUT/ggml_bench.txt" 2>&1
        echo "mixq bench gguf rc=$?"; tail -60 "$OUT/ggml_bench.txt"
      fi ;;
    *) echo "unknown step $step" ;;
  esac
done
