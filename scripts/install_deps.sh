#!/usr/bin/env bash
# Installs everything mixq's build, tests and tools need, from Debian packages and PyPI only.
# Idempotent: skips apt-get when the tools are already there. The CUDA toolkit is optional
# (found at /usr/local/cuda or on PATH); without it mixq builds the CPU backends only.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
command -v git >/dev/null || need_apt+=(git)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# Python oracles (gguf, safetensors) and pytest, pinned.
if ! python3 -c "import numpy, gguf, safetensors, pytest" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check -r requirements-test.txt \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages -r requirements-test.txt
fi
echo "install_deps: ok"
