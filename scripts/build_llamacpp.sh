#!/usr/bin/env bash
# Builds llama.cpp's ggml (CPU backend with its weight repacking on; CUDA backend for `cuda`), its
# test-backend-ops, and mixq's comparison driver bench/llamacpp_driver.cpp, from a llama.cpp source
# checkout, for bench/llamacpp_compare.py. Nothing of llama.cpp is copied into this repository:
# SRC_DIR is any llama.cpp tree (a git checkout, or an unpacked source tarball carried to a machine
# without network), and everything built lands in OUT_DIR.
#
#   scripts/build_llamacpp.sh SRC_DIR OUT_DIR [native|avx2|cuda]
#
# Variants:
#   native  -DGGML_NATIVE=ON: -march=native, so on a CPU with AMX / AVX-512 VNNI the CPU backend
#           has its AMX buffer type and its repacked (CPU_REPACK) layouts, as a default llama.cpp
#           build on this machine has.
#   avx2    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF (and no AVX-512 / AMX / AVX-VNNI
#           extensions): llama.cpp as built for AVX2-only CPUs; the repacked Q4_0 / Q4_K / IQ4_NL /
#           Q8_0 layouts are AVX2 paths, so they stay on.
#   cuda    native CPU flags plus -DGGML_CUDA=ON for CMAKE_CUDA_ARCHITECTURES (default: the
#           architecture of the GPU present, else 90); needs nvcc, no network.
#
# Outputs: OUT_DIR/bin/llamacpp_driver, OUT_DIR/bin/test-backend-ops, OUT_DIR/build-info.txt.
# Environment: JOBS (parallel jobs, default nproc), CMAKE_CUDA_ARCHITECTURES (cuda).
set -euo pipefail

usage() {
  echo "usage: $0 SRC_DIR OUT_DIR [native|avx2|cuda]" >&2
  exit 2
}
[[ $# -ge 2 && $# -le 3 ]] || usage
SRC=$(realpath -- "$1")
OUT=$(realpath -m -- "$2")
VARIANT=${3:-native}
REPO=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${JOBS:-$(nproc)}

[[ -f "$SRC/ggml/CMakeLists.txt" ]] ||
  { echo "$0: SRC_DIR '$1' is not a llama.cpp source tree (no ggml/CMakeLists.txt)" >&2; exit 1; }
[[ -f "$SRC/tests/test-backend-ops.cpp" ]] ||
  { echo "$0: SRC_DIR '$1' has no tests/test-backend-ops.cpp" >&2; exit 1; }
[[ "$VARIANT" == cuda ]] || grep -q 'GGML_CPU_REPACK' "$SRC/ggml/CMakeLists.txt" ||
  { echo "$0: SRC_DIR '$1': this llama.cpp has no GGML_CPU_REPACK option (too old)" >&2; exit 1; }

# Every flag is spelled out so that a changed default upstream does not silently change the build.
common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_CPU_REPACK=ON -DGGML_OPENMP=ON
        -DGGML_CCACHE=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_BLAS=OFF
        -DGGML_LLAMAFILE=ON)
case "$VARIANT" in
  native) flags=(-DGGML_NATIVE=ON -DGGML_CUDA=OFF) ;;
  avx2)
    flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
           -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF
           -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
           -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CUDA=OFF) ;;
  cuda)
    command -v nvcc >/dev/null || { echo "$0: cuda: nvcc is not on PATH" >&2; exit 1; }
    arch=${CMAKE_CUDA_ARCHITECTURES:-}
    if [[ -z "$arch" ]]; then
      cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
      arch=${cc:-90}
    fi
    # FlashAttention kernels are not needed for MUL_MAT and are most of ggml-cuda's build time.
    flags=(-DGGML_NATIVE=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_CUDA_FA=OFF
           -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_GRAPHS=ON) ;;
  *) usage ;;
esac

# A small CMake project in OUT_DIR that builds ggml from SRC as a subdirectory, the driver and
# test-backend-ops against it (test-backend-ops needs only ggml; llama.cpp's own build would also
# compile libllama and its common library, which nothing here uses).
mkdir -p "$OUT/project" "$OUT/bin"
cat >"$OUT/project/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.14)
project(mixq_llamacpp_compare C CXX)
set(CMAKE_CXX_STANDARD 17)
add_subdirectory("$SRC/ggml" ggml)
add_executable(llamacpp_driver "$REPO/bench/llamacpp_driver.cpp")
target_link_libraries(llamacpp_driver PRIVATE ggml)
add_executable(test-backend-ops "$SRC/tests/test-backend-ops.cpp")
target_link_libraries(test-backend-ops PRIVATE ggml)
set_target_properties(llamacpp_driver test-backend-ops PROPERTIES
                      RUNTIME_OUTPUT_DIRECTORY "$OUT/bin")
EOF

cmake -S "$OUT/project" -B "$OUT/build" -G Ninja "${common[@]}" "${flags[@]}"
ninja -C "$OUT/build" -j "$JOBS" llamacpp_driver test-backend-ops

{
  echo "variant: $VARIANT"
  echo "source: $SRC"
  # only a checkout of its own (a tree unpacked inside another repository would report that one's)
  if [[ "$(git -C "$SRC" rev-parse --show-toplevel 2>/dev/null)" == "$SRC" ]]; then
    echo "commit: $(git -C "$SRC" rev-parse HEAD)"
  fi
  if [[ -f "$SRC/SOURCE" ]]; then echo "source note: $(head -1 "$SRC/SOURCE")"; fi
  echo "cmake flags: ${common[*]} ${flags[*]}"
  grep -E '^(GGML_[A-Z0-9_]+|CMAKE_CUDA_ARCHITECTURES):' "$OUT/build/CMakeCache.txt" |
    grep -E 'NATIVE|AVX|AMX|REPACK|CUDA|FMA|F16C|BMI2|OPENMP|LLAMAFILE' || true
} >"$OUT/build-info.txt"
echo "built: $OUT/bin/llamacpp_driver, $OUT/bin/test-backend-ops ($VARIANT; see $OUT/build-info.txt)"
