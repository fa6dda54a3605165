"""Harness cases: fake quantization -> Q/DQ (converters/quantization.py).

Inputs are randn at scales with no simple ratio to the quantization scale, so no value lies within
a float32 ulp of a rounding boundary (where torch's ``x * (1/s)`` and TensorRT's ``x / s`` could
round apart, see tests/quantization/test_quantization.py): the engine equals eager at the default tolerance.
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn
from torch2trt_lite import quantization as qz

_ZP8 = torch.zeros(8, dtype=torch.int32)
_S8 = torch.linspace(0.011, 0.023, 8)


class _QuantWeightLinear(nn.Module):
    """A weight fake-quantized per output channel (constant -> Q -> DQ) feeding F.linear."""

    def __init__(self, dtype: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(5, 8) * 0.3)
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.w.detach().abs().amax(1) / qz.QMAX[self.dtype]
        return F.linear(x, qz.fake_quantize_weight(self.w, s, 0, self.dtype))


CASES = [
    Case("fake_quantize_per_tensor_float_scale",
         lambda x: torch.fake_quantize_per_tensor_affine(x, 0.0173, 0, -128, 127), lambda: [randn(2, 8, 5) * 1.3],
         targets=["torch.fake_quantize_per_tensor_affine"]),
    Case("fake_quantize_per_tensor_tensor_scale",
         lambda x: torch.fake_quantize_per_tensor_affine(x, torch.tensor([0.0211]), torch.tensor([0], dtype=torch.int32),
                                                         -128, 127), lambda: [randn(3, 7) * 2.1]),
    Case("fake_quantize_per_tensor_saturates_narrow_range",
         lambda x: torch.fake_quantize_per_tensor_affine(x, 0.0173, 0, -127, 127), lambda: [randn(4, 9) * 2.9]),
    Case("fake_quantize_per_channel",
         lambda x: torch.fake_quantize_per_channel_affine(x, _S8, _ZP8, 1, -128, 127), lambda: [randn(2, 8, 5) * 1.3],
         targets=["torch.fake_quantize_per_channel_affine"]),
    Case("fake_quantize_per_channel_last_axis_narrow",
         lambda x: torch.fake_quantize_per_channel_affine(x, _S8, _ZP8, 1, -127, 127), lambda: [randn(3, 8) * 2.7]),
    Case("fake_quantize_fp8_per_tensor",
         lambda x: qz.fake_quantize_fp8(x, torch.tensor([0.00731])), lambda: [randn(2, 8, 5) * 3.3],
         targets=["torch2trt_lite.quantization.fake.fake_quantize_fp8"]),
    Case("fake_quantize_fp8_per_channel_saturates",
         lambda x: qz.fake_quantize_fp8(x, _S8 * 0.01, 1), lambda: [randn(2, 8, 5) * 3.3]),
    Case("fake_quantize_weight_int8", lambda: _QuantWeightLinear("int8"), lambda: [randn(3, 8)], is_module=True,
         targets=["torch2trt_lite.quantization.fake.fake_quantize_weight"]),
    Case("fake_quantize_weight_fp8", lambda: _QuantWeightLinear("fp8"), lambda: [randn(3, 8)], is_module=True),
]

# A kernel computed in the network (here: an input; for quantized layers: constant -> Q -> DQ) is
# set as the (de)convolution's input 1 (converters/conv.py).
CASES += [
    Case("conv2d_kernel_input", lambda x, w: F.conv2d(x, w, torch.linspace(-1, 1, 6), stride=2, padding=1),
         lambda: [randn(2, 4, 9, 9), randn(6, 4, 3, 3, seed=1)], targets=["torch.conv2d"]),
    Case("conv2d_kernel_input_groups_same_padding", lambda x, w: F.conv2d(x, w, padding="same", groups=2, dilation=2),
         lambda: [randn(1, 4, 8, 8), randn(6, 2, 3, 3, seed=1)]),
    Case("conv1d_kernel_input_unbatched", lambda x, w: F.conv1d(x, w, padding=2),
         lambda: [randn(4, 11), randn(3, 4, 3, seed=1)], targets=["torch.conv1d"]),
    Case("conv_transpose2d_kernel_input", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
         lambda: [randn(2, 4, 5, 5), randn(4, 3, 3, 3, seed=1)], targets=["torch.conv_transpose2d"]),
    Case("conv_transpose1d_kernel_input_groups", lambda x, w: F.conv_transpose1d(x, w, groups=2, dilation=2),
         lambda: [randn(2, 4, 6), randn(4, 3, 3, seed=1)], targets=["torch.conv_transpose1d"]),
    Case("conv_transpose2d_kernel_input_strided_dilated",
         lambda x, w: F.conv_transpose2d(x, w, stride=2, dilation=2), lambda: [randn(1, 2, 4, 4), randn(2, 3, 3, 3, seed=1)],
         xfail="a strided and dilated transposed convolution with a kernel computed in the network is refused"),
]


def _modelopt_quantizer(num_bits: object, axis: int | None) -> nn.Module:
    from modelopt.torch.quantization.config import QuantizerAttributeConfig
    from modelopt.torch.quantization.nn import TensorQuantizer

    tq = TensorQuantizer(QuantizerAttributeConfig(num_bits=num_bits, axis=axis))
    tq.amax = torch.linspace(1.1, 2.3, 8).reshape(1, 8, 1) if axis is not None else torch.tensor(2.17)
    return tq.eval()


# NOTE: the modelopt converter is registered only once modelopt.torch.quantization is imported; the
# model factories import it (slow), so collecting this file does not.
if importlib.util.find_spec("modelopt") is not None:
    CASES += [
        Case("modelopt_tensor_quantizer_int8", lambda: _modelopt_quantizer(8, None), lambda: [randn(2, 8, 5) * 1.3],
             is_module=True, targets=["modelopt.torch.quantization.nn.modules.tensor_quantizer.TensorQuantizer"],
             rtol=1e-5, atol=1e-5),
        Case("modelopt_tensor_quantizer_int8_per_channel", lambda: _modelopt_quantizer(8, 1),
             lambda: [randn(2, 8, 5) * 1.3], is_module=True),
        Case("modelopt_tensor_quantizer_fp8", lambda: _modelopt_quantizer((4, 3), None), lambda: [randn(2, 8, 5) * 1.3],
             is_module=True),
    ]
