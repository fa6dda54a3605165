"""``torch2trt-lite convert``, ``check`` and ``info``: convert a model and write its engine file, list
the calls no converter handles, print an engine file's header."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from torch2trt_lite.cli.models import (
    add_model_arguments,
    add_precision_arguments,
    model_and_inputs,
    parse_range,
    precision_options,
)
from torch2trt_lite.convert import check, convert
from torch2trt_lite.runtime import engine_file
from torch2trt_lite.tools.metrics import max_rel_err
from torch2trt_lite.trace.shapes import Input


def _say(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "json", False):
        print(f"torch2trt-lite: {text}", file=sys.stderr, flush=True)


def cmd_convert(args: argparse.Namespace) -> int:
    model, xs = model_and_inputs(args)
    _say(args, f"converting {args.model} on backend {args.backend} ...")
    t0 = time.perf_counter()
    with torch.no_grad():
        ref = model(*xs)
    eager_s = time.perf_counter() - t0
    caps = [c for arg in args.compute_capability or [] for c in arg.split(",") if c]
    specs = _specs(args, xs)
    trt_model = convert(
        model, specs, backend=args.backend, compute_capabilities=caps or None, max_batch_size=args.max_batch_size,
        progress=args.progress, cache_dir=args.cache_dir, timing_cache=args.timing_cache, **precision_options(args),
        refittable=args.refittable, strip_weights=args.strip_weights, truncate_double=args.truncate_double,
    )
    report: dict[str, Any] = {
        "model": args.model,
        "backend": trt_model.backend,
        "trt_version": trt_model.metadata["trt_version"],
        "layers": trt_model.num_layers,
        "conversion_s": round(trt_model.conversion_time_s or 0.0, 4),
        "eager_forward_s": round(eager_s, 4),
    }
    report["precision"] = trt_model.precision["precision"]
    if trt_model.metadata.get("compute_capabilities"):
        report["compute_capabilities"] = trt_model.metadata["compute_capabilities"]
    if trt_model.runnable:
        device = "cuda" if trt_model.backend != "sim" else "cpu"
        report["max_rel_err"] = max_rel_err(trt_model(*[x.to(device) for x in xs]), ref)
    else:
        report["max_rel_err"] = "not run: the engine needs a supported NVIDIA GPU (none here)"
    if args.output:
        trt_model.save(args.output, weights=not args.strip_weights)
        report["engine"] = args.output
    if args.plan:
        trt_model.save_plan(args.plan)
        report["plan"] = args.plan
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k:>16}: {v}" for k, v in report.items()))
    return 0


def _specs(args: argparse.Namespace, xs: list[torch.Tensor]) -> list[Any]:
    """The example tensors, each whose --shape holds a range (MIN-MAX or MIN-OPT-MAX) as an Input."""
    specs: list[Any] = list(xs)
    for i, (text, x) in enumerate(zip(args.shape, xs, strict=True)):
        mn, op, mx = parse_range(text)
        if mn != mx:
            specs[i] = Input(mn, op, mx, dtype=x.dtype, example=x)
    return specs


def cmd_check(args: argparse.Namespace) -> int:
    model, xs = model_and_inputs(args)
    if args.compile:
        return _check_compiled(args, model, xs)
    report = check(model, _specs(args, xs), max_batch_size=args.max_batch_size)
    print(report)
    if report.dynamic:
        print(f"{len(report.dynamic)} of them refuse a dynamic size")
    return 0 if report.ok else 1


def _check_compiled(args: argparse.Namespace, model: Any, xs: list[torch.Tensor]) -> int:
    """``check --compile``: one call through ``torch.compile(backend="torch2trt_lite")``, then its report
    (a --shape range marks that dim dynamic with its bounds); exit 1 where an op runs in PyTorch, also
    at a graph break or where dynamo compiled no graph."""
    import torch._dynamo

    from torch2trt_lite.compile import compile_backend, compile_report

    def dynamic(x: torch.Tensor, d: int, lo: int, hi: int) -> None:
        if x.shape[d] >= 2:  # NOTE: dynamo specializes sizes 0 and 1: such an example stays static there
            torch._dynamo.mark_dynamic(x, d, min=max(lo, 2), max=hi)

    for text, x in zip(args.shape, xs, strict=True):
        mn, _, mx = parse_range(text)
        for d, (a, b) in enumerate(zip(mn, mx, strict=True)):
            if a != b:
                dynamic(x, d, a, b)
    if args.max_batch_size:
        for x in xs:
            dynamic(x, 0, 1, args.max_batch_size)
    compile_report(clear=True)
    with torch._dynamo.config.patch(allow_rnn=args.allow_rnn), torch.no_grad():
        torch.compile(model, backend=compile_backend(backend=args.backend))(*xs)
    report = compile_report()
    print(report)
    whole = report.graphs and not report.graph_breaks  # NOTE: at a graph break, Python runs (torch ops too)
    return 0 if whole and all(g.trt_ops == g.ops - g.output_views for g in report.graphs) else 1


def cmd_info(args: argparse.Namespace) -> int:
    meta, plan = engine_file.read(args.engine)
    layers = meta.get("layers", [])
    meta = {k: v for k, v in meta.items() if k not in ("out_tree", "layers")}
    if isinstance(meta.get("refit"), dict):  # the recipes are for refit, not for reading: a summary
        rec = meta["refit"]
        meta["refit"] = {"weights": len(rec.get("weights", [])), **{k: rec[k] for k in
                         ("stripped", "identical", "fingerprint", "frozen") if k in rec}}
    if layers:
        counts: dict[str, int] = {}
        for _, _, dts in layers:
            for d in dts:
                counts[d] = counts.get(d, 0) + 1
        meta["layer_output_types"] = dict(sorted(counts.items()))
        if args.layers:
            meta["layers"] = layers
    print(json.dumps(meta, indent=2))
    return 0


def add_parsers(sub: Any) -> None:
    """Add the ``convert``, ``check`` and ``info`` subcommands to ``sub`` (of ``add_subparsers``)."""
    helps = {"convert": "convert a model and write its engine file", "check": "list the calls no converter handles"}
    for name, fn in (("convert", cmd_convert), ("check", cmd_check)):
        s = sub.add_parser(name, help=helps[name], description=helps[name])
        add_model_arguments(s)
        if name == "convert":
            s.add_argument("--backend", default="auto", choices=["auto", "sim", "tensorrt", "tensorrt-rtx"],
                           help="engine backend (default auto: TensorRT, else TensorRT-RTX, on a GPU; else the sim)")
            s.add_argument("--compute-capability", action="append", metavar="CC",
                           help="TensorRT-RTX target GPUs, e.g. sm86 or 8.6,8.9 or current (repeatable)")
            s.add_argument("-o", "--output", help="write the engine file (header + plan) here")
            s.add_argument("--plan", help="also write the bare TensorRT plan here (for trtexec, Triton, C++)")
            s.add_argument("--json", action="store_true", help="print the report as JSON (and nothing else)")
            s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                           help="show the build's progress (default: when stderr is a terminal)")
            s.add_argument("--cache-dir", help="reuse engines built before from this folder (keyed by model, "
                           "inputs, options and backend)")
            s.add_argument("--timing-cache", help="TensorRT's kernel timing cache file, read and written")
            s.add_argument("--refittable", action="store_true",
                           help="an engine whose weights `refit` replaces without a rebuild")
            s.add_argument("--strip-weights", action="store_true",
                           help="write the engine file without its weights (load it with weights=; see README)")
            s.add_argument("--truncate-double", action=argparse.BooleanOptionalAction, default=None,
                           help="float64 computed in float32, outputs too (default: intermediates only, with a "
                           "warning; --no-truncate-double refuses float64)")
            add_precision_arguments(s)
        if name == "check":
            s.add_argument("--compile", action="store_true",
                           help="run the model once through torch.compile(backend='torch2trt_lite') and print "
                           "what runs where: graph breaks, blocks, the ops kept in PyTorch and why")
            s.add_argument("--backend", default="auto", choices=["auto", "sim", "tensorrt", "tensorrt-rtx"],
                           help="with --compile: the blocks' engine backend (default auto)")
            s.add_argument("--allow-rnn", action="store_true",
                           help="with --compile: torch._dynamo.config.allow_rnn=True (dynamo then traces nn.LSTM/"
                           "GRU/RNN, which convert, instead of leaving them and their frame to Python)")
        s.add_argument("--max-batch-size", type=int, metavar="N",
                       help="dim 0 of every input ranges over [1, N] (torch2trt's max_batch_size)")
        s.set_defaults(fn=fn)
    s = sub.add_parser("info", help="print an engine file's header", description="print an engine file's header")
    s.add_argument("engine", help="an engine file written by convert -o or TRTModule.save")
    s.add_argument("--layers", action="store_true", help="also list every layer with its output types")
    s.set_defaults(fn=cmd_info)


__all__ = ["add_parsers", "cmd_check", "cmd_convert", "cmd_info"]
