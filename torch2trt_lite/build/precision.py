"""A conversion's precision: the policy it traces with, the outputs' floating type, and torch2trt's
``int8_mode`` (the model quantized first)."""

from __future__ import annotations

import logging
from typing import Any

import torch

from torch2trt_lite.errors import Torch2TRTError
from torch2trt_lite.trace import precision as _precision
from torch2trt_lite.trace import shapes as _shapes

_log = logging.getLogger("torch2trt_lite")


def precision_setup(
    model: Any, res: _shapes.Resolved, precision: Any, fp16_mode: Any, overrides: Any, io_dtype: Any,
) -> tuple[_precision.Policy | None, torch.dtype | None]:
    """The precision policy and the floating outputs' type (None: as traced) of a conversion; with
    ``io_dtype`` the floating examples are cast to it (the engine's floating inputs take that type)."""
    if not isinstance(fp16_mode, bool):
        raise Torch2TRTError(f"fp16_mode must be True or False, got {fp16_mode!r}")
    if fp16_mode:
        if _precision.precision_dtype(precision) not in (torch.float32, torch.float16):
            raise Torch2TRTError(f"fp16_mode=True (torch2trt's name for precision='fp16') conflicts with precision={precision!r}")
        precision = "fp16"
    io = None if io_dtype is None else _precision.precision_dtype(io_dtype, "io_dtype")
    if io is not None:
        for i, x in enumerate(res.examples):
            if x.is_floating_point() and x.dtype != io:
                res.examples[i] = x.to(io)
    policy = _precision.make_policy(model, precision, overrides, res.examples)
    if io is not None:
        return policy, io
    if policy is None or policy.source == "autocast":
        return policy, None  # NOTE: under autocast, the outputs keep the types autocast gave them
    floats = [x.dtype for x in res.examples if x.is_floating_point()]
    return policy, floats[0] if floats else torch.float32


def int8_model(model: Any, inputs: Any, flag: Any, dataset: Any, algorithm: Any) -> Any:
    """torch2trt's ``int8_mode``: the model quantized by :func:`torch2trt_lite.quantize` (``flag``
    True), or ``model`` itself (``flag`` False: then ``dataset`` and ``algorithm`` must be None)."""
    if flag is False:
        if dataset is not None or algorithm is not None:
            raise Torch2TRTError("int8_calib_dataset and int8_calib_algorithm go with int8_mode=True")
        return model
    from torch2trt_lite.quantization import METHODS, QuantizedModel, quantizable_layers, quantize

    if flag is not True:
        raise Torch2TRTError(f"int8_mode must be True or False, got {flag!r}")
    if isinstance(model, QuantizedModel):
        raise Torch2TRTError("int8_mode=True with a model quantize() already returned: leave int8_mode out")
    if not isinstance(model, torch.nn.Module):
        raise Torch2TRTError("int8_mode=True needs an nn.Module (quantize() replaces its conv and linear layers)")
    name = "entropy" if algorithm is None else str(getattr(algorithm, "name", algorithm)).lower()
    method = name if name in METHODS else "entropy" if "entropy" in name else "max" if "minmax" in name else None
    if method is None:
        raise Torch2TRTError(
            f"int8_calib_algorithm={algorithm!r}: use 'entropy', 'max', 'percentile' or 'mse' (or a TensorRT "
            "CalibrationAlgoType ENTROPY_CALIBRATION(_2) / MINMAX_CALIBRATION)"
        )
    chosen, skipped = quantizable_layers(model)
    if not chosen:  # NOTE: torch2trt builds such a model too (TensorRT quantizes nothing in it)
        left = f" ({', '.join(f'{k}: {v}' for k, v in skipped.items())})" if skipped else ""
        _log.warning(
            "torch2trt-lite: int8_mode=True, but nothing was quantized: the model has no nn.Conv1d/2d/3d, "
            "nn.ConvTranspose1d/2d/3d or nn.Linear layer to quantize%s; converting it in float precision", left,
        )
        return model
    if dataset is None:
        xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
        if not all(isinstance(x, torch.Tensor) for x in xs):
            raise Torch2TRTError("int8_mode=True without int8_calib_dataset calibrates on the example tensors: pass tensors")
        dataset = [tuple(xs)]
    return quantize(model, dataset, dtype="int8", method=method, progress=False)


def quantization_info(model: Any) -> dict[str, Any] | None:
    """The quantization settings of a :class:`torch2trt_lite.QuantizedModel` (None for other models)."""
    from torch2trt_lite.quantization import quantization_info as info

    return info(model)


__all__ = ["int8_model", "precision_setup", "quantization_info"]
