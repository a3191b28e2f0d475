#!/usr/bin/env bash
# Builds the mixq Python wheel with the CPU backend (MIXQ_CUDA=OFF: the CI machine has nvcc but
# no GPU, and a CUDA build takes 20+ minutes on 2 cores), reports its size, installs it into a
# virtual environment that also sees the interpreter's packages (numpy, pytest, gguf,
# safetensors, and torch / transformers where installed), and runs the Python tests.
# Tests needing torch, transformers or a GPU skip with the reason (-rs lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
pip_install() {
  "$PY" -m pip install -q --disable-pip-version-check "$@" \
    || "$PY" -m pip install -q --disable-pip-version-check --break-system-packages "$@"
}
# The build backend and binding library, pinned as in pyproject.toml; matplotlib for mixq.plot.
pip_install scikit-build-core==1.1.2 nanobind==3.1.0 matplotlib==3.11.2 -r requirements-test.txt

export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
WHEEL_DIR=build/python-dist
VENV=build/python-venv
rm -rf "$WHEEL_DIR" "$VENV"
start=$(date +%s)
"$PY" -m pip wheel . -w "$WHEEL_DIR" --no-deps --no-build-isolation -q \
  -C cmake.define.MIXQ_CUDA=OFF -C build-dir=build/python-ci
wheel=$(ls "$WHEEL_DIR"/mixq-*.whl)
echo "python_test: built $(basename "$wheel") in $(( $(date +%s) - start )) s," \
     "$(stat -c %s "$wheel") bytes ($(du -h "$wheel" | cut -f1))"

"$PY" -m venv --system-site-packages "$VENV"
# --force-reinstall: a mixq already in the interpreter's own packages must not satisfy this
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
"$VENV/bin/python" -c "import mixq, sys; p = mixq.__file__; sys.exit(0 if p.startswith('$PWD/$VENV') else 'python_test: imported mixq from ' + p + ', not the wheel just built')"
# The repository root holds no importable mixq package (its sources are in python/), so the
# tests import the installed wheel.
"$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider tests/python
