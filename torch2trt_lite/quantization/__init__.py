"""Explicit INT8 / FP8 post-training quantization: calibrate in PyTorch, convert to Q/DQ layers.

TensorRT 11 and TensorRT-RTX build strongly typed networks only: there is no INT8 builder flag and
no calibrator. A quantized network holds explicit ``IQuantizeLayer`` / ``IDequantizeLayer`` pairs
("explicit quantization"): one on the input activation of each quantized convolution / linear layer
(per-tensor scale) and one on its weights (per-output-channel scale, ``constant -> Q -> DQ ->
kernel``), which TensorRT fuses into INT8 / FP8 kernels.

    qmodel = torch2trt_lite.quantize(model, batches, dtype="int8", method="entropy")
    qmodel(x)                                  # eager PyTorch with fake quantization: the quantized accuracy
    trt_model = torch2trt_lite.convert(qmodel, [x])
    qmodel.save_calibration("scales.json")     # or .safetensors; reuse without data:
    again = torch2trt_lite.quantize(model, None, calibration="scales.json")

Scales are symmetric (zero point 0): INT8 ``scale = amax / 127`` (values rounded half to even and
clamped to [-128, 127]); FP8 E4M3 ``scale = amax / 448``. Activation ``amax`` comes from the
calibration method: ``"max"`` (largest |x| seen), ``"percentile"`` (that percentile of the |x|
histogram), ``"entropy"`` (TensorRT's KL-divergence calibration over the histogram) or ``"mse"``
(the amax of least quantization mean squared error over the histogram). Weight ``amax`` is the
largest |w| of each output channel (axis 0; axis 1 for transposed convolutions).

The eager forward of a :class:`QuantizedModel` calls ``torch.fake_quantize_per_tensor_affine`` /
``torch.fake_quantize_per_channel_affine`` (INT8) or :func:`fake_quantize_fp8` (FP8); the tracer
converts those calls into Q/DQ layers. A model fake-quantized by hand with the two torch functions
converts the same way.

The package, by concern: :mod:`.fake` (the fake-quantization functions, which the converter turns
into Q/DQ layers, and the quantized layer classes), :mod:`.methods` (calibration statistics and the
amax methods), :mod:`.files` (calibration files) and :mod:`.model` (:func:`quantize`,
:class:`QuantizedModel`, :func:`load_calibration`, :func:`quantization_info`).
"""

from __future__ import annotations

from .fake import (
    DTYPES,
    FP8_MAX,
    INT8_MAX,
    INT8_MIN,
    QMAX,
    QUANTIZABLE,
    FakeQuantizer,
    QuantConv1d,
    QuantConv2d,
    QuantConv3d,
    QuantConvTranspose1d,
    QuantConvTranspose2d,
    QuantConvTranspose3d,
    QuantLinear,
    fake_quantize_fp8,
    fake_quantize_weight,
    weight_axis,
)
from .files import FORMAT, FORMAT_VERSION, LayerScales, Settings
from .methods import (
    METHODS,
    CalibrationError,
    Observer,
    amax_entropy,
    amax_mse,
    amax_percentile,
    compute_amax,
    weight_amax,
)
from .model import QuantizedModel, load_calibration, quantizable_layers, quantization_info, quantize

__all__ = [
    "DTYPES", "FORMAT", "FORMAT_VERSION", "FP8_MAX", "INT8_MAX", "INT8_MIN", "METHODS", "QMAX", "QUANTIZABLE",
    "CalibrationError", "FakeQuantizer", "LayerScales", "Observer", "QuantConv1d", "QuantConv2d", "QuantConv3d",
    "QuantConvTranspose1d", "QuantConvTranspose2d", "QuantConvTranspose3d", "QuantLinear", "QuantizedModel",
    "Settings", "amax_entropy", "amax_mse", "amax_percentile", "compute_amax", "fake_quantize_fp8",
    "fake_quantize_weight", "load_calibration", "quantizable_layers", "quantization_info", "quantize", "weight_amax",
    "weight_axis",
]
