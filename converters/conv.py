"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d (functional forms; nn.Conv* call them)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from torch2trt_lite.context import ConversionContext
from torch2trt_lite.registry import Call, converter, register_table

from .impl.conv import convolution, fold, unfold
from .impl.nn_common import float_dtype, is_traced, ntuple


def _check(call: Call) -> str | None:
    x, w = call.arg(0, "input"), call.arg(1, "weight")
    b = call.arg(2, "bias", None)
    if is_traced(w) or is_traced(b):
        return "weights or bias computed from the network inputs are not supported (TensorRT needs constant weights)"
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    return None


def _conv(ctx: ConversionContext, call: Call) -> Any:
    return convolution(
        ctx, ctx.itensor(call.arg(0, "input")), call.arg(1, "weight"), call.arg(2, "bias", None),
        stride=call.arg(3, "stride", 1), padding=call.arg(4, "padding", 0), dilation=call.arg(5, "dilation", 1),
        groups=call.arg(6, "groups", 1), dtype=call.output.dtype,
    )


def _conv_transpose(ctx: ConversionContext, call: Call) -> Any:
    return convolution(
        ctx, ctx.itensor(call.arg(0, "input")), call.arg(1, "weight"), call.arg(2, "bias", None),
        stride=call.arg(3, "stride", 1), padding=call.arg(4, "padding", 0),
        output_padding=call.arg(5, "output_padding", 0), groups=call.arg(6, "groups", 1),
        dilation=call.arg(7, "dilation", 1), transposed=True, dtype=call.output.dtype,
    )


register_table(
    {
        torch.conv1d: _conv,
        torch.conv2d: _conv,
        torch.conv3d: _conv,
        torch.conv_transpose1d: _conv_transpose,
        torch.conv_transpose2d: _conv_transpose,
        torch.conv_transpose3d: _conv_transpose,
    },
    lambda fn: fn,
    check=_check,
)


# -------------------------------------------------------------------------- unfold / fold
def _patch_args(call: Call, first: int) -> tuple[tuple[int, ...], ...]:
    names = ("kernel_size", "dilation", "padding", "stride")
    defaults = (None, 1, 0, 1)
    return tuple(ntuple(call.arg(first + i, n, d), 2) for i, (n, d) in enumerate(zip(names, defaults, strict=True)))


def _check_patches(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return "input must be a floating-point tensor"
    return None


@converter(F.unfold, check=_check_patches)
def convert_unfold(ctx: ConversionContext, call: Call) -> Any:
    k, d, p, s = _patch_args(call, 1)
    return unfold(ctx, ctx.itensor(call.arg(0, "input")), k, d, p, s, call.output.dtype)


@converter(F.fold, check=_check_patches)
def convert_fold(ctx: ConversionContext, call: Call) -> Any:
    out = ntuple(call.arg(1, "output_size"), 2)
    k, d, p, s = _patch_args(call, 2)
    return fold(ctx, ctx.itensor(call.arg(0, "input")), out, k, d, p, s, call.output.dtype)
