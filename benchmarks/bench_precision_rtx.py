"""Every precision variant of resnet50, vit_b_16 and BertModel built by the real TensorRT-RTX builder
(issue 11): fp16, bf16, INT8 and FP8 (``torch2trt_lite.quantize``, max calibration on two batches of the
example), and INT8 with ``precision="fp16"``. Records, per variant, whether it built (or the builder's
refusal, quoted), trace and build seconds, plan bytes and the layer output types. No engine runs here:
running them needs a supported NVIDIA GPU.

    .venv/bin/python benchmarks/bench_precision_rtx.py [-o benchmarks/results/<date>-precision-rtx.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections import Counter
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch2trt_lite  # noqa: E402
from torch2trt_lite.tools.bench import machine_info  # noqa: E402

VARIANTS = [("fp16", None), ("bf16", None), ("fp32", "int8"), ("fp32", "fp8"), ("fp16", "int8")]


def models() -> list[tuple[str, torch.nn.Module, list[torch.Tensor]]]:
    import torchvision
    import transformers

    torch.manual_seed(0)
    mask = torch.ones(1, 128, dtype=torch.long)
    mask[0, -8:] = 0  # padding: transformers applies the mask (it skips an all-ones one)
    return [
        ("resnet50", torchvision.models.resnet50().eval(), [torch.randn(1, 3, 224, 224)]),
        ("vit_b_16", torchvision.models.vit_b_16().eval(), [torch.randn(1, 3, 224, 224)]),
        ("BertModel", transformers.BertModel(transformers.BertConfig()).eval(),
         [torch.randint(0, 30000, (1, 128)), mask]),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", default=None)
    args = p.parse_args()
    rows: list[dict[str, Any]] = []
    for name, model, xs in models():
        for precision, quant in VARIANTS:
            row: dict[str, Any] = {"model": name, "precision": precision, "quantization": quant}
            t0 = time.perf_counter()
            try:
                m: Any = model
                if quant is not None:
                    batches = [tuple(xs)] * 2 if len(xs) > 1 else [xs[0]] * 2
                    m = torch2trt_lite.quantize(model, batches, dtype=quant, method="max", progress=False)
                    row["quantize_s"] = round(time.perf_counter() - t0, 3)
                trt = torch2trt_lite.convert(m, xs, backend="tensorrt-rtx", precision=precision, progress=False)
                stats = trt.conversion_stats or {}
                row.update({
                    "built": True, "trace_s": round(stats.get("trace_s", 0.0), 3), "build_s": round(stats.get("build_s", 0.0), 3),
                    "plan_bytes": len(trt.plan), "layers": trt.num_layers,
                    "layer_output_types": dict(Counter(d for _, _, dts in trt.layer_precisions() for d in dts)),
                })
            except torch2trt_lite.Torch2TRTError as e:
                row.update({"built": False, "error": f"{type(e).__name__}: {e}"[:2000]})
            print(json.dumps(row), flush=True)
            rows.append(row)
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"{day}-precision-rtx.json")
    doc = {"command": "python benchmarks/bench_precision_rtx.py", "date": day, "machine": machine_info(),
           "note": "built by TensorRT-RTX on a CPU-only machine; no engine was run (no GPU)", "results": rows}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
