"""``torch2trt-lite compare``: the layer-by-layer accuracy debugger
(:func:`torch2trt_lite.tools.compare.compare` on a model spec and random inputs)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from torch2trt_lite.cli.models import (
    add_model_arguments,
    add_precision_arguments,
    model_and_inputs,
    precision_options,
)
from torch2trt_lite.tools.compare import compare


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to ``subparsers`` (of ``argparse``'s ``add_subparsers``)."""
    text = "compare every intermediate tensor of the engine with PyTorch's, and name the first that drifts"
    s: argparse.ArgumentParser = subparsers.add_parser("compare", help=text, description=text)
    add_model_arguments(s)
    s.add_argument("--backend", default="auto", choices=["auto", "sim", "tensorrt", "tensorrt-rtx"],
                   help="engine backend (default auto: TensorRT, else TensorRT-RTX, on a GPU; else the sim); "
                   "real backends need a GPU to run the engine")
    s.add_argument("--tolerance", type=float, default=None,
                   help="largest max relative error (max abs error / the tensor's max magnitude) a tensor may "
                   "have (default by precision: 1e-3 fp32, 1e-2 fp16, 5e-2 bf16)")
    s.add_argument("--json", action="store_true", help="print the report as JSON instead of the table")
    add_precision_arguments(s)
    s.set_defaults(fn=cmd_compare)
    return s


def cmd_compare(args: argparse.Namespace) -> int:
    """``torch2trt-lite compare``: 0 when every tensor is within the tolerance, 1 otherwise."""
    model, xs = model_and_inputs(args)
    report = compare(model, xs, backend=args.backend, tolerance=args.tolerance, **precision_options(args))
    print(json.dumps(report.to_dict(), indent=2) if args.json else str(report))
    return 0 if report.ok else 1


__all__ = ["add_parser", "cmd_compare"]
