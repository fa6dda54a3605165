"""Conversion and sim speed against eager PyTorch and torch.onnx.export(dynamo=True).

    python benchmarks/bench_convert.py --models resnet50 vit_b_16 --out benchmarks/results/convert-cpu.json

For each model (torchvision, random weights, eval, batch 1 at 224x224 unless --shape) it measures,
on the CPU, with the median (and the minimum) of --repeat runs:
  * conversion time / one eager forward          (goal <= 3)
  * conversion time / torch.onnx.export(dynamo)  (goal <= 0.1)
  * sim run time / eager run time                (goal <= 1.5)
and writes JSON with the machine description and its load average before and after (wall-clock
times on a shared machine are noisy: compare runs made under the same load). The ratios use the
medians; ``*_min`` fields give the minimum of the runs. ``conversion_stats`` are the phases (trace,
build, load) of the fastest conversion. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import io
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

import torch2trt_lite


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "torch2trt_lite": torch2trt_lite.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def timed(fn: Any, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


ONNX_EXTRA = "pip install 'torch2trt-lite[bench]'"


def onnx_skip_reason() -> str | None:
    """Why the ONNX comparison cannot run here (torch.onnx.export(dynamo=True) needs onnxscript), or None."""
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return f"onnxscript is not installed, so the torch.onnx.export comparison is skipped; {ONNX_EXTRA} installs it"
    return None


def onnx_result(model: torch.nn.Module, x: torch.Tensor, onnx: bool) -> dict[str, Any]:
    """The ``"onnx"`` entry of a result: ``{"export_s": ...}`` or ``{"skipped": reason}`` (said on stderr)."""
    reason = onnx_skip_reason() if onnx else "--no-onnx was given"
    if reason is not None:
        print(f"bench_convert: ONNX comparison skipped: {reason}", file=sys.stderr)
        return {"skipped": reason}
    return {"export_s": onnx_export_time(model, x)}


def onnx_export_time(model: torch.nn.Module, x: torch.Tensor) -> float | None:
    if onnx_skip_reason() is not None:
        return None
    buf = io.BytesIO()
    t0 = time.perf_counter()
    # NOTE: typed as a path, but a file object works and keeps a disk write out of the timing
    torch.onnx.export(model, (x,), buf, dynamo=True, verbose=False)  # type: ignore[arg-type]
    return time.perf_counter() - t0


def bench(name: str, shape: tuple[int, ...], repeat: int, onnx: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    with torch.no_grad():  # zero-initialised heads (vit_b_16) would make the error check vacuous
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.normal_(0, 0.02)
    x = torch.randn(shape)
    with torch.no_grad():
        model(x)  # warm-up
        eager_runs = timed(lambda: model(x), repeat)
    first = torch2trt_lite.convert(model, [x], backend="sim")  # warm-up (imports, registry)
    first_s = first.conversion_time_s
    del first
    conv_runs: list[float] = []
    best_stats: dict[str, float] = {}
    for _ in range(repeat):
        trt_model = torch2trt_lite.convert(model, [x], backend="sim")
        t = trt_model.conversion_time_s or 0.0
        if not conv_runs or t < min(conv_runs):
            best_stats = dict(trt_model.conversion_stats)
        conv_runs.append(t)
    eager, conversion = statistics.median(eager_runs), statistics.median(conv_runs)
    with torch.no_grad():
        trt_model(x)
        sim_runs = timed(lambda: trt_model(x), repeat)
        sim = statistics.median(sim_runs)
        ref = model(x)
        err = float((trt_model(x) - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    with tempfile.TemporaryDirectory() as tmp:  # the engine file round trip a deployment pays
        path = os.path.join(tmp, f"{name}.engine")
        save_runs = timed(lambda: trt_model.save(path), repeat)
        load_runs = timed(lambda: torch2trt_lite.load(path), repeat)
        engine_bytes = os.path.getsize(path)
    onnx_entry = onnx_result(model, x, onnx)
    onnx_s = onnx_entry.get("export_s")
    return {
        "model": name,
        "input_shape": list(shape),
        "layers": trt_model.num_layers,
        "eager_forward_s": eager,
        "eager_forward_min_s": min(eager_runs),
        "conversion_s": conversion,
        "conversion_min_s": min(conv_runs),
        "conversion_runs_s": conv_runs,
        "first_conversion_s": first_s,  # the warm-up: includes importing the converters
        "conversion_stats": best_stats,
        "sim_run_s": sim,
        "engine_file_bytes": engine_bytes,
        "engine_save_s": statistics.median(save_runs),
        "engine_load_s": statistics.median(load_runs),
        "onnx_dynamo_export_s": onnx_s,
        "onnx": onnx_entry,
        "conversion_over_eager": conversion / eager,
        "conversion_over_eager_min": min(conv_runs) / min(eager_runs),
        "conversion_over_onnx_export": (conversion / onnx_s) if onnx_s else None,
        "sim_over_eager": sim / eager,
        "max_rel_err": err,
        "goals": {"conversion_over_eager": 3.0, "conversion_over_onnx_export": 0.1, "sim_over_eager": 1.5},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50"])
    p.add_argument("--shape", default="1x3x224x224")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--no-onnx", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    shape = tuple(int(d) for d in args.shape.split("x"))
    load_before = os.getloadavg()
    results = [bench(m, shape, args.repeat, not args.no_onnx) for m in args.models]
    load_after = os.getloadavg()
    report = {
        "command": "python benchmarks/bench_convert.py " + " ".join(
            [f"--models {' '.join(args.models)}", f"--shape {args.shape}", f"--repeat {args.repeat}"]
            + (["--no-onnx"] if args.no_onnx else [])
            + ([f"--out {args.out}"] if args.out else [])
        ),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": [round(v, 2) for v in load_before],  # 1, 5, 15 minutes
        "load_average_after": [round(v, 2) for v in load_after],
        "results": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
