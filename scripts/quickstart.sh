#!/usr/bin/env bash
# Quick start: install what is needed, build, and run the main job (mixq bench on the best
# available backend: the GPU when there is one, else the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
exec "${MIXQ_BUILD_DIR:-build}/mixq" bench "$@"
