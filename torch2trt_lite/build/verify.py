"""The dynamic verify run of ``convert(..., verify=True)``: a dynamic engine run at each profile's
min and max shapes on the sim, its output shapes compared with eager PyTorch's."""

from __future__ import annotations

from typing import Any

import torch

from torch2trt_lite.backends import get_backend
from torch2trt_lite.build.define import baked_layers
from torch2trt_lite.build.engine import Built, build_module
from torch2trt_lite.build.inputs import flat
from torch2trt_lite.build.options import ConvertOptions, Setup, prepare, target
from torch2trt_lite.errors import ConversionError
from torch2trt_lite.trace import shapes as _shapes


def verify_dynamic(model: Any, built: Built, setup: Setup, options: ConvertOptions) -> None:
    """Check a dynamic engine at each profile's min and max shapes against eager PyTorch (on the sim:
    the engine itself when it was built by the sim, else the same network built again there).
    With ``io_dtype`` the engine's floating inputs were cast to it; eager PyTorch gets float32."""
    d, res, in_tree = built.definition, setup.res, setup.in_tree
    model, engine = (model, built.module) if in_tree is None else (flat(model, in_tree), flat(built.module, in_tree))
    baked = [o["name"] for o in d.out_meta if -1 not in o["shape"]]
    if options.io_dtype is not None:
        user_model = model

        def model(*xs: Any) -> Any:
            return user_model(*[x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs])

    if d.backend.name != "sim":  # NOTE: the same network built on the sim, which runs here
        engine = _on_sim(model, res, setup.input_names, options.output_names)
    try:
        _shapes.verify(model, engine, res)
    except ConversionError as e:
        layers = baked_layers(d.network)
        where = f"; layers with a dynamic input and a static output: {', '.join(layers[:5])}" if layers else ""
        static = f"; outputs with a static shape: {baked}" if baked else ""
        raise ConversionError(f"{e}{where}{static}") from None


def _on_sim(model: Any, res: _shapes.Resolved, input_names: Any, output_names: Any) -> Any:
    """``model`` converted on the sim with ``res``'s profiles, as ``convert(model, res.examples,
    backend="sim", profiles=..., verify=False)`` converts it."""
    options = ConvertOptions(
        backend="sim", input_names=input_names, output_names=output_names, progress=False, verify=False,
        profiles=[[_shapes.Input(*r, dtype=x.dtype) for r, x in zip(p, res.examples, strict=True)]
                  for p in res.profiles],
    )
    setup = prepare(model, res.examples, options)
    return build_module(model, setup, target(get_backend("sim"), options), options).module


__all__ = ["verify_dynamic"]
