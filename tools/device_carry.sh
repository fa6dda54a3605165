#!/usr/bin/env bash
# Prepare the TensorRT-RTX wheels that tools/device_check.sh installs on the lent GPU machine.
#
#   bash tools/device_carry.sh            # here, on the dev machine (needs PyPI), before the device calls
#
# The device machine has Python 3.12 and no internet, and one device call carries at most 64 MiB
# (the working tree that travels counts too). So this script
# 1. downloads, for CPython 3.12 / manylinux x86_64, into .whl/ (git-ignored):
#      tensorrt_rtx_cu13_bindings-$RTX_VERSION-cp312-none-manylinux_2_28_x86_64.whl  (~1.2 MB)
#      tensorrt_rtx_cu13_libs-$RTX_VERSION-py3-none-manylinux_2_28_x86_64.whl         (~95 MB)
#    and builds the wheel of tensorrt-rtx-cu13 (the `tensorrt_rtx` module itself; PyPI has only its
#    sdist, pure Python, ~20 kB): tensorrt_rtx_cu13-$RTX_VERSION-py3-none-any.whl;
# 2. writes .whl/SHA256SUMS (sha256 of every whole wheel) and splits every wheel over 60 MiB into
#    .whl/parts/NAME.partaa, .partab, ... (split -b $PART_SIZE), checks that the parts rejoin to the
#    same sha256, and deletes the big original (KEEP_WHOLE=1 keeps it; it is never carried);
# 3. prints the carry list of each device call (at most 8 paths, <= 64 MiB with the working tree)
#    and the command to run in it. tools/device_check.sh (step "rtx") joins the parts, checks the
#    sums and installs the wheels; a part carried by an earlier call stays on the machine only while
#    it is warm (about 30 s after a call returns), so make the calls back to back.
#
# Environment: PYTHON (default .venv/bin/python, else python3), RTX_VERSION (default 1.7.1.116),
# PART_SIZE (default 60m; smaller parts leave more room for the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
VERSION="${RTX_VERSION:-1.7.1.116}"
PART_SIZE="${PART_SIZE:-60m}"
W=.whl
LIMIT=$((64 * 1024 * 1024))       # what one device call carries, working tree included
MARGIN=$((512 * 1024))             # slack for files the working tree gains before the call

if ! git check-ignore -q "$W/probe.whl"; then
  echo "error: $W/ is not git-ignored here (add /$W/ to .gitignore or .git/info/exclude): it would travel whole" >&2
  exit 1
fi
to_bytes() {  # split's size syntax: 60m, 60M, 48000k, 1000000
  local s="$1" n="${1%[kKmMgG]}"
  case "$s" in *[kK]) echo $((n * 1024)) ;; *[mM]) echo $((n * 1024 * 1024)) ;; *[gG]) echo $((n * 1024 * 1024 * 1024)) ;; *) echo "$n" ;; esac
}
PART_BYTES=$(to_bytes "$PART_SIZE")
mkdir -p "$W/parts"

echo "== download (cp312, manylinux x86_64) into $W/"
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)
for pkg in tensorrt-rtx-cu13-bindings tensorrt-rtx-cu13-libs; do  # one by one: pip stops at the first it lacks
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d "$W" "$pkg==$VERSION"
done
# tensorrt-rtx-cu13 is an sdist on PyPI (no wheel: `pip download --only-binary` finds none); it is
# pure Python, so a wheel built here installs on the device's cp312 as it is.
"$PY" -m pip wheel -q --no-deps -w "$W" "tensorrt-rtx-cu13==$VERSION"

shopt -s nullglob
wheels=("$W"/tensorrt_rtx_cu13*-"$VERSION"-*.whl)
names=()
for f in "${wheels[@]}"; do names+=("$(basename "$f")"); done
for n in bindings libs; do
  found=0
  for f in "${names[@]}"; do [[ "$f" == tensorrt_rtx_cu13_${n}-* ]] && found=1; done
  [ "$found" = 1 ] || { echo "error: no tensorrt_rtx_cu13_$n wheel in $W/" >&2; exit 1; }
