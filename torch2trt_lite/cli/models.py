"""The models and example inputs the subcommands run: model specs (torchvision, timm, transformers,
the user's own factories), ``--shape`` ranges and random inputs of the ``--dtype`` asked for."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import Any

import torch

from torch2trt_lite.errors import Torch2TRTError

DTYPES = {
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


def load_model(spec: str, seed: int = 0) -> torch.nn.Module:
    """A model from a spec (see ``MODEL_SPECS``), in eval mode. Random weights are drawn after
    ``torch.manual_seed(seed)``: the same spec gives the same model on every run (so ``compare`` is
    reproducible and ``convert --cache-dir`` finds the engine it built before)."""
    if ":" not in spec:
        raise Torch2TRTError(f"model {spec!r}: expected one of {MODEL_SPECS}")
    torch.manual_seed(seed)
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


def input_dtypes(args: argparse.Namespace, n: int) -> list[torch.dtype]:
    """The dtype of each of ``n`` inputs from ``--dtype``: none (float32), one for all, or one per ``--shape``."""
    names = list(args.dtype or ["float32"])
    if len(names) == 1:
        names *= n
    if len(names) != n:
        raise Torch2TRTError(
            f"--dtype was given {len(names)} times for {n} --shape(s): give one (for every input) or one per --shape"
        )
    return [DTYPES[d] for d in names]


def example_inputs(args: argparse.Namespace) -> list[torch.Tensor]:
    """Random inputs of ``--shape`` (the opt size of a range) and ``--dtype``, seeded with ``--seed``;
    integers are drawn from [0, ``--high``)."""
    torch.manual_seed(args.seed)
    shapes = [parse_range(s)[1] for s in args.shape]
    out = []
    for s, dtype in zip(shapes, input_dtypes(args, len(shapes)), strict=True):
        if dtype.is_floating_point:
            out.append(torch.randn(s, dtype=dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, s).bool())
        else:
            out.append(torch.randint(0, args.high, s, dtype=dtype))
    return out


def model_and_inputs(args: argparse.Namespace) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """The model of ``args.model`` (cast to the inputs' floating dtype) and its example inputs,
    checked to run in eager PyTorch (a clear :class:`Torch2TRTError` otherwise)."""
    model = load_model(args.model, args.seed)
    xs = example_inputs(args)
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


def add_model_arguments(s: argparse.ArgumentParser) -> None:
    """The model and its example inputs, as every subcommand that runs a model takes them."""
    s.add_argument("model", help=MODEL_SPECS)
    s.add_argument("--shape", action="append", required=True,
                   help="input shape, e.g. 1x3x224x224 (repeat per input); for convert and check a dim may be a "
                   "range, MIN-MAX or MIN-OPT-MAX (1-8x3x224x224: batch 1 to 8, traced at the opt size)")
    s.add_argument("--dtype", action="append", choices=sorted(DTYPES),
                   help="input dtype: once for every input, or once per --shape in order (default float32; "
                   "float16/bfloat16 also cast the model)")
    s.add_argument("--high", type=int, default=100, help="integer inputs are drawn from [0, HIGH) (default 100)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the random weights (torchvision:, timm:, hf: specs) and example inputs (default 0)")


def add_precision_arguments(s: argparse.ArgumentParser) -> None:
    """--precision and --io-dtype (see convert's precision options)."""
    s.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"],
                   help="compute precision of convolutions, linear layers, matmuls and attention; softmax, "
                   "normalization and large reductions stay fp32 (default fp32)")
    s.add_argument("--io-dtype", choices=["fp32", "fp16", "bf16"],
                   help="the engine's floating input and output type (default: the inputs' own)")


def precision_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--precision`` and ``--io-dtype`` as keyword arguments of convert and compare."""
    return {"precision": args.precision, "io_dtype": args.io_dtype}


__all__ = [
    "DTYPES", "MODEL_SPECS", "add_model_arguments", "add_precision_arguments", "example_inputs", "input_dtypes",
    "load_model", "model_and_inputs", "parse_range", "precision_options",
]
