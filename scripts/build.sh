#!/usr/bin/env bash
# Configures (once) and builds mixq into ${MIXQ_BUILD_DIR:-build}. Extra arguments go to cmake;
# MIXQ_TARGETS names the targets to build (default: all).
# CUDA is built when nvcc is found (MIXQ_CUDA=AUTO), for the architectures in MIXQ_CUDA_ARCHS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${MIXQ_BUILD_DIR:-build}
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake "$BUILD_DIR" "$@"
fi
# MIXQ_TARGETS: build only these targets (the quick start builds just the CLI)
cmake --build "$BUILD_DIR" -j "$(nproc)" ${MIXQ_TARGETS:+--target $MIXQ_TARGETS}
