"""Real TensorRT-RTX builds: the direct route against torch.onnx.export + TensorRT-RTX's ONNX parser.

    python benchmarks/bench_real_build.py --models resnet50 vit_b_16 mobilenet_v3_large bert_base --repeats 3

For each model (random weights, eval, batch 1) it runs three routes in one process, alternating
(A, B, C, A, B, C, ...; one unrecorded warm-up round first), each ending in a serialized engine:

  direct:   torch2trt_lite.convert(model, [x], backend="tensorrt-rtx")
            before_build_s = trace + network definition (conversion_time_s - build_s - load_s)
  dynamo:   torch.onnx.export(dynamo=True) to memory, trt.OnnxParser.parse, build_serialized_network
  torchscript: the same with torch.onnx.export(dynamo=False)
            before_build_s = export_s + parse_s

Every builder gets the same config (the 1 GiB workspace ``convert`` sets) and a strongly typed
network. Times are wall-clock medians of --repeats runs; ``*_cpu_s`` is this process's CPU time for
the same phase (less sensitive to other processes on a shared machine; the builder is
multi-threaded, so it can exceed the wall time). It also records each network's layer count and
layer mix (LayerType, with the elementwise / unary / activation / reduce operation; constants and
their bytes) and each plan's size, and checks three goals:

  * before_build: direct before_build_s <= 0.2 x the faster ONNX route's export + parse
  * build: the builder takes no longer on the direct network than on the dynamo-ONNX one
  * layers: the direct network has no more layers than the dynamo-ONNX one

It writes JSON (command, machine with load averages and versions, per-model medians, goals) to
benchmarks/results/<date>-real-build-cpu.json unless --out says otherwise, and prints a markdown
table. Benchmarks are not tests: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gc
import io
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

import torch2trt_lite

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = ("direct", "dynamo", "torchscript")
WORKSPACE = 1 << 30  # convert()'s default max_workspace_size: every route builds with the same config
GOAL_BEFORE_BUILD_RATIO = 0.2


# ------------------------------------------------------------------------------------- models
def _nontrivial(model: torch.nn.Module) -> torch.nn.Module:
    """As bench_convert: parameters initialised to one repeated value (norm weights, zero biases)
    get random values, so no exporter can drop or merge them as trivial."""
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.normal_(0, 0.02)
    return model.eval()


def _torchvision(name: str) -> Callable[[], tuple[torch.nn.Module, list[torch.Tensor]]]:
    def make() -> tuple[torch.nn.Module, list[torch.Tensor]]:
        import torchvision

        model = torchvision.models.get_model(name, weights=None)
        return _nontrivial(model), [torch.randn(1, 3, 224, 224)]

    return make


class _HFText(torch.nn.Module):
    """A Hugging Face encoder called with (input_ids, attention_mask); returns plain tensors."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


