#!/usr/bin/env bash
# Device check of the CUDA plugins, for a lent GPU machine (written for one H200; ~4-6 minutes).
#
#   OUT=/path/to/results bash tools/device_check.sh
#
# 1. installs this checkout (pip install --no-deps --no-build-isolation -e .) into the Python on
#    PATH (or $PYTHON), which must already have torch, torchvision and cuda-python;
# 2. runs the GPU tests of the plugins (pytest -m gpu tests/test_plugins_gpu.py), log;
# 3. runs benchmarks/plugins_bench.py, JSON + log (first: what only a GPU can measure);
# 4. runs the sim's tests on CUDA tensors (the conformance cases run on the GPU when one exists).
# Everything lands under $OUT (default: ./device_check_out). Exit status: 0 when every step passed.
set -uo pipefail

OUT="${OUT:-$(pwd)/device_check_out}"
PY="${PYTHON:-python3}"
REPEATS="${REPEATS:-200}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
status=0

step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log"; }

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())'
  "$PY" -c 'import cuda.bindings as b; print("cuda-python", b.__version__)' || echo "cuda-python missing: pip install cuda-python"
  "$PY" -c 'import tensorrt as t; print("tensorrt", t.__version__)' 2>/dev/null || echo "tensorrt not installed (TensorRT tests will skip)"
} 2>&1 | tee "$OUT/machine.txt"

step "install"
if ! "$PY" -m pip install --no-deps --no-build-isolation -e . >/tmp/t2tl-pip.log 2>&1; then
  echo "pip install failed" | tee -a "$OUT/steps.log"
  tail -20 /tmp/t2tl-pip.log | tee -a "$OUT/steps.log"
  exit 1
fi

export TORCH2TRT_LITE_CACHE="${TMPDIR:-/tmp}/t2tl-nvrtc-cache"  # not under $OUT: only 8 files come back

step "gpu tests"
timeout 180 "$PY" -m pytest -m gpu tests/test_plugins_gpu.py -q -rs -s -p no:cacheprovider --tb=short 2>&1 \
  | tee "$OUT/gpu-tests.log" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "benchmark"
timeout 240 "$PY" benchmarks/plugins_bench.py --out "$OUT/plugins_bench.json" --repeats "$REPEATS" 2>&1 \
  | tee "$OUT/plugins_bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "sim per-layer CPU vs CUDA diagnostic"
timeout 90 "$PY" tools/device_diag.py > "$OUT/sim-diag.json" 2>/tmp/t2tl-diag.err || status=1
cat "$OUT/sim-diag.json"

step "sim on CUDA tensors (conformance cases, layer families, TRTModule, models)"
timeout 150 "$PY" -m pytest tests/test_conformance.py tests/sim tests/test_module.py -q \
  -p no:cacheprovider -rf --tb=short 2>&1 | tail -120 > "$OUT/sim-cuda-tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tail -25 "$OUT/sim-cuda-tests.log"

step "done (status $status)"
exit "$status"
