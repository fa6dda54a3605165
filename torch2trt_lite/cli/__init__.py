"""Command line: ``torch2trt-lite convert|check|info``.

    torch2trt-lite convert torchvision:resnet18 --shape 1x3x224x224 [--backend sim|tensorrt|tensorrt-rtx] -o model.engine
    torch2trt-lite check torchvision:resnet18 --shape 1x3x224x224
    torch2trt-lite info model.engine
    torch2trt-lite bench torchvision:resnet18 --shape 1x3x224x224 --batch 1,8 -o bench_out
    torch2trt-lite compare torchvision:resnet18 --shape 1x3x224x224 --tolerance 1e-4
    torch2trt-lite export-triton model.engine model_repository --name resnet18
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from torch2trt_lite.errors import Torch2TRTError

_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32,
    "int64": torch.int64, "bool": torch.bool,
}


def parse_range(text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``--shape`` with ranges: ``1-8x3x224x224`` (dim 0 from 1 to 8, opt 8) or ``1-4-8x3x224x224``
    (min 1, opt 4, max 8); plain dims are static. Returns (min, opt, max)."""
    mins, opts, maxs = [], [], []
    for part in text.lower().split("x"):
        bits = part.split("-")
        try:
            vals = [int(b) for b in bits]
        except ValueError:
            raise Torch2TRTError(
                f"--shape {text!r}: expected dimensions like 1x3x224x224, with ranges like 1-8 or 1-4-8 (min-opt-max)"
            ) from None
        if len(vals) > 3 or any(v <= 0 for v in vals):
            raise Torch2TRTError(f"--shape {text!r}: each dimension is N, MIN-MAX or MIN-OPT-MAX of positive integers")
        lo, op, hi = (vals[0],) * 3 if len(vals) == 1 else (vals[0], vals[1], vals[1]) if len(vals) == 2 else tuple(vals)
        if not lo <= op <= hi:
            raise Torch2TRTError(f"--shape {text!r}: {part} must satisfy min <= opt <= max")
        mins.append(lo)
        opts.append(op)
        maxs.append(hi)
    return tuple(mins), tuple(opts), tuple(maxs)


MODEL_SPECS = (
    "torchvision:NAME (random weights), timm:NAME (random weights), hf:CLASS (a transformers model class "
    "built from its default config) or hf:CLASS=PATH (from_pretrained of a local folder), "
    "module:factory or path/to/file.py:factory (called with no arguments; the current folder is importable)"
)


def load_model(spec: str) -> torch.nn.Module:
    """A model from a spec (see ``MODEL_SPECS``), in eval mode."""
    if ":" not in spec:
        raise Torch2TRTError(f"model {spec!r}: expected one of {MODEL_SPECS}")
    mod_name, attr = spec.split(":", 1)
    if mod_name == "torchvision":
        try:
            import torchvision
        except ImportError as e:
            raise Torch2TRTError("torchvision is not installed: pip install torchvision") from e
        try:
            factory = torchvision.models.get_model_builder(attr)
        except ValueError:
            raise Torch2TRTError(f"torchvision has no model named {attr!r}") from None
        model = factory(weights=None)
    elif mod_name == "timm":
        try:
            import timm
        except ImportError as e:
            raise Torch2TRTError("timm is not installed: pip install timm") from e
        if attr not in timm.list_models():
            raise Torch2TRTError(f"timm has no model named {attr!r} (timm.list_models() lists them)")
        model = timm.create_model(attr, pretrained=False)
    elif mod_name == "hf":
        model = _hf_model(attr)
    else:
        model = _user_model(spec, mod_name, attr)
    if not isinstance(model, torch.nn.Module):
        raise Torch2TRTError(f"{spec!r} did not produce an nn.Module (got {type(model).__name__})")
    return model.eval()


def _hf_model(attr: str) -> Any:
    try:
        import transformers
    except ImportError as e:
        raise Torch2TRTError("transformers is not installed: pip install transformers") from e
    name, _, path = attr.partition("=")
    found = getattr(transformers, name, None)
    if not isinstance(found, type) or not hasattr(found, "config_class"):
        raise Torch2TRTError(f"transformers has no model class {name!r} (e.g. hf:BertModel)")
    cls: Any = found
    if path:
        import os

        if not os.path.isdir(path):
            raise Torch2TRTError(f"hf:{attr}: {path!r} is not a local folder (nothing is downloaded)")
        return cls.from_pretrained(path)
    return cls(cls.config_class())


