"""Measured errors of fp16 and bf16 conversion over the model zoo (on the sim).

For every zoo model of ``tests/zoo/test_zoo.py`` and each precision, the engine's outputs are compared
with three PyTorch references on the same inputs:

* ``vs_fp32``: eager PyTorch in float32 (what the user's fp32 model computes);
* ``vs_autocast``: eager PyTorch under ``torch.autocast("cpu", dtype)`` (the same reduced precision;
  CPU autocast's lists differ from the converter's CUDA-style lists in softmax/normalization, so
  this is a reference in the same precision, not the same computation);
* ``autocast_vs_fp32``: autocast's own distance from float32 (the yardstick for ``vs_fp32``).

Each figure is the largest, over output tensors, of ``max|a - b| / max|b|``. Writes
``benchmarks/results/<date>-precision-cpu/precision_zoo.json`` (with the machine description) and a
Markdown table beside it.

    .venv/bin/python benchmarks/bench_precision.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch2trt_lite  # noqa: E402
from tests.weights import nontrivial  # noqa: E402
from tests.zoo.test_zoo import ZOO, _leaves  # noqa: E402


def rel(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor] | None) -> float | None:
    """None when there is no reference (eager PyTorch failed) or either side is not finite (fp16 overflow)."""
    if ref is None:
        return None
    worst = 0.0
    for k, r in ref.items():
        if not r.is_floating_point():
            continue
        if not torch.isfinite(r).all() or not torch.isfinite(got[k]).all():
            return None
        g = got[k].float()
        scale = r.float().abs().max().item()
        err = (g - r.float()).abs().max().item()
        worst = max(worst, err / scale if scale > 0 else err)
    return worst


def measure(z: Any, precision: str) -> dict[str, Any]:
    torch.manual_seed(0)
    model = z.build().eval()
    nontrivial(model)
    xs = z.inputs()
    dtype = torch2trt_lite.trace.precision.PRECISIONS[precision]
    ref_ac: dict[str, torch.Tensor] | None = None
    note = None
    with torch.no_grad():
        ref32 = _leaves(model(*[x.clone() for x in xs]))
        try:
            with torch.autocast("cpu", dtype=dtype):
                ref_ac = _leaves(model(*[x.clone() for x in xs]))
        except RuntimeError as e:  # e.g. no fp16 LSTM in PyTorch on CPU
            note = f"eager autocast fails: {type(e).__name__}: {str(e)[:120]}"
        if ref_ac is not None and not all(torch.isfinite(r).all() for r in ref_ac.values() if r.is_floating_point()):
            note = "eager autocast overflows (inf/nan in its output); the engine's output is finite"
    t0 = time.perf_counter()
    trt = torch2trt_lite.convert(model, [x.clone() for x in xs], backend="sim", precision=precision, progress=False)
    conv_s = time.perf_counter() - t0
    got = _leaves(trt(*[x.clone() for x in xs]))
    types: dict[str, int] = {}
    for _, _, dts in trt.layer_precisions():
        for d in dts:
            types[d] = types.get(d, 0) + 1
    assert all(torch.isfinite(g).all() for g in got.values() if g.is_floating_point()), "the engine's output is not finite"
    return {
        "vs_fp32": rel(got, ref32), "vs_autocast": rel(got, ref_ac),
        "autocast_vs_fp32": rel(ref_ac, ref32) if ref_ac is not None else None, "note": note,
        "convert_s": round(conv_s, 3), "layer_output_types": types,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", help="zoo model names")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    rows: dict[str, Any] = {}
    for z in ZOO:
        if z.xfail or (args.only and z.name not in args.only):
            continue
        rows[z.name] = {}
        for precision in ("fp16", "bf16"):
            try:
                rows[z.name][precision] = measure(z, precision)
            except torch2trt_lite.Torch2TRTError as e:
                rows[z.name][precision] = {"error": f"{type(e).__name__}: {e}"[:400]}
            print(z.name, precision, rows[z.name][precision], flush=True)
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"{day}-precision-cpu")
    os.makedirs(out, exist_ok=True)
    doc = {
        "command": "python benchmarks/bench_precision.py" + (f" --only {' '.join(args.only)}" if args.only else ""),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "torch2trt_lite": torch2trt_lite.__version__},
        "backend": "sim", "date": day, "models": rows,
    }
    with open(os.path.join(out, "precision_zoo.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["| model | fp16 vs fp32 | fp16 vs autocast | autocast fp16 vs fp32 | bf16 vs fp32 | bf16 vs autocast | autocast bf16 vs fp32 |",
             "|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        cells = []
        for precision in ("fp16", "bf16"):
            m = r[precision]
            cells += [("n/a" if m[k] is None else f"{m[k]:.2e}") for k in ("vs_fp32", "vs_autocast", "autocast_vs_fp32")] \
                if "error" not in m else ["error"] * 3
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    notes = [f"* {name} {p}: {r[p]['note']}" for name, r in rows.items() for p in ("fp16", "bf16")
             if "error" not in r[p] and r[p].get("note")]
    with open(os.path.join(out, "precision_zoo.md"), "w") as f:
        f.write("Relative errors (max abs error / max magnitude of the reference), sim backend; "
                f"`{doc['command']}`. n/a: no eager reference in that precision (see the notes).\n\n"
                + "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
