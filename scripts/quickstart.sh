#!/usr/bin/env bash
# Quick start: install what is needed, build, and run the main job (mixq bench on the best
# available backend: the GPU when there is one, else the CPU). On a machine without a GPU the CUDA
# kernels, which could not run there, are not compiled (a 2-core machine builds the CPU library in
# about a minute instead of twenty). Only the CLI is built here; scripts/test.sh then builds the
# tests in the same build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  MIXQ_TARGETS=mixq_cli bash scripts/build.sh
else
  echo "quickstart: no GPU found: building the CPU backends only"
  MIXQ_TARGETS=mixq_cli bash scripts/build.sh -DMIXQ_CUDA=OFF
fi
exec "${MIXQ_BUILD_DIR:-build}/mixq" bench "$@"
