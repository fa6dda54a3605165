"""Command line: ``torch2trt-lite convert|check|info``.

    torch2trt-lite convert torchvision:resnet18 --shape 1x3x224x224 [--backend sim|tensorrt] -o model.engine
    torch2trt-lite check torchvision:resnet18 --shape 1x3x224x224
    torch2trt-lite info model.engine
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from .errors import Torch2TRTError

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "int32": torch.int32, "int64": torch.int64}


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise Torch2TRTError(f"--shape {text!r}: expected dimensions like 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise Torch2TRTError(f"--shape {text!r}: dimensions must be positive integers")
    return dims


def load_model(spec: str) -> torch.nn.Module:
    """``torchvision:resnet18`` (random weights) or ``package.module:factory`` (called with no args)."""
    if ":" not in spec:
        raise Torch2TRTError(f"model {spec!r}: expected 'torchvision:NAME' or 'package.module:callable'")
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
    else:
        try:
            factory = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as e:
            raise Torch2TRTError(f"cannot import {spec!r}: {e}") from None
        model = factory()
    if not isinstance(model, torch.nn.Module):
        raise Torch2TRTError(f"{spec!r} did not produce an nn.Module (got {type(model).__name__})")
    return model.eval()


def _inputs(args: argparse.Namespace) -> list[torch.Tensor]:
    torch.manual_seed(args.seed)
    dtype = _DTYPES[args.dtype]
    shapes = [parse_shape(s) for s in args.shape]
    if dtype.is_floating_point:
        return [torch.randn(s, dtype=dtype) for s in shapes]
    return [torch.randint(0, 100, s, dtype=dtype) for s in shapes]


def _max_rel_err(got: Any, ref: Any) -> float:
    from torch.utils._pytree import tree_flatten

    errs = []
    for g, r in zip(tree_flatten(got)[0], tree_flatten(ref)[0], strict=True):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point:
            scale = r.abs().max().clamp_min(1e-12)
            errs.append(float((g.to(r.device).float() - r.float()).abs().max() / scale))
    return max(errs, default=0.0)


def cmd_convert(args: argparse.Namespace) -> int:
    import torch2trt_lite

    model = load_model(args.model)
    xs = _inputs(args)
    t0 = time.perf_counter()
    with torch.no_grad():
        ref = model(*xs)
    eager_s = time.perf_counter() - t0
    trt_model = torch2trt_lite.convert(model, xs, backend=args.backend)
    got = trt_model(*xs)
    report = {
        "model": args.model,
        "backend": trt_model.backend,
        "trt_version": trt_model.metadata["trt_version"],
        "layers": trt_model.num_layers,
        "conversion_s": round(trt_model.conversion_time_s or 0.0, 4),
        "eager_forward_s": round(eager_s, 4),
        "max_rel_err": _max_rel_err(got, ref),
    }
    if args.output:
        trt_model.save(args.output)
        report["engine"] = args.output
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k:>16}: {v}" for k, v in report.items()))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    import torch2trt_lite

    report = torch2trt_lite.check(load_model(args.model), _inputs(args))
    print(report)
    return 0 if report.ok else 1


def cmd_info(args: argparse.Namespace) -> int:
    from . import engine_file

    meta, plan = engine_file.read(args.engine)
    meta = {k: v for k, v in meta.items() if k != "out_tree"}
    print(json.dumps(meta, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torch2trt-lite", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, fn in (("convert", cmd_convert), ("check", cmd_check)):
        s = sub.add_parser(name, help=f"{name} a model")
        s.add_argument("model", help="torchvision:NAME or package.module:factory")
        s.add_argument("--shape", action="append", required=True, help="input shape, e.g. 1x3x224x224 (repeat per input)")
        s.add_argument("--dtype", default="float32", choices=sorted(_DTYPES))
        s.add_argument("--seed", type=int, default=0)
        if name == "convert":
            s.add_argument("--backend", default="auto", choices=["auto", "sim", "tensorrt"])
            s.add_argument("-o", "--output", help="write the engine file here")
            s.add_argument("--json", action="store_true", help="print the report as JSON")
        s.set_defaults(fn=fn)
    s = sub.add_parser("info", help="print an engine file's header")
    s.add_argument("engine")
    s.set_defaults(fn=cmd_info)
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
