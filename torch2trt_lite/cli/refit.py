"""``torch2trt-lite refit ENGINE MODEL_SPEC -o OUT``: new weights for a refittable engine file, no rebuild."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from torch2trt_lite.cli.models import MODEL_SPECS, load_model
from torch2trt_lite.runtime.module import TRTModule


def cmd_refit(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    t0 = time.perf_counter()
    refitted = TRTModule.load(args.engine, weights=model)  # NOTE: refits at load (a stripped file included)
    refit_s = time.perf_counter() - t0
    refitted.save(args.output, weights=not args.strip_weights)
    report: dict[str, Any] = {
        "engine": args.output, "weights": len(refitted.metadata["refit"]["weights"]), "refit_s": round(refit_s, 4),
        "stripped": bool(args.strip_weights),
    }
    print(json.dumps(report, indent=2) if args.json else "\n".join(f"{k:>10}: {v}" for k, v in report.items()))
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``refit`` subcommand to ``sub`` (of ``add_subparsers``)."""
    text = "refit a refittable engine file with a model's weights and write the result"
    s = sub.add_parser("refit", help=text, description=text)
    s.add_argument("engine", help="an engine file converted with --refittable (it may be saved without weights)")
    s.add_argument("model", help=f"the model whose weights go in: {MODEL_SPECS}")
    s.add_argument("-o", "--output", required=True, help="write the refitted engine file here")
    s.add_argument("--strip-weights", action="store_true", help="write it without its weights (load needs weights=)")
    s.add_argument("--json", action="store_true", help="print the report as JSON (and nothing else)")
    s.set_defaults(fn=cmd_refit)


__all__ = ["add_parser", "cmd_refit"]