def _user_model(spec: str, mod_name: str, attr: str) -> Any:
    import os

    try:
        if mod_name.endswith(".py"):
            if not os.path.isfile(mod_name):
                raise Torch2TRTError(f"model {spec!r}: no file {mod_name!r}")
            sp = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(mod_name))[0], mod_name)
            if sp is None or sp.loader is None:
                raise Torch2TRTError(f"model {spec!r}: cannot import {mod_name!r}")
            module = importlib.util.module_from_spec(sp)
            sp.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())  # a local module:factory works without PYTHONPATH=.
            module = importlib.import_module(mod_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError) as e:
        raise Torch2TRTError(f"cannot import {spec!r}: {e}") from None
    return factory()


def _dtypes(args: argparse.Namespace, n: int) -> list[torch.dtype]:
    names = list(args.dtype or ["float32"])
    if len(names) == 1:
        names *= n
    if len(names) != n:
        raise Torch2TRTError(
            f"--dtype was given {len(names)} times for {n} --shape(s): give one (for every input) or one per --shape"
        )
    return [_DTYPES[d] for d in names]


def _inputs(args: argparse.Namespace) -> list[torch.Tensor]:
    torch.manual_seed(args.seed)
    shapes = [parse_range(s)[1] for s in args.shape]
    out = []
    for s, dtype in zip(shapes, _dtypes(args, len(shapes)), strict=True):
        if dtype.is_floating_point:
            out.append(torch.randn(s, dtype=dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, s).bool())
        else:
            out.append(torch.randint(0, args.high, s, dtype=dtype))
    return out


def _model_and_inputs(args: argparse.Namespace) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model = load_model(args.model)
    xs = _inputs(args)
    floats = {x.dtype for x in xs if x.is_floating_point()}
    if len(floats) > 1:
        raise Torch2TRTError(f"floating-point inputs of different dtypes {sorted(map(str, floats))}: use one")
    if floats and floats != {torch.float32}:
        model = model.to(floats.pop())  # a float16 / bfloat16 input: the model runs in that dtype too
    try:
        with torch.no_grad():
            model(*[x.clone() for x in xs])
    except Exception as e:  # noqa: BLE001 - the user's model failed in eager PyTorch
        raise Torch2TRTError(
            f"{args.model} fails in eager PyTorch on inputs of shape(s) {', '.join(args.shape)} and dtype(s) "
            f"{', '.join(str(x.dtype).replace('torch.', '') for x in xs)}: {type(e).__name__}: {e}"
        ) from None
    return model, xs


def _max_rel_err(got: Any, ref: Any) -> float:
    from torch.utils._pytree import tree_flatten

    errs = []
    for g, r in zip(tree_flatten(got)[0], tree_flatten(ref)[0], strict=True):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point:
            scale = r.abs().max().clamp_min(1e-12)
            errs.append(float((g.to(r.device).float() - r.float()).abs().max() / scale))
    return max(errs, default=0.0)


def _say(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "json", False):
        print(f"torch2trt-lite: {text}", file=sys.stderr, flush=True)


def cmd_convert(args: argparse.Namespace) -> int:
    import torch2trt_lite

    model, xs = _model_and_inputs(args)
    _say(args, f"converting {args.model} on backend {args.backend} ...")
    t0 = time.perf_counter()
    with torch.no_grad():
        ref = model(*xs)
    eager_s = time.perf_counter() - t0
    caps = [c for arg in args.compute_capability or [] for c in arg.split(",") if c]
    specs = _specs(args, xs)
    trt_model = torch2trt_lite.convert(
        model, specs, backend=args.backend, compute_capabilities=caps or None, max_batch_size=args.max_batch_size,
        progress=args.progress, cache_dir=args.cache_dir, timing_cache=args.timing_cache, **precision_options(args),
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
        report["max_rel_err"] = _max_rel_err(trt_model(*[x.to(device) for x in xs]), ref)
    else:
        report["max_rel_err"] = "not run: the engine needs a supported NVIDIA GPU (none here)"
    if args.output:
        trt_model.save(args.output)
        report["engine"] = args.output
    if args.plan:
        trt_model.save_plan(args.plan)
        report["plan"] = args.plan
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k:>16}: {v}" for k, v in report.items()))
    return 0


