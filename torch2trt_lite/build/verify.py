"""The dynamic verify run of ``convert(..., verify=True)``: a dynamic engine run at each profile's
min and max shapes on the sim, its output shapes compared with eager PyTorch's."""

from __future__ import annotations

import dataclasses
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
        # NOTE: True for the default: its one warning about float64 was given by the first conversion
        engine = _on_sim(model, res, setup.input_names, options.output_names, options.truncate_double is not False)
    failed: list[ConversionError] = []
    eager = _eager(model, failed)
    try:
        _shapes.verify(eager, engine, dataclasses.replace(res, bounds=value_ranges(res)), failed)
    except ConversionError as e:
        if failed and e is failed[0]:  # the model fails at a size of the range, or the run is too big: not a baked size
            raise
        layers = baked_layers(d.network)
        where = f"; layers with a dynamic input and a static output: {', '.join(layers[:5])}" if layers else ""
        static = f"; outputs with a static shape: {baked}" if baked else ""
        raise ConversionError(f"{e}{where}{static}") from None


def value_ranges(res: _shapes.Resolved) -> list[tuple[int, int]]:
    """The values [low, high) of the random integer inputs at the verify run's shapes: those the
    user's example holds (an :class:`~torch2trt_lite.Input`'s: within its ``low``/``high`` too), so an
    embedding's ids or a gather's indices stay valid (floating and bool inputs: unused)."""
    out = []
    for i, x in enumerate(res.examples):
        lo, hi = res.bounds[i] if res.bounds else (0, 100)
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool or x.numel() == 0:
            out.append((lo, hi))
            continue
        a, b = int(x.min()), int(x.max()) + 1
        if res.ranged and res.ranged[i] and max(a, lo) < min(b, hi):
            a, b = max(a, lo), min(b, hi)
        out.append((a, b))
    return out


def _eager(model: Any, failed: list[ConversionError]) -> Any:
    """``model`` for the verify run: where it raises (a model invalid at some sizes of the declared
    range), a :class:`ConversionError` that says so (also put in ``failed``)."""

    def run(*xs: Any) -> Any:
        try:
            return model(*xs)
        except Exception as e:  # noqa: BLE001 - any error of the user's model, quoted in a ConversionError
            shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in xs]
            first = (str(e).strip().splitlines() or [""])[0].rstrip(".")
            err = ConversionError(
                f"the model itself fails in eager PyTorch at input shapes {shapes}, sizes within the declared "
                f"range that convert's verify run tried (each profile's min and max sizes): {type(e).__name__}: "
                f"{first[:400]}. Narrow the range to the sizes the model accepts (Input min_shape/max_shape, "
                "max_batch_size=, dynamic_batch= or profiles=)"
            )
            failed.append(err)
            raise err from e

    return run


def _on_sim(model: Any, res: _shapes.Resolved, input_names: Any, output_names: Any,
            truncate_double: bool | None = None) -> Any:
    """``model`` converted on the sim with ``res``'s profiles, as ``convert(model, res.examples,
    backend="sim", profiles=..., verify=False)`` converts it."""
    options = ConvertOptions(
        backend="sim", input_names=input_names, output_names=output_names, progress=False, verify=False,
        profiles=[[_shapes.Input(*r, dtype=x.dtype) for r, x in zip(p, res.examples, strict=True)]
                  for p in res.profiles], truncate_double=truncate_double,
    )
    setup = prepare(model, res.examples, options)
    # NOTE: the Inputs' value ranges (shape inputs' profiles, bounds of sizes read from values), as converted
    setup = dataclasses.replace(setup, res=dataclasses.replace(setup.res, bounds=res.bounds, ranged=res.ranged))
    return build_module(model, setup, target(get_backend("sim"), options), options).module


__all__ = ["value_ranges", "verify_dynamic"]
