"""Differential fuzzing of the torch.compile backend: random programs of in-place writes (module
buffers, the caller's input, tensors the graph makes, views), size arithmetic and an op without a
converter (PyTorch between engines), compiled with ``backend="torch2trt_lite"`` (sim engines) and
compared with eager PyTorch at four batch sizes: outputs, the caller's input after the call, and the
module's buffer.

    python tools/fuzz_compile.py --count 1000 --seed 0 --out report.json

The programs are ``tests/compile/test_writes_order.py``'s (``Steps``; CI runs 40 of them). Outcomes:
``match``; ``silent`` (an output, the input or the buffer differs from eager: a bug); ``foreign`` (the
compiled call raised where eager did not). The JSON holds the counts, the machine and every failure
with its program.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import platform
import random
import sys
import time
import warnings
from typing import Any

import torch
import torch._dynamo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_program(seed: int) -> dict[str, Any]:
    """One random program through the backend; its outcome record."""
    from torch2trt_lite.compile import compile_backend, compile_report

    programs = importlib.import_module("tests.compile.test_writes_order")  # NOTE: by name: tests is no package of ours
    rng = random.Random(seed)
    steps = [rng.choice(programs.STEPS) for _ in range(rng.randint(2, 7))]
    outs = sorted(rng.sample(range(len(steps) + 1), k=min(len(steps) + 1, rng.randint(1, 3))))
    dynamic = rng.choice([None, True])
    record: dict[str, Any] = {"seed": seed, "steps": steps, "outputs": outs, "dynamic": dynamic}
    eager = programs.Steps(steps, outs, seed).eval()
    model = copy.deepcopy(eager)
    torch._dynamo.reset()
    compile_report(clear=True)
    compiled = torch.compile(model, backend=compile_backend(backend="sim", min_block_size=1), dynamic=dynamic)
    for b in (4, 3, 4, 2):
        x = torch.randn(b, 6, generator=torch.Generator().manual_seed(seed * 7 + b))
        x_eager, x_compiled = x.clone(), x.clone()
        with torch.no_grad():
            want = eager(x_eager)
            try:
                got = compiled(x_compiled)
            except Exception as e:  # noqa: BLE001 - the fuzzer's job is to report these
                return record | {"outcome": "foreign", "batch": b, "detail": f"{type(e).__name__}: {e}"[:500]}
        for name, g, w, tol in [(f"output {i}", g, w, 1e-4) for i, (g, w) in enumerate(zip(got, want, strict=True))] + [
                ("the input", x_compiled, x_eager, 0.0), ("the buffer", model.buf, eager.buf, 1e-4)]:
            if g.shape != w.shape or not torch.allclose(g, w, rtol=tol, atol=tol, equal_nan=True):
                detail = f"{name}: shape {tuple(g.shape)} vs {tuple(w.shape)}" if g.shape != w.shape else \
                    f"{name}: max abs diff {(g - w).abs().max().item():.3g}"
                return record | {"outcome": "silent", "batch": b, "detail": detail, "report": str(compile_report())[:3000]}
    return record | {"outcome": "match"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--count", type=int, default=300, help="programs")
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed (then seed + 1, ...)")
    ap.add_argument("--out", help="write the JSON report here")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    records = [run_program(s) for s in range(args.seed, args.seed + args.count)]
    counts: dict[str, int] = {}
    for r in records:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    report = {
        "programs": args.count, "seed": args.seed, "seconds": round(time.perf_counter() - t0, 1), "outcomes": counts,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "engines": "sim (TensorRT API on torch), not TensorRT"},
        "failures": [r for r in records if r["outcome"] != "match"],
    }
    print(json.dumps({k: report[k] for k in ("programs", "seed", "seconds", "outcomes")}))
    for r in report["failures"][:20]:
        print(r["outcome"], r["seed"], r["steps"], r["outputs"], r.get("detail", ""))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
