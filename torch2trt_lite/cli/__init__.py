"""Command line: ``torch2trt-lite convert|check|info|bench|compare|export-triton``.

    torch2trt-lite convert torchvision:resnet18 --shape 1x3x224x224 [--backend sim|tensorrt|tensorrt-rtx] -o model.engine
    torch2trt-lite check torchvision:resnet18 --shape 1x3x224x224
    torch2trt-lite info model.engine
    torch2trt-lite bench torchvision:resnet18 --shape 1x3x224x224 --batch 1,8 -o bench_out
    torch2trt-lite compare torchvision:resnet18 --shape 1x3x224x224 --tolerance 1e-4
    torch2trt-lite export-triton model.engine model_repository --name resnet18

Every subcommand's parser and handler lives here (one module per tool: ``convert`` for convert,
check and info, ``bench``, ``compare``, ``triton``; ``models`` loads model specs and makes example
inputs); the tools expose functions and the CLI wraps them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torch2trt_lite.cli import bench, compare, convert, triton
from torch2trt_lite.cli.models import MODEL_SPECS, load_model, parse_range
from torch2trt_lite.errors import Torch2TRTError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torch2trt-lite",
        description="Convert PyTorch models to TensorRT engines during one forward pass, check them for "
        "unsupported calls, and describe engine files.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    convert.add_parsers(sub)
    bench.add_parser(sub)
    compare.add_parser(sub)
    triton.add_parser(sub)
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


__all__ = ["MODEL_SPECS", "Torch2TRTError", "build_parser", "load_model", "main", "parse_range"]