def _bert(seq: int, **config: Any) -> Callable[[], tuple[torch.nn.Module, list[torch.Tensor]]]:
    def make() -> tuple[torch.nn.Module, list[torch.Tensor]]:
        import transformers

        cfg = transformers.BertConfig(**config)  # random weights: nothing is downloaded
        model = _HFText(transformers.BertModel(cfg))
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=g, dtype=torch.int64)
        mask = torch.ones(1, seq, dtype=torch.int64)
        mask[:, -seq // 8:] = 0  # a padded tail: the mask is not trivial
        return _nontrivial(model), [ids, mask]

    return make


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, list[torch.Tensor]]]] = {
    "resnet50": _torchvision("resnet50"),
    "vit_b_16": _torchvision("vit_b_16"),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
    "bert_base": _bert(128),  # BertConfig's defaults: bert-base-uncased (12 layers, 768 wide)
    "bert_tiny": _bert(128, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
}


# ------------------------------------------------------------------------------------ machine
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except ImportError:
        return None
    return str(getattr(mod, "__version__", None))


def machine() -> dict[str, Any]:
    """bench_convert's description, plus the CPU model and the exporter and builder versions."""
    sys.path.insert(0, HERE)
    try:
        from bench_convert import machine as base
    finally:
        sys.path.remove(HERE)
    info = base()
    info.update({
        "cpu_model": _cpu_model(),
        "affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "tensorrt_rtx": _version("tensorrt_rtx"),
        "onnx": _version("onnx"),
        "onnxscript": _version("onnxscript"),
        "transformers": _version("transformers"),
    })
    return info


# ------------------------------------------------------------------------------- layer mix
def _op_name(trt: Any, layer: Any) -> str:
    """``LayerType`` name, with the operation for elementwise / unary / activation / reduce layers."""
    kind = str(layer.type.name)
    classes = {
        "ELEMENTWISE": ("IElementWiseLayer", "op"), "UNARY": ("IUnaryLayer", "op"),
        "ACTIVATION": ("IActivationLayer", "type"), "REDUCE": ("IReduceLayer", "op"),
    }
    if kind in classes:
        cls, attr = classes[kind]
        layer.__class__ = getattr(trt, cls)  # NOTE: get_layer returns the ILayer base; this is TensorRT's idiom
        kind += ":" + str(getattr(layer, attr).name)
    return kind


def layer_mix(trt: Any, network: Any) -> dict[str, Any]:
    """What is in ``network``: layers by type (and op), constants (count, bytes, shapes), output dtypes."""
    kinds: collections.Counter[str] = collections.Counter()
    dtypes: collections.Counter[str] = collections.Counter()
    const_shapes: collections.Counter[str] = collections.Counter()
    const_bytes = 0
    for i in range(int(network.num_layers)):
        layer = network.get_layer(i)
        kinds[_op_name(trt, layer)] += 1
        if layer.type == trt.LayerType.CONSTANT:
            layer.__class__ = trt.IConstantLayer
            w = layer.weights
            const_bytes += int(getattr(w, "nbytes", 0) or 0)
            const_shapes["x".join(str(d) for d in layer.shape) or "scalar"] += 1
        for j in range(int(layer.num_outputs)):
            dtypes[str(layer.get_output(j).dtype.name)] += 1
    return {
        "num_layers": int(network.num_layers),
        "by_type": dict(sorted(kinds.items())),
        "constants": sum(const_shapes.values()),
        "constant_bytes": const_bytes,
        "constant_shapes": dict(const_shapes.most_common(12)),
        "output_dtypes": dict(sorted(dtypes.items())),
    }


# ------------------------------------------------------------------------------------- routes
class _Clock:
    """Wall and process-CPU time of a phase."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


def run_direct(model: torch.nn.Module, inputs: list[torch.Tensor]) -> dict[str, Any]:
    clock = _Clock()
    m = torch2trt_lite.convert(model, inputs, backend="tensorrt-rtx")
    _, cpu = clock.lap()
    st = m.conversion_stats
    total = float(m.conversion_time_s or 0.0)
    before = total - st["build_s"] - st["load_s"]
    return {
        "trace_s": st["trace_s"],
        "network_s": before - st["trace_s"],  # everything before the build but the traced forward
        "before_build_s": before,
        "build_s": st["build_s"],
        "total_s": before + st["build_s"],
        "convert_cpu_s": cpu,  # the whole convert() call, loading the plan included
        "layers": int(m.num_layers),
        "plan_bytes": len(m.plan),
    }


def run_onnx(
    model: torch.nn.Module, inputs: list[torch.Tensor], trt: Any, logger: Any, dynamo: bool,
    keep: list[Any] | None = None,
) -> dict[str, Any]:
    buf = io.BytesIO()
    clock = _Clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # NOTE: typed as a path, but a file object works and keeps a disk write out of the timing
        torch.onnx.export(model, tuple(inputs), buf, dynamo=dynamo, verbose=False)  # type: ignore[arg-type]
    export_s, export_cpu = clock.lap()
    data = buf.getvalue()
    del buf
    builder = trt.Builder(logger)
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    network = builder.create_network(0 if flag is None else 1 << int(flag))
    parser = trt.OnnxParser(network, logger)
    clock.lap()
    ok = parser.parse(data)
    parse_s, parse_cpu = clock.lap()
    if not ok:
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"the ONNX parser refused the {'dynamo' if dynamo else 'TorchScript'} export: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE)
    clock.lap()
    plan = builder.build_serialized_network(network, config)
    build_s, build_cpu = clock.lap()
    if plan is None:
        raise RuntimeError("TensorRT-RTX could not build the ONNX-parsed network")
    if keep is not None:
        keep[:] = [builder, network, parser]
    return {
        "export_s": export_s,
        "parse_s": parse_s,
        "before_build_s": export_s + parse_s,
        "build_s": build_s,
        "total_s": export_s + parse_s + build_s,
        "export_cpu_s": export_cpu,
        "parse_cpu_s": parse_cpu,
        "build_cpu_s": build_cpu,
        "onnx_bytes": len(data),
        "layers": int(network.num_layers),
        "plan_bytes": int(plan.nbytes),
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in runs[0]:
        vals = [r[k] for r in runs]
        if isinstance(vals[0], float):
            out[k] = statistics.median(vals)
            out[k + "_runs"] = [round(v, 4) for v in vals]
        else:
            out[k] = vals[0] if all(v == vals[0] for v in vals) else vals
    return out


def bench(name: str, repeats: int, routes: list[str]) -> dict[str, Any]:
    import tensorrt_rtx as trt

    logger = trt.Logger(trt.Logger.ERROR)
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    fns: dict[str, Callable[..., dict[str, Any]]] = {
        "direct": lambda keep=None: run_direct(model, inputs),
        "dynamo": lambda keep=None: run_onnx(model, inputs, trt, logger, True, keep),
        "torchscript": lambda keep=None: run_onnx(model, inputs, trt, logger, False, keep),
    }
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in routes}
    errors: dict[str, str] = {}
    # NOTE: no torch.no_grad() here: convert() sets it itself, and under no_grad nn.MultiheadAttention
    # takes its fused fast path (aten::_native_multi_head_attention), which the TorchScript exporter refuses
    for rep in range(repeats + 1):  # round 0 warms up (imports, first-call costs) and is not kept
        for r in routes:
            if r in errors:
                continue
            gc.collect()
            try:
                res = fns[r]()
            except Exception as e:  # noqa: BLE001 (a route that fails is reported, the others still run)
                errors[r] = f"{type(e).__name__}: {str(e)[:500]}"
                continue
            if rep:
                runs[r].append(res)
            print(f"  {name} {r} round {rep}: before_build {res['before_build_s']:.3f} s, "
                  f"build {res['build_s']:.3f} s", file=sys.stderr)
    mixes: dict[str, Any] = {}
    for r in routes:
        if r in errors:
            continue
        gc.collect()
        if r == "direct":
            define = getattr(torch2trt_lite, "define_network", None)
            if define is not None:
                d = define(model, inputs, backend="tensorrt-rtx")
                mixes[r] = layer_mix(trt, d.network)
                del d
        else:
            keep: list[Any] = []
            fns[r](keep)
            mixes[r] = layer_mix(trt, keep[1])
            del keep
    result: dict[str, Any] = {
        "model": name,
        "inputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")} for x in inputs],
        "parameters": sum(p.numel() for p in model.parameters()),
        "routes": {r: _median(v) for r, v in runs.items() if v},
        "layer_mix": mixes,
        "errors": errors,
    }
    result["goals"] = goals(result["routes"])
    return result


def goals(routes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    direct = routes.get("direct")
    onnx = {r: routes[r] for r in ("dynamo", "torchscript") if r in routes}
    if direct is None or not onnx:
        return {}
    fastest = min(onnx, key=lambda r: onnx[r]["before_build_s"])
    ratio = direct["before_build_s"] / onnx[fastest]["before_build_s"]
    out: dict[str, Any] = {
        "before_build": {
            "holds": ratio <= GOAL_BEFORE_BUILD_RATIO, "goal": GOAL_BEFORE_BUILD_RATIO, "ratio": round(ratio, 4),
            "direct_s": round(direct["before_build_s"], 4), "onnx_route": fastest,
            "onnx_s": round(onnx[fastest]["before_build_s"], 4),
        },
    }
    if "dynamo" in onnx:
        dyn = onnx["dynamo"]
        out["build"] = {
            "holds": direct["build_s"] <= dyn["build_s"], "direct_s": round(direct["build_s"], 4),
            "dynamo_s": round(dyn["build_s"], 4), "ratio": round(direct["build_s"] / dyn["build_s"], 4),
        }
        out["layers"] = {"holds": direct["layers"] <= dyn["layers"], "direct": direct["layers"],
                         "dynamo": dyn["layers"]}
    if "torchscript" in onnx:
        ts = onnx["torchscript"]
        out["build_vs_torchscript"] = {
            "holds": direct["build_s"] <= ts["build_s"], "direct_s": round(direct["build_s"], 4),
            "torchscript_s": round(ts["build_s"], 4),
        }
    return out


# ------------------------------------------------------------------------------------ report
def _mark(goal: dict[str, Any]) -> str:
    return "yes" if goal.get("holds") else "no"


def table(results: list[dict[str, Any]]) -> str:
    head = ("| model | route | before build s | (trace / export s) | (network / parse s) | build s | total s "
            "| layers | plan MB |")
    lines = [head, "|" + "---|" * 9]
    for res in results:
        for r, v in res["routes"].items():
            a, b = (v["trace_s"], v["network_s"]) if r == "direct" else (v["export_s"], v["parse_s"])
            lines.append(
                f"| {res['model']} | {r} | {v['before_build_s']:.3f} | {a:.3f} | {b:.3f} | {v['build_s']:.3f} "
                f"| {v['total_s']:.3f} | {v['layers']} | {v['plan_bytes'] / 1e6:.1f} |"
            )
        for r, e in res["errors"].items():
            lines.append(f"| {res['model']} | {r} | failed: {e[:80]} | | | | | | |")
    lines += ["", "| model | before build: direct / fastest ONNX (goal <= 0.2) | build: direct / dynamo (goal <= 1) "
              "| layers: direct / dynamo |", "|---|---|---|---|"]
    for res in results:
        g = res["goals"]
        bb, bu, la = g.get("before_build", {}), g.get("build", {}), g.get("layers", {})
        lines.append(
            f"| {res['model']} | {bb.get('ratio', float('nan')):.3f} ({bb.get('onnx_route')}) {_mark(bb)} "
            f"| {bu.get('ratio', float('nan')):.3f} {_mark(bu)} | {la.get('direct')} / {la.get('dynamo')} {_mark(la)} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "vit_b_16", "mobilenet_v3_large", "bert_base"],
                   choices=sorted(MODELS))
    p.add_argument("--routes", nargs="+", default=list(ROUTES), choices=ROUTES)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None,
                   help="JSON path (default benchmarks/results/<date>-real-build-cpu.json)")
    args = p.parse_args()
    out = args.out or os.path.join(HERE, "results", f"{datetime.date.today().isoformat()}-real-build-cpu.json")
    load_before = os.getloadavg()
    results = []
    for name in args.models:
        results.append(bench(name, args.repeats, list(args.routes)))
        print(f"{name} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    load_after = os.getloadavg()
    report = {
        "command": " ".join(["python", "benchmarks/bench_real_build.py", "--models", *args.models,
                             "--routes", *args.routes, "--repeats", str(args.repeats)]
                            + (["--out", args.out] if args.out else [])),
        "argv": sys.argv,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": [round(v, 2) for v in load_before],  # 1, 5, 15 minutes
        "load_average_after": [round(v, 2) for v in load_after],
        "notes": "wall-clock medians; *_cpu_s is process CPU time; round 0 of each model is a warm-up",
        "results": results,
        "all_goals": {
            key: all(r["goals"].get(key, {}).get("holds", False) for r in results)
            for key in ("before_build", "build", "layers")
        },
    }
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(json.dumps(report, indent=2) + "\n")
    print(table(results))
    print(f"\nall goals: {report['all_goals']}; wrote {out}")


if __name__ == "__main__":
    main()
