#!/usr/bin/env bash
# Device check of the CUDA plugins and the TensorRT-RTX backend, for a lent GPU machine (written for
# one H200; ~4-6 minutes for steps 2-5, ~3-6 more for step 6).
#
#   OUT=/path/to/results [STEPS='gpu-tests benchmark diag sim rtx'] bash tools/device_check.sh
#
# 1. installs this checkout (pip install --no-deps --no-build-isolation -e .) into the Python on
#    PATH (or $PYTHON), which must already have torch, torchvision and cuda-python;
# 2. gpu-tests: runs the GPU tests of the plugins (pytest -m gpu tests/plugins/test_plugins_gpu.py), log;
# 3. benchmark: runs benchmarks/plugins_bench.py, JSON + log (first: what only a GPU can measure);
# 4. diag: the sim per-layer CPU vs CUDA diagnostic (tools/device_diag.py), JSON;
# 5. sim: runs the sim's tests on CUDA tensors (the conformance cases run on the GPU when one exists);
# 6. rtx: TensorRT-RTX (not on the device machine, no internet there: its wheels travel in .whl/):
#    joins .whl/parts/NAME.part* into NAME, checks every wheel against .whl/SHA256SUMS, installs
#    them (pip install --no-deps --no-index) unless tensorrt_rtx $RTX_VERSION already imports, then runs
#    tools/device_rtx.py (timeout $RTX_TIMEOUT, default 420 s; more flags in $RTX_ARGS; the harness
#    budget in $RTX_HARNESS_BUDGET_S, default 150 s): $OUT/rtx.json + $OUT/rtx.log.
# 7. refit: refittable and weight-stripped engines on the real backends (after step 6 installed
#    TensorRT-RTX): pytest -m gpu tests/runtime/test_refit.py (builder flags, Refitter, serialization
#    without weights), $OUT/refit.log. Not yet run on a GPU (written 2026-12-06 against the manifests).
# STEPS (default: all) picks steps 2-7; the machine description and step 1 always run.
# Everything lands under $OUT (default: ./device_check_out); at most 8 files come back from a device
# call, so with more the logs other than steps.log are merged into all-logs.txt.
# Exit status: 0 when every step run passed.
#
# The two-call carry sequence (one call carries at most 64 MiB with the working tree; the libs wheel
# is 91 MiB): first, here, `bash tools/device_carry.sh` (downloads the cp312 wheels, splits the libs
# wheel, prints these lists with their sizes), then, back to back (a part left by call 1 stays only
# while the machine is warm, ~30 s after a call):
#   call 1: carry [".whl/SHA256SUMS",
#                  ".whl/parts/tensorrt_rtx_cu13_libs-1.7.1.116-py3-none-manylinux_2_28_x86_64.whl.partaa"]
#           (60.0 MiB; 62.4 MiB with the 2.4 MiB tree on 2026-12-01: device_carry.sh prints the current
#           figure; PART_SIZE=46m there gives two ~48 MiB calls if the tree grows)
#           command: OUT=$OUT STEPS='gpu-tests benchmark diag sim' bash tools/device_check.sh
#           (or STEPS=none: only drops the part there, in seconds)
#   call 2: carry [".whl/SHA256SUMS",
#                  ".whl/parts/tensorrt_rtx_cu13_libs-1.7.1.116-py3-none-manylinux_2_28_x86_64.whl.partab",
#                  ".whl/tensorrt_rtx_cu13-1.7.1.116-py3-none-any.whl",
#                  ".whl/tensorrt_rtx_cu13_bindings-1.7.1.116-cp312-none-manylinux_2_28_x86_64.whl"]
#           (31.9 MiB; 34.3 MiB with the tree)
#           command: OUT=$OUT STEPS=rtx bash tools/device_check.sh
# If call 2 finds the first part gone (the machine was given back in between), step 6 says so and
# fails; carry the parts again. On a warm machine that installed them, later calls need no carry.
set -uo pipefail

OUT="${OUT:-$(pwd)/device_check_out}"
PY="${PYTHON:-python3}"
REPEATS="${REPEATS:-200}"
STEPS="${STEPS:-gpu-tests benchmark diag sim rtx refit}"
RTX_VERSION="${RTX_VERSION:-1.7.1.116}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1
shopt -s nullglob  # a glob that matches nothing expands to nothing
status=0

step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log"; }
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
say() { echo "$*" | tee -a "$OUT/steps.log"; }

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

if want gpu-tests; then
step "gpu tests"
timeout 180 "$PY" -m pytest -m gpu tests/plugins/test_plugins_gpu.py -q -rs -s -p no:cacheprovider --tb=short 2>&1 \
  | tee "$OUT/gpu-tests.log" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if want benchmark; then
step "benchmark"
timeout 240 "$PY" benchmarks/plugins_bench.py --out "$OUT/plugins_bench.json" --repeats "$REPEATS" 2>&1 \
  | tee "$OUT/plugins_bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if want diag; then
step "sim per-layer CPU vs CUDA diagnostic"
timeout 90 "$PY" tools/device_diag.py > "$OUT/sim-diag.json" 2>/tmp/t2tl-diag.err || status=1
cat "$OUT/sim-diag.json"
fi

