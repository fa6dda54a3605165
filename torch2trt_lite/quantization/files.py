"""Calibration files: a quantized model's scales and settings as JSON (``.json``) or safetensors
(``.safetensors``), written by :meth:`QuantizedModel.save_calibration` and read back by
:func:`load_calibration` (``quantize(model, None, calibration=path)``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from .methods import CalibrationError

FORMAT = "torch2trt-lite-calibration"
FORMAT_VERSION = 1


@dataclass
class LayerScales:
    """The scales of one quantized layer."""

    kind: str  # the torch class name (Conv2d, Linear, ...)
    input_scale: float
    weight_scale: torch.Tensor  # [channels] float32
    weight_axis: int
    weight_shape: tuple[int, ...]
    input_amax: float = 0.0


@dataclass
class Settings:
    dtype: str
    method: str
    percentile: float = 99.99
    num_bins: int = 2048
    skipped: dict[str, str] = field(default_factory=dict)


def write_calibration(p: str, scales: dict[str, LayerScales], settings: Settings) -> None:
    """Write ``scales`` and ``settings`` to ``p``: JSON (``.json``) or safetensors (``.safetensors``)."""
    header = _header(settings)
    if p.endswith(".json"):
        doc = dict(header)
        doc["layers"] = {
            name: {
                "kind": s.kind, "input_amax": s.input_amax, "input_scale": s.input_scale,
                "weight_axis": s.weight_axis, "weight_shape": list(s.weight_shape),
                "weight_scale": [float(v) for v in s.weight_scale.tolist()],
            }
            for name, s in scales.items()
        }
        _atomic_write(p, json.dumps(doc, indent=1).encode())
    elif p.endswith(".safetensors"):
        try:
            from safetensors.torch import save
        except ImportError as e:
            raise CalibrationError("saving .safetensors needs the safetensors package (pip install safetensors)") from e
        tensors: dict[str, torch.Tensor] = {}
        layers: dict[str, Any] = {}
        for name, s in scales.items():
            tensors[f"{name}.input_scale"] = torch.tensor([s.input_scale], dtype=torch.float32)
            tensors[f"{name}.weight_scale"] = s.weight_scale.detach().float().contiguous().clone()
            layers[name] = {"kind": s.kind, "input_amax": s.input_amax, "weight_axis": s.weight_axis,
                            "weight_shape": list(s.weight_shape)}
        meta = {"torch2trt_lite": json.dumps({**header, "layers": layers})}
        _atomic_write(p, save(tensors, metadata=meta))
    else:
        raise CalibrationError(f"calibration files are .json or .safetensors; got {p!r}")


def _header(s: Settings) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "dtype": s.dtype, "method": s.method,
        "percentile": s.percentile, "num_bins": s.num_bins, "skipped": dict(s.skipped),
    }


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_calibration(path: str) -> tuple[dict[str, Any], dict[str, tuple[float, torch.Tensor]]]:
    """(header with "layers" metadata, {layer: (input scale, weight scales)}) of a calibration file."""
    if not os.path.exists(path):
        raise CalibrationError(f"calibration file {path!r} does not exist")
    if path.endswith(".json"):
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CalibrationError(f"calibration file {path!r} is not valid JSON: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("layers"), dict):
            raise CalibrationError(f"calibration file {path!r} is not a torch2trt-lite calibration (no 'layers' table)")
        values: dict[str, tuple[float, torch.Tensor]] = {}
        for name, entry in doc["layers"].items():
            try:
                values[name] = (float(entry["input_scale"]), torch.tensor([float(v) for v in entry["weight_scale"]]))
            except (KeyError, TypeError, ValueError) as e:
                raise CalibrationError(f"calibration file {path!r}: layer {name!r} has a bad entry ({e!r})") from e
        return doc, values
    if path.endswith(".safetensors"):
        try:
            from safetensors import SafetensorError, safe_open
        except ImportError as e:
            raise CalibrationError("reading .safetensors needs the safetensors package (pip install safetensors)") from e
        try:
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        except (SafetensorError, OSError, ValueError) as e:
            raise CalibrationError(f"calibration file {path!r} is not a valid safetensors file: {e}") from e
        try:
            doc = json.loads(meta["torch2trt_lite"])
        except (KeyError, json.JSONDecodeError) as e:
            raise CalibrationError(
                f"calibration file {path!r} has no torch2trt-lite metadata (not written by save_calibration)"
            ) from e
        if not isinstance(doc, dict) or not isinstance(doc.get("layers"), dict):
            raise CalibrationError(f"calibration file {path!r}: its metadata has no 'layers' table")
        values = {}
        for name in doc["layers"]:
            si, sw = tensors.get(f"{name}.input_scale"), tensors.get(f"{name}.weight_scale")
            if si is None or sw is None or si.numel() != 1:
                raise CalibrationError(f"calibration file {path!r}: the scales of layer {name!r} are missing")
            values[name] = (float(si.float().reshape(())), sw.float().reshape(-1))
        return doc, values
    raise CalibrationError(f"calibration files are .json or .safetensors; got {path!r}")


__all__ = ["FORMAT", "FORMAT_VERSION", "LayerScales", "Settings", "read_calibration", "write_calibration"]