done

echo "== sha256 and split (parts of $PART_SIZE for wheels over it)"
(cd "$W" && sha256sum "${names[@]}") > "$W/SHA256SUMS"
cat "$W/SHA256SUMS"
for f in "${wheels[@]}"; do
  n="$(basename "$f")"
  size=$(stat -c %s "$f")
  rm -f "$W/parts/$n".part*
  if [ "$size" -gt "$PART_BYTES" ]; then
    split -b "$PART_SIZE" "$f" "$W/parts/$n.part"
    want=$(grep " $n\$" "$W/SHA256SUMS" | cut -d' ' -f1)
    got=$(cat "$W/parts/$n".part* | sha256sum | cut -d' ' -f1)
    if [ "$want" != "$got" ]; then
      echo "error: the parts of $n rejoin to $got, not $want" >&2
      exit 1
    fi
    parts=("$W/parts/$n".part*)
    echo "$n: $size bytes -> ${#parts[@]} parts, rejoined sha256 $got matches"
    [ "${KEEP_WHOLE:-0}" = 1 ] || rm -f "$f"
  fi
done

echo "== carry lists"
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
# what travels: the parts, then the wheels that were not split; SHA256SUMS goes with every call
items=("$W"/parts/tensorrt_rtx_cu13*-"$VERSION"-*.part*)
for f in "${wheels[@]}"; do
  n="$(basename "$f")"
  parts=("$W/parts/$n".part*)
  [ "${#parts[@]}" -eq 0 ] && items+=("$f")
done
sums=$(stat -c %s "$W/SHA256SUMS")
room=$((LIMIT - tree - sums - MARGIN))
calls=()        # space-separated paths of each call
loads=()        # bytes of each call (without the tree)
for f in "${items[@]}"; do
  s=$(stat -c %s "$f")
  if [ "$s" -gt "$room" ]; then
    echo "error: $f ($s bytes) does not fit one call beside the working tree ($tree bytes): use a smaller PART_SIZE" >&2
    exit 1
  fi
  best=-1  # the least loaded call it fits in (so the small wheels leave the full calls alone)
  for i in "${!calls[@]}"; do
    n_paths=$(wc -w <<<"${calls[$i]}")
    if [ $((loads[i] + s)) -le "$room" ] && [ "$n_paths" -lt 7 ] && { [ "$best" -lt 0 ] || [ "${loads[i]}" -lt "${loads[best]}" ]; }; then
      best=$i
    fi
  done
  if [ "$best" -ge 0 ]; then
    calls[best]="${calls[$best]} $f"; loads[best]=$((loads[best] + s))
  else
    calls+=("$f"); loads+=("$s")
  fi
done
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
echo "working tree that travels with every call: $tree bytes ($(mib "$tree"))"
last=$((${#calls[@]} - 1))
for i in "${!calls[@]}"; do
  total=$((tree + sums + loads[i]))
  echo
  echo "call $((i + 1)) of ${#calls[@]}: carries $(mib $((sums + loads[i]))); with the tree $(mib "$total") of 64 MiB"
  printf '  %s\n' "$W/SHA256SUMS ($sums bytes)"
  for f in ${calls[$i]}; do printf '  %s (%s bytes, %s)\n' "$f" "$(stat -c %s "$f")" "$(mib "$(stat -c %s "$f")")"; done
  json="\"$W/SHA256SUMS\""
  for f in ${calls[$i]}; do json="$json, \"$f\""; done
  echo "  carry: [$json]"
  if [ "$i" -lt "$last" ]; then
    echo "  command: OUT=\$OUT STEPS='gpu-tests benchmark diag sim' bash tools/device_check.sh"
    echo "           (or STEPS=none to only drop the parts there; then make the next call at once)"
  else
    echo "  command: OUT=\$OUT STEPS=rtx bash tools/device_check.sh"
  fi
done