if want sim; then
step "sim on CUDA tensors (conformance cases, layer families, TRTModule, models)"
timeout 150 "$PY" -m pytest tests/sim tests/runtime/test_module.py -q \
  -p no:cacheprovider -rf --tb=short 2>&1 | tail -120 > "$OUT/sim-cuda-tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tail -25 "$OUT/sim-cuda-tests.log"
fi

# TensorRT-RTX wheels: join the parts, check the sums, install. Returns 0 when tensorrt_rtx imports.
rtx_wheels() {
  local have src=.whl dir="${TMPDIR:-/tmp}/t2tl-rtx-whl" f n sum got missing=0 parts
  have=$("$PY" -c 'import tensorrt_rtx as t; print(t.__version__)' 2>/dev/null || true)
  if [ "$have" = "$RTX_VERSION" ]; then
    say "tensorrt_rtx $have already installed"
    return 0
  fi
  [ -n "$have" ] && say "tensorrt_rtx $have installed; installing $RTX_VERSION over it"
  if [ ! -f "$src/SHA256SUMS" ]; then
    say "no $src/SHA256SUMS: run tools/device_carry.sh on the dev machine and carry what it lists"
    return 1
  fi
  rm -rf "$dir" && mkdir -p "$dir" || return 1
  for f in "$src"/parts/*.partaa; do  # NAME.partaa, NAME.partab, ... -> NAME
    n=$(basename "${f%.partaa}")
    parts=("$src/parts/$n".part??)
    cat "${parts[@]}" > "$dir/$n" || return 1
    say "joined $n from ${#parts[@]} part(s): ${parts[*]##*/}"
  done
  for f in "$src"/*.whl; do cp "$f" "$dir/" || return 1; done
  while read -r sum n; do
    if [ ! -f "$dir/$n" ]; then
      parts=("$src/parts/$n".part??)
      say "missing $n: not in $src/, and $src/parts/ holds ${#parts[@]} of its parts (${parts[*]##*.}); partaa comes with call 1"
      missing=1; continue
    fi
    got=$(sha256sum "$dir/$n" | cut -d' ' -f1)
    if [ "$got" != "$sum" ]; then
      say "sha256 of $n is $got, not $sum: a part is missing or stale (was the machine given back between the calls?)"
      parts=("$src/parts/$n".part??)
      say "  its parts here: ${parts[*]##*/}"
      missing=1
    fi
  done < "$src/SHA256SUMS"
  [ "$missing" = 0 ] || return 1
  say "sha256 of every wheel matches $src/SHA256SUMS"
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "$dir"/*.whl \
      >"$dir/pip.log" 2>&1; then
    tail -5 "$dir/pip.log" | tee -a "$OUT/steps.log"
    say "pip install into $PY failed; installing into $dir/site (PYTHONPATH)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$dir/site" \
      "$dir"/*.whl >>"$dir/pip.log" 2>&1 || { tail -5 "$dir/pip.log" | tee -a "$OUT/steps.log"; return 1; }
    export PYTHONPATH="$dir/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  have=$("$PY" -c 'import tensorrt_rtx as t; print(t.__version__)' 2>&1 | tail -3)
  say "import tensorrt_rtx: $have"
  [ "$have" = "$RTX_VERSION" ]
}

if want rtx; then
step "TensorRT-RTX wheels"
if rtx_wheels; then
  step "TensorRT-RTX on the GPU (tools/device_rtx.py)"
  read -r -a rtx_args <<< "${RTX_ARGS:-}"  # e.g. RTX_ARGS='--no-compile --skip harness'
  PYTHONUNBUFFERED=1 timeout "${RTX_TIMEOUT:-420}" "$PY" tools/device_rtx.py --out "$OUT/rtx.json" "${rtx_args[@]}" 2>&1 \
    | tee "$OUT/rtx.log" | tail -40
  rc=${PIPESTATUS[0]}
  case "$rc" in
    0) say "device_rtx: ran (or no GPU)" ;;
    3) say "device_rtx: TensorRT-RTX refused this GPU (the refusal is in rtx.json)"; status=1 ;;
    124|137) say "device_rtx: timed out after ${RTX_TIMEOUT:-420} s (rtx.json holds the steps done)"; status=1 ;;
    *) say "device_rtx: exit $rc (see rtx.json / rtx.log)"; status=1 ;;
  esac
else
  say "TensorRT-RTX step skipped: the wheels are not there or did not install"
  status=1
fi
fi

if want refit; then
step "refit on the real backends (tests/runtime/test_refit.py -m gpu)"
timeout 240 "$PY" -m pytest -m gpu tests/runtime/test_refit.py -q -rs -p no:cacheprovider --tb=short 2>&1 \
  | tee "$OUT/refit.log" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

# at most 8 files come back from a device call: merge the logs when there are more
if [ "$(find "$OUT" -maxdepth 1 -type f | wc -l)" -gt 8 ]; then
  for f in "$OUT"/*.log; do
    { [ -f "$f" ] && [ "$(basename "$f")" != steps.log ]; } || continue
    { echo "===== $(basename "$f")"; cat "$f"; } >> "$OUT/all-logs.txt" && rm -f "$f"
  done
fi

step "done (status $status)"
exit "$status"