def _specs(args: argparse.Namespace, xs: list[torch.Tensor]) -> list[Any]:
    """The example tensors, each whose --shape holds a range (MIN-MAX or MIN-OPT-MAX) as an Input."""
    import torch2trt_lite

    specs: list[Any] = list(xs)
    for i, (text, x) in enumerate(zip(args.shape, xs, strict=True)):
        mn, op, mx = parse_range(text)
        if mn != mx:
            specs[i] = torch2trt_lite.Input(mn, op, mx, dtype=x.dtype, example=x)
    return specs


def cmd_check(args: argparse.Namespace) -> int:
    import torch2trt_lite

    model, xs = _model_and_inputs(args)
    report = torch2trt_lite.check(model, _specs(args, xs), max_batch_size=args.max_batch_size)
    print(report)
    if report.dynamic:
        print(f"{len(report.dynamic)} of them refuse a dynamic size")
    return 0 if report.ok else 1


def cmd_info(args: argparse.Namespace) -> int:
    from torch2trt_lite.runtime import engine_file

    meta, plan = engine_file.read(args.engine)
    layers = meta.get("layers", [])
    meta = {k: v for k, v in meta.items() if k not in ("out_tree", "layers")}
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


def add_model_arguments(s: argparse.ArgumentParser) -> None:
    """The model and its example inputs, as every subcommand that runs a model takes them."""
    s.add_argument("model", help=MODEL_SPECS)
    s.add_argument("--shape", action="append", required=True,
                   help="input shape, e.g. 1x3x224x224 (repeat per input); for convert and check a dim may be a "
                   "range, MIN-MAX or MIN-OPT-MAX (1-8x3x224x224: batch 1 to 8, traced at the opt size)")
    s.add_argument("--dtype", action="append", choices=sorted(_DTYPES),
                   help="input dtype: once for every input, or once per --shape in order (default float32; "
                   "float16/bfloat16 also cast the model)")
    s.add_argument("--high", type=int, default=100, help="integer inputs are drawn from [0, HIGH) (default 100)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random example inputs (default 0)")


def add_precision_arguments(s: argparse.ArgumentParser) -> None:
    """--precision and --io-dtype (see convert's precision options)."""
    s.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"],
                   help="compute precision of convolutions, linear layers, matmuls and attention; softmax, "
                   "normalization and large reductions stay fp32 (default fp32)")
    s.add_argument("--io-dtype", choices=["fp32", "fp16", "bf16"],
                   help="the engine's floating input and output type (default: the inputs' own)")


def precision_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"precision": args.precision, "io_dtype": args.io_dtype}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torch2trt-lite",
        description="Convert PyTorch models to TensorRT engines during one forward pass, check them for "
        "unsupported calls, and describe engine files.",
    )
    sub = p.add_subparsers(dest="command", required=True)
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
            add_precision_arguments(s)
        s.add_argument("--max-batch-size", type=int, metavar="N",
                       help="dim 0 of every input ranges over [1, N] (torch2trt's max_batch_size)")
        s.set_defaults(fn=fn)
    s = sub.add_parser("info", help="print an engine file's header", description="print an engine file's header")
    s.add_argument("engine", help="an engine file written by convert -o or TRTModule.save")
    s.add_argument("--layers", action="store_true", help="also list every layer with its output types")
    s.set_defaults(fn=cmd_info)
    from torch2trt_lite.runtime.triton import add_parser as add_export_triton
    from torch2trt_lite.tools.bench import add_parser as add_bench
    from torch2trt_lite.tools.compare import add_parser as add_compare

    add_bench(sub)
    add_compare(sub)
    add_export_triton(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except Torch2TRTError as e:
        print(f"torch2trt-lite: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
