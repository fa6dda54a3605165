"""``torch2trt-lite bench``: time the engine against eager PyTorch and ``torch.compile``
(:func:`torch2trt_lite.tools.bench.bench` on a model spec and random inputs).

    torch2trt-lite bench torchvision:resnet18 --shape 1x3x224x224 --batch 1,4,8 --backend sim -o OUT
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from torch2trt_lite.cli.models import DTYPES, MODEL_SPECS, example_inputs, load_model
from torch2trt_lite.tools.bench import PRECISIONS, bench, parse_batch_sizes


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to ``subparsers`` (of ``argparse``'s ``add_subparsers``)."""
    text = "time the engine against eager PyTorch and torch.compile (latency p50/p90/p99, throughput)"
    s: argparse.ArgumentParser = subparsers.add_parser("bench", help=text, description=text)
    s.add_argument("model", help=MODEL_SPECS)
    s.add_argument("--shape", action="append", required=True,
                   help="input shape, e.g. 1x3x224x224 (repeat per input); --batch replaces its first dimension")
    s.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default) or fp16 (for now: model.half() and half floating inputs)")
    s.add_argument("--batch", metavar="B1,B2,...",
                   help="batch sizes to time, comma-separated, e.g. 1,8,32 (default: the shapes as given); "
                   "the engine is converted once per batch size")
    s.add_argument("--backend", default="auto", choices=["auto", "sim", "tensorrt", "tensorrt-rtx"],
                   help="engine backend (default auto: TensorRT, else TensorRT-RTX, on a GPU; else the sim)")
    s.add_argument("--warmup", type=int, default=10, help="untimed calls per runner and batch size (default 10)")
    s.add_argument("--iters", type=int, default=50, help="timed calls per runner and batch size (default 50)")
    s.add_argument("--no-compile", action="store_true", help="skip the torch.compile runner")
    s.add_argument("--compile", action="store_true",
                   help="also time torch.compile(backend='torch2trt_lite') on the same backend (sim figures labelled)")
    s.add_argument("--dtype", action="append", choices=sorted(DTYPES),
                   help="input dtype, once for every input or once per --shape (default float32); floating "
                   "inputs then take --precision's dtype")
    s.add_argument("--high", type=int, default=100, help="integer inputs are drawn from [0, HIGH) (default 100)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the random weights and example inputs (default 0)")
    s.add_argument("-o", "--output", metavar="OUT",
                   help="folder for bench.json (results, machine, versions, command) and latency_p50.png")
    s.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    s.set_defaults(fn=cmd_bench)
    return s


def cmd_bench(args: argparse.Namespace) -> int:
    """``torch2trt-lite bench``: 0 when every runner ran (or is not runnable here), 1 when the engine failed."""
    from rich.console import Console

    sizes = parse_batch_sizes(args.batch) if args.batch else None
    model = load_model(args.model, args.seed)
    xs = example_inputs(args)
    result = bench(
        model, xs, batch_sizes=sizes, backend=args.backend, warmup=args.warmup, iters=args.iters,
        compile=not args.no_compile, precision=args.precision, verbose=not args.json, trt_compile=args.compile,
    )
    result.model = args.model
    result.command = shlex.join(["torch2trt-lite", *sys.argv[1:]]) if _argv_is_bench() else _command(args)
    if args.output:
        result.save(args.output)
    if args.json:
        print(result.to_json())
    else:
        console = Console()
        console.print(result.table())
        if args.output:
            console.print(f"wrote {result.files['json']}" + (f" and {result.files['plot']}" if result.files["plot"] else ""))
    return 1 if any(s.runner == "engine" and s.status == "failed" for s in result.stats) else 0


def _argv_is_bench() -> bool:
    return len(sys.argv) > 1 and sys.argv[1] == "bench"


def _command(args: argparse.Namespace) -> str:
    """The command line equivalent to ``args`` (when ``cli.main`` was called with its own argv)."""
    argv = ["torch2trt-lite", "bench", args.model]
    for sh in args.shape:
        argv += ["--shape", sh]
    for d in args.dtype or []:
        argv += ["--dtype", d]
    argv += ["--precision", args.precision, "--backend", args.backend, "--warmup", str(args.warmup),
             "--iters", str(args.iters)]
    if args.batch:
        argv += ["--batch", args.batch]
    if args.no_compile:
        argv.append("--no-compile")
    if args.compile:
        argv.append("--compile")
    if args.output:
        argv += ["-o", args.output]
    return shlex.join(argv)


__all__ = ["add_parser", "cmd_bench"]
