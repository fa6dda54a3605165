"""Dynamic shapes: conversion time and sim run time of a dynamic-batch engine against the static one.

    python benchmarks/bench_dynamic.py --models resnet50 vit_b_16 bert --repeats 3

For each model (random weights, eval) it converts on the sim, alternating (static, dynamic, static,
dynamic, ...; one unrecorded warm-up round first):

  static:   torch2trt_lite.convert(model, xs, backend="sim")                      (batch 4)
  dynamic:  torch2trt_lite.convert(model, xs, backend="sim", max_batch_size=8)    (batch [1, 8], opt 4)

``convert_s`` is the whole conversion (trace, network definition, build, load) with ``verify=False``
(the verify step, on by default, runs the model and the engine at the range's min and max once more:
``verify_s`` reports it apart). ``run_s`` is the median time of one engine call at the opt shape
(batch 4) for each engine, the two engines alternating; ``*_cpu_s`` is this process's CPU time for the
same (less sensitive to other processes on a shared machine). Two goals are checked (on wall and CPU time):

  * conversion: dynamic convert_s <= 1.2 x static convert_s
  * run: dynamic run_s at the opt shape within 10% of the static engine's

It writes JSON (command, machine as bench_real_build describes it, per-model medians, goals) to
benchmarks/results/<date>-dynamic-cpu.json unless --out says otherwise, and prints a markdown
table. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import torch2trt_lite

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 4
MAX_BATCH = 8
GOAL_CONVERT_RATIO = 1.2
GOAL_RUN_RATIO = 1.1


def _resnet50() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    import torchvision

    return torchvision.models.resnet50().eval(), [torch.randn(BATCH, 3, 224, 224)]


def _vit_b_16() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    import torchvision

    return torchvision.models.vit_b_16().eval(), [torch.randn(BATCH, 3, 224, 224)]


class _Keywords(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> Any:
        return self.model(input_ids=ids, attention_mask=mask)


def _bert() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    import transformers

    model = _Keywords(transformers.BertModel(transformers.BertConfig())).eval()  # bert-base (12 layers, 768)
    ids = torch.randint(0, 30522, (BATCH, 128))
    mask = torch.ones(BATCH, 128, dtype=torch.int64)
    mask[:, -8:] = 0  # padding: transformers builds the mask (it skips an all-ones one by reading it)
    return model, [ids, mask]


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, list[torch.Tensor]]]] = {
    "resnet50": _resnet50, "vit_b_16": _vit_b_16, "bert": _bert,
}


def _runs(engines: dict[str, Any], xs: list[torch.Tensor], repeats: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds of one call of each engine, the engines alternating."""
    wall: dict[str, list[float]] = {k: [] for k in engines}
    cpu: dict[str, list[float]] = {k: [] for k in engines}
    for e in engines.values():
        e(*xs)  # warm-up
    for _ in range(repeats):
        for k, e in engines.items():
            t0, c0 = time.perf_counter(), time.process_time()
            e(*xs)
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return {k: {"wall_s": statistics.median(wall[k]), "cpu_s": statistics.median(cpu[k])} for k in engines}


def bench_model(name: str, repeats: int, runs: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, xs = MODELS[name]()
    times: dict[str, list[float]] = {"static": [], "dynamic": []}
    cpu: dict[str, list[float]] = {"static": [], "dynamic": []}
    engines: dict[str, Any] = {}
    with torch.no_grad():
        for k in range(repeats + 1):  # round 0: warm-up, not recorded
            for route in ("static", "dynamic"):
                gc.collect()
                extra: dict[str, Any] = {"max_batch_size": MAX_BATCH} if route == "dynamic" else {}
                t0, c0 = time.perf_counter(), time.process_time()
                engines[route] = torch2trt_lite.convert(model, xs, backend="sim", verify=False, progress=False, **extra)
                if k:
                    times[route].append(time.perf_counter() - t0)
                    cpu[route].append(time.process_time() - c0)
        t0 = time.perf_counter()
        torch2trt_lite.convert(model, xs, backend="sim", max_batch_size=MAX_BATCH, progress=False)
        verified_s = time.perf_counter() - t0
        run = _runs(engines, xs, runs)
    conv = {route: statistics.median(v) for route, v in times.items()}
    conv_cpu = {route: statistics.median(v) for route, v in cpu.items()}
    return {
        "inputs": [list(x.shape) for x in xs],
        "convert_s": conv,
        "convert_cpu_s": conv_cpu,
        "convert_all_s": times,
        "verify_s": verified_s - conv["dynamic"],
        "run": run,
        "convert_ratio": conv["dynamic"] / conv["static"],
        "convert_cpu_ratio": conv_cpu["dynamic"] / conv_cpu["static"],
        "run_ratio": run["dynamic"]["wall_s"] / run["static"]["wall_s"],
        "run_cpu_ratio": run["dynamic"]["cpu_s"] / run["static"]["cpu_s"],
        "layers": {route: int(e.metadata["num_layers"]) for route, e in engines.items()},
    }


def machine() -> dict[str, Any]:
    sys.path.insert(0, HERE)
    try:
        from bench_real_build import machine as base
    finally:
        sys.path.remove(HERE)
    info = base()
    info["loadavg"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--repeats", type=int, default=3, help="recorded conversions per route (after one warm-up)")
    ap.add_argument("--runs", type=int, default=10, help="engine calls timed per engine")
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/<date>-dynamic-cpu.json)")
    args = ap.parse_args(argv)
    results = {name: bench_model(name, args.repeats, args.runs) for name in args.models}
    goals = {
        name: {
            "convert": r["convert_ratio"] <= GOAL_CONVERT_RATIO,
            "convert_cpu": r["convert_cpu_ratio"] <= GOAL_CONVERT_RATIO,
            "run": r["run_ratio"] <= GOAL_RUN_RATIO,
            "run_cpu": r["run_cpu_ratio"] <= GOAL_RUN_RATIO,
        }
        for name, r in results.items()
    }
    out = {
        "command": " ".join([os.path.basename(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "batch": BATCH,
        "max_batch_size": MAX_BATCH,
        "goals": {"convert_ratio_max": GOAL_CONVERT_RATIO, "run_ratio_max": GOAL_RUN_RATIO, "met": goals},
        "models": results,
    }
    path = args.out or os.path.join(HERE, "results", f"{out['date']}-dynamic-cpu.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print("| model | static convert s | dynamic convert s | ratio (cpu) | static run s | dynamic run s | ratio (cpu) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        c, rn = r["convert_s"], r["run"]
        print(f"| {name} | {c['static']:.2f} | {c['dynamic']:.2f} | {r['convert_ratio']:.2f} ({r['convert_cpu_ratio']:.2f}) | "
              f"{rn['static']['wall_s']:.3f} | {rn['dynamic']['wall_s']:.3f} | {r['run_ratio']:.2f} "
              f"({r['run_cpu_ratio']:.2f}) |")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
