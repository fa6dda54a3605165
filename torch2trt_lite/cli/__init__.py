"""Command line: ``torch2trt-lite convert|check|info|bench|compare|export-triton``.

    torch2trt-lite convert torchvision:resnet18 --shape 1x3x224x224 [--backend sim|tensorrt|tensorrt-rtx] -o model.engine
    torch2trt-lite check torchvision:resnet18 --shape 1x3x224x224
    torch2trt-lite info model.engine
    torch2trt-lite bench torchvision:resnet18 --shape 1x3x224x224 --batch 1,8 -o bench_out
    torch2trt-lite compare torchvision:resnet18 --shape 1x3x224x224 --tolerance 1e-4
    torch2trt-lite export-triton model.engine model_repository --name resnet18
    torch2trt-lite convert mymodel.py:make --shape 1x3x224x224 --refittable [--strip-weights] -o model.engine
    torch2trt-lite refit model.engine mymodel.py:make_retrained -o retrained.engine

Every subcommand's parser and handler lives here (one module per tool: ``convert`` for convert,
check and info, ``bench``, ``compare``, ``triton``, ``refit``; ``models`` loads model specs and makes example
inputs); the tools expose functions and the CLI wraps them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torch2trt_lite.cli import bench, compare, convert, refit, triton
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
    refit.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        args = build_parser().parse_args(argv)
        rc = int(args.fn(args))
        sys.stdout.flush()  # NOTE: a reader that stopped early (`info | head`) shows here, not at exit
        return rc
    except BrokenPipeError:
        _drop_stdout()
        return 1
    except Torch2TRTError as e:
        print(f"torch2trt-lite: error: {e}", file=sys.stderr)
        return 2


def _drop_stdout() -> None:
    """After a ``BrokenPipeError`` on stdout: point it at /dev/null, so that Python's flush at exit does
    not raise again (Python's documented recipe for SIGPIPE); the command then ends quietly."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # NOTE: a stdout without a file descriptor (a capture)
        pass


__all__ = ["MODEL_SPECS", "Torch2TRTError", "build_parser", "load_model", "main", "parse_range"]
