"""Fake quantization: the functions the converter turns into Q/DQ layers, and the quantized layers
that call them.

:func:`fake_quantize_fp8` and :func:`fake_quantize_weight` are converter targets
(``converters/quantization.py``): while tracing, each call becomes ``IQuantizeLayer`` +
``IDequantizeLayer``. The registry names a target by the module that defines it
(``torch2trt_lite.quantization.fake.fake_quantize_fp8``) and patches it there and in the package
that re-exports it, so the quantized layers below, which call them by this module's names, are
traced as Q/DQ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = ("int8", "fp8")
QMAX = {"int8": 127.0, "fp8": 448.0}
INT8_MIN, INT8_MAX = -128, 127
FP8_MAX = 448.0

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_DECONV = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
QUANTIZABLE: tuple[type[nn.Module], ...] = (*_CONV, *_DECONV, nn.Linear)


# ------------------------------------------------------------------------ fake quantization
def _scale_view(scale: torch.Tensor, ndim: int, axis: int | None) -> torch.Tensor:
    if axis is None or scale.numel() == 1:
        return scale.reshape(())
    view = [1] * ndim
    view[axis] = scale.numel()
    return scale.reshape(view)


def fake_quantize_fp8(x: torch.Tensor, scale: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """FP8 (E4M3) fake quantization: ``x / scale`` rounded to FP8 (to nearest even, saturating at
    +-448), times ``scale``; per-tensor (``axis=None``, one scale) or per-channel along ``axis``.

    Computed in float32 with the scale in ``x``'s dtype, as TensorRT's Q/DQ pair does (the
    converter turns this call into IQuantizeLayer(FP8) + IDequantizeLayer)."""
    if axis is not None and axis < 0:
        axis += x.dim()
    s = _scale_view(scale.detach().to(x.dtype).float(), x.dim(), axis)
    q = (x.float() / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (q.float() * s).to(x.dtype)


def fake_quantize_weight(weight: torch.Tensor, scale: torch.Tensor, axis: int, dtype: str) -> torch.Tensor:
    """Per-channel fake quantization of a layer's weight (INT8 through
    ``torch.fake_quantize_per_channel_affine``, FP8 through :func:`fake_quantize_fp8`).

    While tracing, this call converts (``constant_inputs``: though a weight is not computed from the
    inputs) into ``constant -> IQuantizeLayer -> IDequantizeLayer``, the weight form TensorRT's
    INT8 / FP8 kernels need."""
    if dtype == "int8":
        zp = torch.zeros(scale.numel(), dtype=torch.int32, device=weight.device)
        return torch.fake_quantize_per_channel_affine(
            weight, scale.detach().float().reshape(-1), zp, axis, INT8_MIN, INT8_MAX
        )
    return fake_quantize_fp8(weight, scale, axis)


class FakeQuantizer(nn.Module):
    """Fake quantization of one tensor: ``scale`` is a per-tensor scale (``axis`` None, input
    activations) or per-channel along ``axis`` (weights)."""

    scale: torch.Tensor
    zero_point: torch.Tensor

    def __init__(self, scale: torch.Tensor, dtype: str, axis: int | None = None) -> None:
        super().__init__()
        self.dtype = dtype
        self.axis = axis
        self.register_buffer("scale", scale.detach().float().reshape(-1 if axis is not None else 1).clone())
        self.register_buffer("zero_point", torch.zeros(self.scale.numel(), dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.axis is not None:
            return fake_quantize_weight(x, self.scale, self.axis, self.dtype)
        if self.dtype == "int8":
            return torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point, INT8_MIN, INT8_MAX)
        return fake_quantize_fp8(x, self.scale)

    def extra_repr(self) -> str:
        kind = "per-tensor" if self.axis is None else f"per-channel axis={self.axis}"
        return f"{self.dtype}, {kind}, {self.scale.numel()} scale(s)"


# ------------------------------------------------------------------ quantized layer classes
class QuantMixin:
    """Forward of a quantized layer: fake-quantize the input, then the weight, then the layer."""

    input_quantizer: FakeQuantizer
    weight_quantizer: FakeQuantizer
    weight: Any
    bias: Any

    def _weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xq = self.input_quantizer(x)
        return xq, self.weight_quantizer(self.weight)


class QuantLinear(QuantMixin, nn.Linear):
    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 (torch's name)
        x, w = self._weights(input)
        return F.linear(x, w, self.bias)


class _QuantConv(QuantMixin):
    _conv_forward: Callable[..., torch.Tensor]

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002
        x, w = self._weights(input)
        return self._conv_forward(x, w, self.bias)


class QuantConv1d(_QuantConv, nn.Conv1d):
    pass


class QuantConv2d(_QuantConv, nn.Conv2d):
    pass


class QuantConv3d(_QuantConv, nn.Conv3d):
    pass


_DECONV_FN = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


class _QuantConvTranspose(QuantMixin):
    _output_padding: Callable[..., Any]
    stride: Any
    padding: Any
    kernel_size: Any
    dilation: Any
    groups: Any
    padding_mode: Any

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:  # noqa: A002
        if self.padding_mode != "zeros":
            raise ValueError(f"Only 'zeros' padding mode is supported for {type(self).__name__}")
        n = len(self.kernel_size)
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, n, self.dilation
        )
        x, w = self._weights(input)
        return _DECONV_FN[n](x, w, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation)


class QuantConvTranspose1d(_QuantConvTranspose, nn.ConvTranspose1d):
    pass


class QuantConvTranspose2d(_QuantConvTranspose, nn.ConvTranspose2d):
    pass


class QuantConvTranspose3d(_QuantConvTranspose, nn.ConvTranspose3d):
    pass


QUANT_CLASS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: QuantLinear,
    nn.Conv1d: QuantConv1d, nn.Conv2d: QuantConv2d, nn.Conv3d: QuantConv3d,
    nn.ConvTranspose1d: QuantConvTranspose1d, nn.ConvTranspose2d: QuantConvTranspose2d,
    nn.ConvTranspose3d: QuantConvTranspose3d,
}


def stock_base(m: nn.Module) -> type[nn.Module] | None:
    """The quantizable torch class ``m`` is (or subclasses without its own forward), else None."""
    for base in QUANT_CLASS:
        if isinstance(m, base) and type(m).forward is base.forward:
            return base
    return None


def weight_axis(m: nn.Module) -> int:
    """The output-channel axis of a layer's weight: 1 for transposed convolutions, else 0."""
    return 1 if isinstance(m, _DECONV) else 0


__all__ = [
    "DTYPES", "FP8_MAX", "INT8_MAX", "INT8_MIN", "QMAX", "QUANTIZABLE", "QUANT_CLASS", "FakeQuantizer",
    "QuantConv1d", "QuantConv2d", "QuantConv3d", "QuantConvTranspose1d", "QuantConvTranspose2d",
    "QuantConvTranspose3d", "QuantLinear", "QuantMixin", "fake_quantize_fp8", "fake_quantize_weight",
    "stock_base", "weight_axis",
]
