"""Share of each zoo model's ops that ``torch.compile(backend="torch2trt_lite")`` runs in TensorRT.

    python benchmarks/bench_compile.py --out benchmarks/results/2026-12-06-compile-cpu/compile-zoo.json
    python benchmarks/bench_compile.py --models tv_resnet18 hf_bert --out /tmp/some.json
    python benchmarks/bench_compile.py --models lstm_gru_sequence --allow-rnn --update --out ...

For each model of the zoo (``tests/zoo/test_zoo.py``'s ``ZOO``: its inputs, random weights, eval):
``torch.compile(model, backend=compile_backend(backend="sim"))`` once under ``torch.no_grad()``:
the maximum absolute and relative error against eager over every output, the number of graphs
and graph breaks, the share of ops in TensorRT (100 % is expected where ``convert`` succeeds: the
zoo's ``xfail`` field, checked by ``tests/zoo``, says where it does not), the ops that ran in
PyTorch with the reason, and the backend's conversion time. The JSON (with the machine
description) is rewritten after every model. The engines are the sim's (TensorRT's API executed
with torch ops), not TensorRT. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
from typing import Any

import torch
import torch._dynamo
import torchvision
from torch.utils._pytree import tree_flatten

import torch2trt_lite
from torch2trt_lite.compile import compile_backend, compile_report


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "python": sys.version.split()[0], "torch": torch.__version__,
        "torchvision": torchvision.__version__, "torch2trt_lite": torch2trt_lite.__version__,
        "engines": "sim (TensorRT API on torch), not TensorRT", "load_avg": os.getloadavg(),
    }


def _leaves(out: Any) -> list[torch.Tensor]:
    if hasattr(out, "to_tuple"):  # a Hugging Face ModelOutput
        out = out.to_tuple()
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def run(zoo: Any, allow_rnn: bool = False) -> dict[str, Any]:
    torch.manual_seed(0)
    model = zoo.build().eval()
    xs = zoo.inputs()
    out: dict[str, Any] = {"model": zoo.name, "inputs": [list(x.shape) for x in xs],
                           "convert": f"fails: {zoo.xfail}" if zoo.xfail else "ok (tests/zoo)",
                           "allow_rnn": allow_rnn}
    torch._dynamo.reset()
    compile_report(clear=True)
    fn = torch.compile(model, backend=compile_backend(backend="sim"))
    t0 = time.perf_counter()
    try:
        with torch._dynamo.config.patch(allow_rnn=allow_rnn), torch.no_grad():
            got, want = _leaves(fn(*xs)), _leaves(model(*xs))
    except Exception as e:  # noqa: BLE001 - recorded: a benchmark goes on with the next model
        out["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        return out
    out["first_call_s"] = round(time.perf_counter() - t0, 3)
    report = compile_report()
    errs = [((g.float() - w.float()).abs().max().item() if g.numel() else 0.0,
             max(w.float().abs().max().item(), 1e-12) if w.numel() else 1.0) for g, w in zip(got, want, strict=True)]
    out.update({
        "outputs": len(want), "same_shapes": all(g.shape == w.shape for g, w in zip(got, want, strict=True)),
        "max_abs_err": max((a for a, _ in errs), default=0.0), "max_rel_err": max((a / m for a, m in errs), default=0.0),
        "graphs": len(report.graphs), "graph_breaks": report.graph_breaks, "share_in_tensorrt": report.share,
        "ops": sum(g.ops for g in report.graphs), "trt_ops": sum(g.trt_ops for g in report.graphs),
        "output_views": sum(g.output_views for g in report.graphs),
        "engines": sum(g.engines() for g in report.graphs),
        "conversion_s": round(sum(g.conversion_s for g in report.graphs), 3),
        "pytorch_ops": [{"op": o.op, "reason": o.reason[:200]} for g in report.graphs for o in g.pytorch_ops],
        "runtime_fallbacks": [p.runtime_fallback for g in report.graphs for p in g.partitions if p.runtime_fallback],
    })
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="*", help="zoo names (default: the whole zoo)")
    p.add_argument("--out", required=True)
    p.add_argument("--update", action="store_true",
                   help="keep the other models' results already in --out (rerun only --models)")
    p.add_argument("--allow-rnn", action="store_true",
                   help="torch._dynamo.config.allow_rnn=True: dynamo traces nn.LSTM/GRU/RNN (torch.lstm, ...) "
                        "instead of breaking the graph there")
    args = p.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ZOO = importlib.import_module("tests.zoo.test_zoo").ZOO  # NOTE: by name: mypy checks the package, not the tests

    by_name = {z.name: z for z in ZOO}
    zoo = [by_name[m] for m in args.models] if args.models else list(ZOO)  # in the order given
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    results: list[dict[str, Any]] = []
    started = datetime.datetime.now(datetime.timezone.utc).isoformat()
    if args.update and os.path.exists(args.out):
        with open(args.out) as f:
            before = json.load(f)
        started = before.get("date_started", started)
        results = [r for r in before["results"] if r["model"] not in {z.name for z in zoo}]
    for z in zoo:
        r = run(z, args.allow_rnn)
        print(json.dumps({k: r.get(k) for k in ("model", "convert", "share_in_tensorrt", "max_rel_err", "graphs",
                                                 "error")}), flush=True)
        results.append(r)
        results.sort(key=lambda r: [x.name for x in ZOO].index(r["model"]))
        with open(args.out, "w") as f:
            json.dump({"date_started": started, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "machine": machine(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
