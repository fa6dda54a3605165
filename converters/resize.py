"""Resampling: interpolate / nn.Upsample, F.pad, grid_sample, affine_grid, pixel (un)shuffle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import pooling
from .impl import resize as rs
from .impl import shape as S
from .impl import sizes as Y
from .impl.nn_common import float_dtype, is_traced

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _float_input(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    return None


# --------------------------------------------------------------------------- interpolate
def _check_interpolate(call: Call) -> str | None:
    mode = call.arg(3, "mode", "nearest")
    if call.arg(6, "antialias", False):
        return "antialias=True has no TensorRT resize equivalent"
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area"):
        return f"mode {mode!r} is not supported"
    x = call.arg(0, "input")
    if mode != "nearest" and mode != "nearest-exact" and not float_dtype(x.dtype):
        return f"{mode} interpolation needs a floating-point input, got {x.dtype}"
    return None


@converter(F.interpolate, check=_check_interpolate)
def convert_interpolate(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    size, scale = call.arg(1, "size", None), call.arg(2, "scale_factor", None)
    mode = call.arg(3, "mode", "nearest")
    align = bool(call.arg(4, "align_corners", None) or False)
    recompute = call.arg(5, "recompute_scale_factor", None)
    it = ctx.itensor(x)
    n = x.dim() - 2
    out_shape: Any = tuple(call.output.shape)
    if mode == "area":  # adaptive average pooling to the spatial sizes (refused there when dynamic)
        spatial = out_shape[2:] if size is None else (list(size) if isinstance(size, (list, tuple)) else [size] * n)
        return pooling.adaptive_pool(ctx, it, "AVERAGE", spatial, call.output.dtype)
    if Y.dynamic(ctx) and (-1 in tuple(it.shape) or Y.has_sym(size)):
        # NOTE: dynamic shapes: the leading dims copied from the input, the spatial ones as given
        if size is None and recompute:
            Y.refuse("interpolate", Y.sizes_of(ctx, x)[2:], "recompute_scale_factor needs the spatial sizes' values")
        spatial = out_shape[2:] if size is None else (list(size) if isinstance(size, (list, tuple)) else [size] * n)
        out_shape = S.dims_tensor(ctx, it, [S.Copy(0), S.Copy(1), *spatial]) if (
            Y.has_sym(spatial) or -1 in tuple(it.shape)[:2]) else (*out_shape[:2], *spatial)
    scales = None
    if size is None and scale is not None and not recompute:
        scales = [float(s) for s in (scale if isinstance(scale, (list, tuple)) else [scale] * n)]
    return rs.interpolate(ctx, it, mode, out_shape, scales, align)


# ----------------------------------------------------------------------------------- pad
def _check_pad(call: Call) -> str | None:
    mode = call.arg(2, "mode", "constant")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        return f"pad mode {mode!r} is not supported"
    x = call.arg(0, "input")
    if mode == "constant" and x.dtype == torch.bool:
        return "constant padding of a bool tensor is not supported"
    return None


@converter(F.pad, check=_check_pad)
def convert_pad(ctx: ConversionContext, call: Call) -> Any:
    value = call.arg(3, "value", None)
    return rs.pad(ctx, ctx.itensor(call.arg(0, "input")), list(call.arg(1, "pad")), call.arg(2, "mode", "constant"),
                  0.0 if value is None else value, call.output.dtype)


# --------------------------------------------------------------------- grid sample / grid
def _check_grid_sample(call: Call) -> str | None:
    x = call.arg(0, "input")
    if x.dim() != 4:
        return "only 4D (bilinear/nearest/bicubic over H, W) grid sampling is supported by TensorRT"
    return _float_input(call)


@converter(F.grid_sample, check=_check_grid_sample)
def convert_grid_sample(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return rs.grid_sample(ctx, ctx.itensor(call.arg(0, "input"), dt), ctx.itensor(call.arg(1, "grid"), dt),
                          call.arg(2, "mode", "bilinear"), call.arg(3, "padding_mode", "zeros"),
                          bool(call.arg(4, "align_corners", None) or False))


def _check_affine_grid(call: Call) -> str | None:
    theta = call.arg(0, "theta")
    if not float_dtype(theta.dtype):
        return "theta must be floating point"
    if any(is_traced(s) for s in call.arg(1, "size")):
        return "size must be static"
    return None


@converter(F.affine_grid, check=_check_affine_grid)
def convert_affine_grid(ctx: ConversionContext, call: Call) -> Any:
    dt, size = call.output.dtype, list(call.arg(1, "size"))
    # NOTE: the batch (theta's, which PyTorch checks equal to size[0]) may be dynamic, the channels are
    # unused; the spatial sizes make the base grid
    Y.refuse("torch.nn.functional.affine_grid", size[2:], "the spatial sizes set the base grid's points")
    out = rs.affine_grid(ctx, ctx.itensor(call.arg(0, "theta"), dt), [-1 if Y.is_sym(size[0]) else int(size[0]),
                         1, *(int(s) for s in size[2:])], bool(call.arg(2, "align_corners", None) or False), dt)
    if Y.dynamic(ctx) and Y.is_sym(size[0]):
        ctx.known_sizes(out, [size[0], *(int(s) for s in size[2:]), len(size) - 2], tuple(call.output.shape))
    return out


# ------------------------------------------------------------------------- pixel shuffle
@converter(F.pixel_shuffle)
def convert_pixel_shuffle(ctx: ConversionContext, call: Call) -> Any:
    return rs.pixel_shuffle(ctx, ctx.itensor(call.arg(0, "input")), int(call.arg(1, "upscale_factor")), False)


@converter(torch.nn.ChannelShuffle, torch.channel_shuffle, torch.native_channel_shuffle)  # F.channel_shuffle is torch.channel_shuffle
def convert_channel_shuffle(ctx: ConversionContext, call: Call) -> Any:
    """[N, C, *] -> [N, g, C / g, *] -> swap the two -> [N, C, *] (ShuffleNet)."""
    if call.qualname.endswith("ChannelShuffle"):
        x, groups = call.arg(1, "input"), int(call.args[0].groups)
    else:
        x, groups = call.arg(0, "input"), int(call.arg(1, "groups"))
    it = ctx.itensor(x)
    shape = Y.sizes_of(ctx, x)  # NOTE: symbolic where dynamic (the batch of a dynamic-shape network)
    n, c, rest = shape[0], shape[1], shape[2:]
    y = S.reshape(ctx, it, (n, groups, c // groups, *rest))
    y = S.permute(ctx, y, (0, 2, 1, *range(3, 3 + len(rest))))
    return S.reshape(ctx, y, shape)


@converter(F.pixel_unshuffle)
def convert_pixel_unshuffle(ctx: ConversionContext, call: Call) -> Any:
    return rs.pixel_shuffle(ctx, ctx.itensor(call.arg(0, "input")), int(call.arg(1, "downscale_factor")), True)
