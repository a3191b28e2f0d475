#!/usr/bin/env bash
# The Python package on the GPU machine: builds the wheel with CUDA (copied to $OUT/wheel/),
# installs it into the interpreter's environment (next to the machine's torch), then the named
# steps, each writing logs / JSON under $OUT.
#   bash scripts/device_python.sh [pytest] [overhead] [model]
# Env: MIXQ_CUDA_ARCHS (default 90a), JOBS (default 16), WHEELS (folder of wheels for an offline
#   machine: scikit-build-core, nanobind, pytest, gguf, safetensors; default .whl),
#   MODEL_ARGS (arguments of python -m mixq.bench_model), OVERHEAD_ARGS (of mixq.bench_overhead),
#   MIXQ_WHEEL (a wheel built by an earlier run of this script, copied back from $OUT/wheel/:
#   installed instead of building one).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
BUILD=build/python-gpu
offline=(); [ -d "$WHEELS" ] && offline=(--no-index --find-links "$WHEELS")
# build requirements and test packages, pinned as in pyproject.toml / requirements-test.txt
for spec in scikit-build-core==1.1.2 nanobind==3.1.0 pytest==8.4.2 gguf==0.19.0 safetensors==0.8.0; do
  "$PY" -m pip install -q "${offline[@]}" "$spec" > /dev/null 2>&1 || echo "could not install $spec"
done
# The machine's default CXX (/opt/gcc) has only a static libstdc++, which python/CMakeLists.txt
# refuses for an extension module; the system compiler (same GCC version) has the shared one.
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++
t0=$(date +%s)
if [ -n "${MIXQ_WHEEL:-}" ] && [ -f "$MIXQ_WHEEL" ]; then
  wheel=$MIXQ_WHEEL
  echo "wheel: $(basename "$wheel") (prebuilt)"
else
  CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-16} "$PY" -m pip wheel . -w build/python-gpu-dist --no-deps \
    --no-build-isolation -q -C build-dir=$BUILD -C cmake.define.MIXQ_CUDA=ON \
    -C "cmake.define.MIXQ_CUDA_ARCHS=${MIXQ_CUDA_ARCHS:-90a}" -C cmake.define.MIXQ_BUILD_TOOLS=ON \
    > "$OUT/wheel.log" 2>&1 || { tail -40 "$OUT/wheel.log"; exit 1; }
  wheel=$(ls -t build/python-gpu-dist/mixq-*.whl | head -1)
  echo "wheel: $(basename "$wheel") $(stat -c %s "$wheel") bytes, built in $(( $(date +%s) - t0 )) s"
  mkdir -p "$OUT/wheel" && cp "$wheel" "$OUT/wheel/"
fi
# Into the interpreter's own environment (the machine's torch lives in a virtual environment of
# its own, which a nested --system-site-packages venv would not see).
"$PY" -m pip install -q --no-deps --force-reinstall "$wheel" > /dev/null
if [ -n "${MIXQ_WHEEL:-}" ]; then
  # a prebuilt wheel's extension with this checkout's Python modules
  site=$("$PY" -c "import mixq, os; print(os.path.dirname(mixq.__file__))")
  cp -r python/mixq/. "$site/"
fi
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
"$PY" -c "import mixq; print('mixq', mixq.__file__, 'cuda', mixq.cuda_available())"

for step in "$@"; do
  case "$step" in
    pytest)
      "$PY" -m pytest -q -rs -p no:cacheprovider tests/python > "$OUT/pytest.log" 2>&1
      echo "pytest rc=$?"; tail -5 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20 ;;
    overhead)
      "$PY" -m mixq.bench_overhead --json "$OUT/overhead.json" ${OVERHEAD_ARGS:-} \
        > "$OUT/overhead.txt" 2>&1
      echo "overhead rc=$?"; cat "$OUT/overhead.txt" | tail -12 ;;
    model)
      "$PY" -m mixq.bench_model --json "$OUT/model.json" ${MODEL_ARGS:-} \
        > "$OUT/model.txt" 2>&1
      echo "model rc=$?"; tail -20 "$OUT/model.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
