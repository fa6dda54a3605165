"""Activations: one table from torch callables to TensorRT ActivationType (+ alpha/beta)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from torch2trt_lite.context import ConversionContext
from torch2trt_lite.registry import Call, converter, register_table


def activation(ctx: ConversionContext, x: Any, kind: str, alpha: float = 0.0, beta: float = 0.0) -> Any:
    layer = ctx.network.add_activation(ctx.itensor(x), getattr(ctx.trt.ActivationType, kind))
    if alpha:
        layer.alpha = float(alpha)
    if beta:
        layer.beta = float(beta)
    return layer.get_output(0)


def _simple(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        return activation(ctx, call.arg(0, "input"), kind)

    return convert


register_table(
    {
        (F.relu, torch.relu, torch.Tensor.relu, torch.relu_, torch.Tensor.relu_, F.relu_): "RELU",
        (torch.sigmoid, torch.Tensor.sigmoid, F.sigmoid, torch.Tensor.sigmoid_): "SIGMOID",
        (torch.tanh, torch.Tensor.tanh, F.tanh, torch.Tensor.tanh_): "TANH",
    },
    _simple,
)


@converter(F.relu6)
def convert_relu6(ctx: ConversionContext, call: Call) -> Any:
    return activation(ctx, call.arg(0, "input"), "CLIP", 0.0, 6.0)
