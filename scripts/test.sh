#!/usr/bin/env bash
# Builds mixq and runs every test (CTest): unit tests, CLI end-to-end tests, the Python oracle
# tests, and the GPU tests (which skip, with a visible count, on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${MIXQ_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
