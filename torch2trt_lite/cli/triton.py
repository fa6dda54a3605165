"""``torch2trt-lite export-triton``: a Triton Inference Server model repository entry for an engine file
(:func:`torch2trt_lite.runtime.triton.export_triton`).

    torch2trt-lite export-triton model.engine models --name resnet18 [--max-batch-size 8] [--instances 2]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from torch2trt_lite.runtime.triton import KINDS, PLAN_FILENAME, export_triton


def _int_at_least(low: int) -> Callable[[str], int]:
    what = "a positive integer" if low == 1 else f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


_positive = _int_at_least(1)
_non_negative = _int_at_least(0)


def cmd_export_triton(args: argparse.Namespace) -> int:
    model_dir = export_triton(
        args.engine, args.repo, args.name, max_batch_size=args.max_batch_size, instances=args.instances,
        kind=args.kind, version=getattr(args, "version", 1), overwrite=getattr(args, "overwrite", False),
        allow_sim=getattr(args, "allow_sim", False),
    )
    print(f"torch2trt-lite: wrote the Triton model {model_dir} (config.pbtxt, {getattr(args, 'version', 1)}/{PLAN_FILENAME})")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export-triton`` subcommand to an ``argparse`` subparsers object."""
    text = "write a Triton Inference Server model repository entry (config.pbtxt + VERSION/model.plan) for an engine"
    p: argparse.ArgumentParser = subparsers.add_parser("export-triton", help=text, description=text)
    p.add_argument("engine", help="an engine file written by convert -o or TRTModule.save")
    p.add_argument("repo", help="the model repository folder (created if missing)")
    p.add_argument("--name", required=True, help="the model's name: its folder REPO/NAME and the config's name")
    p.add_argument("--max-batch-size", type=_non_negative, default=None, metavar="N",
                   help="serve with dynamic batching up to N (needs an engine converted with a dynamic batch range "
                   "from 1; default: the engine's batch max when it has one, else 0: full shapes, no batching)")
    p.add_argument("--instances", type=_positive, default=1, metavar="K",
                   help="number of model instances in the instance_group (default 1)")
    p.add_argument("--kind", choices=sorted(KINDS), default="gpu",
                   help="instance kind (default gpu; Triton's TensorRT backend runs plans on GPU instances only)")
    p.add_argument("--version", type=_positive, default=1, help="the model version folder to write (default 1)")
    p.add_argument("--overwrite", action="store_true", help="replace the version folder if it exists")
    p.add_argument("--allow-sim", action="store_true",
                   help="also write a sim engine (its plan is not a TensorRT plan: Triton cannot load it; for "
                   "testing the layout)")
    p.set_defaults(fn=cmd_export_triton)
    return p


__all__ = ["add_parser", "cmd_export_triton"]
