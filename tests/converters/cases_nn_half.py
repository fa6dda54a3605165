"""Harness cases: nn converters on float16 (and a few bfloat16) inputs (weights are stored in the input's dtype).

Tolerances are fp16's: the sim computes halves in fp32 and rounds once per layer, torch's CPU
kernels round differently (and BN folding changes the rounding points).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn

_H = torch.float16
_TOL = {"rtol": 1e-2, "atol": 1e-2}


def _half(factory):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        torch.manual_seed(0)
        m = factory()
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                with torch.no_grad():
                    mod.running_mean.uniform_(-0.5, 0.5)
                    mod.running_var.uniform_(0.5, 2.0)
        return m.half()

    return make


def _bf16(m: nn.Module) -> nn.Module:
    return m.to(torch.bfloat16)


CASES = [
    Case("half_conv_bn_relu", _half(lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())),
         lambda: [randn(1, 3, 8, 8, dtype=_H)], is_module=True, **_TOL),
    Case("half_conv_transpose", _half(lambda: nn.ConvTranspose2d(3, 4, 3, stride=2)), lambda: [randn(1, 3, 5, 5, dtype=_H)],
         is_module=True, **_TOL),
    Case("half_batch_norm_scale", _half(lambda: nn.BatchNorm2d(3)), lambda: [randn(2, 3, 4, 4, dtype=_H)],
         is_module=True, **_TOL),
    Case("half_pools", lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 2) + F.adaptive_avg_pool2d(x, 3),
         lambda: [randn(1, 3, 6, 6, dtype=_H)], **_TOL),
    Case("half_linear", _half(lambda: nn.Linear(8, 4)), lambda: [randn(3, 8, dtype=_H)], is_module=True, **_TOL),
    Case("half_layer_norm", _half(lambda: nn.LayerNorm(8)), lambda: [randn(3, 8, dtype=_H)], is_module=True, **_TOL),
    Case("half_group_norm", _half(lambda: nn.GroupNorm(2, 4)), lambda: [randn(2, 4, 3, 3, dtype=_H)], is_module=True,
         **_TOL),
    Case("half_interpolate_bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
         lambda: [randn(1, 2, 3, 4, dtype=_H)], **_TOL),
    Case("half_sdpa", F.scaled_dot_product_attention,
         lambda: [randn(1, 2, 4, 8, dtype=_H, seed=1), randn(1, 2, 5, 8, dtype=_H, seed=2),
                  randn(1, 2, 5, 8, dtype=_H, seed=3)], **_TOL),
    Case("half_embedding", lambda i: F.embedding(i, randn(6, 3, dtype=_H)), lambda: [torch.tensor([[1, 5], [0, 2]])],
         **_TOL),
    Case("half_batch_norm3d", _half(lambda: nn.BatchNorm3d(3)), lambda: [randn(1, 3, 2, 3, 4, dtype=_H)],
         is_module=True, **_TOL),
    # bfloat16 weights (on a real backend they are TensorRT Weights over the tensor's memory)
    Case("bf16_linear", lambda: _bf16(nn.Linear(8, 4)), lambda: [randn(3, 8, dtype=torch.bfloat16)],
         is_module=True, rtol=2e-2, atol=2e-2),
    Case("bf16_conv_bn", lambda: _bf16(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))),
         lambda: [randn(1, 3, 5, 5, dtype=torch.bfloat16)], is_module=True, rtol=3e-2, atol=3e-2),
    Case("half_lstm", _half(lambda: nn.LSTM(3, 4)), lambda: [randn(4, 2, 3, dtype=_H)], is_module=True, **_TOL),
]
