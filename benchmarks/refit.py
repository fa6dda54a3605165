"""Refit vs rebuild: new weights for an engine without a rebuild (``TRTModule.refit``).

    python benchmarks/refit.py --out benchmarks/results/2026-12-06-refit-cpu/refit.json

For each model (random weights, eval): ``convert`` (a rebuild: trace + build), ``convert(...,
refittable=True)`` (traced twice: see torch2trt_lite/build/refit.py), ``TRTModule.refit`` with a
retrained copy (other random weights) and the engine's maximum absolute error against that copy in
eager PyTorch, and the sizes of the engine file with and without weights (rebuild and refit: medians of
3). On TensorRT-RTX (when it
is installed) the build part: a plain build's seconds (what each weight change costs without refit)
and what the CPU-only builder says to a refittable build. Writes JSON with the machine description.
The sim's engines are TensorRT's API executed with torch, not TensorRT. Benchmarks are not tests:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

import torch
import torchvision
from torch import nn

import torch2trt_lite


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__,
        "torch2trt_lite": torch2trt_lite.__version__, "load_avg": os.getloadavg(),
        "engines": "sim (TensorRT API on torch), not TensorRT; TensorRT-RTX builds only (no GPU)",
    }


def transformer() -> nn.Module:
    layer = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)


MODELS: dict[str, tuple[Any, tuple[int, ...], str]] = {  # name -> (factory, input shape, precision)
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 64, 64), "fp32"),
    "resnet18-fp16": (lambda: torchvision.models.resnet18(), (1, 3, 64, 64), "fp16"),
    "transformer-4x256": (transformer, (1, 32, 256), "fp32"),
}


REPEATS = 3  # medians: this machine's 2 cores are shared, so single timings vary


def _timed(fn: Any, repeats: int = 1) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def run(name: str, factory: Any, shape: tuple[int, ...], precision: str) -> dict[str, Any]:
    torch.manual_seed(0)
    model, retrained = factory().eval(), factory().eval()
    x = torch.randn(shape)
    out: dict[str, Any] = {"model": name, "shape": list(shape), "precision": precision}
    _, out["rebuild_s"] = _timed(lambda: torch2trt_lite.convert(model, [x], backend="sim", precision=precision), REPEATS)
    trt, out["convert_refittable_s"] = _timed(
        lambda: torch2trt_lite.convert(model, [x], backend="sim", precision=precision, refittable=True))
    out["refittable_weights"] = len(trt.metadata["refit"]["weights"])
    _, out["refit_s"] = _timed(lambda: trt.refit(retrained), REPEATS)
    with torch.no_grad():
        out["max_abs_err_vs_retrained"] = float((trt(x).float() - retrained(x)).abs().max())
    with tempfile.TemporaryDirectory() as d:
        full, stripped = os.path.join(d, "full.engine"), os.path.join(d, "stripped.engine")
        trt.save(full)
        trt.save(stripped, weights=False)
        out["file_bytes"], out["stripped_file_bytes"] = os.path.getsize(full), os.path.getsize(stripped)
        _, out["load_stripped_with_weights_s"] = _timed(lambda: torch2trt_lite.load(stripped, weights=retrained))
    out["refit_vs_rebuild"] = round(out["refit_s"] / out["rebuild_s"], 4)
    if importlib.util.find_spec("tensorrt_rtx") is not None and precision == "fp32":
        _, out["rtx_plain_build_s"] = _timed(lambda: torch2trt_lite.convert(model, [x], backend="tensorrt-rtx"))
        try:
            torch2trt_lite.convert(model, [x], backend="tensorrt-rtx", refittable=True)
            out["rtx_refittable_build"] = "built"
        except torch2trt_lite.BuildError as e:
            out["rtx_refittable_build"] = f"refused: {str(e)[:400]}"
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=",".join(MODELS))
    args = p.parse_args()
    rows = []
    for name in args.models.split(","):
        factory, shape, precision = MODELS[name]
        rows.append(run(name, factory, shape, precision))
        print(json.dumps(rows[-1]), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "machine": machine(),
                   "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
