"""Normalization builders: batch norm (folded into a convolution, else a scale layer), layer norm,
group norm, instance norm, RMS norm, LRN and Lp normalization."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .conv import fold_affine
from .nn_common import const, ew, is_traced, rank, reduce, reshape, squeeze, unary, unsqueeze

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def channel_affine(ctx: ConversionContext, it: Any, scale: torch.Tensor, shift: torch.Tensor,
                   dtype: torch.dtype) -> Any:
    """``it * scale + shift`` with per-channel (axis 1) constants."""
    r = rank(it)
    if r >= 4:
        # NOTE: add_scale takes the third to last dim as the channel (D of [N, C, D, H, W]): name axis 1
        mode = ctx.trt.ScaleMode.CHANNEL
        layer = ctx.network.add_scale_nd(it, mode, ctx.weights(shift.to(dtype)), ctx.weights(scale.to(dtype)),
                                         ctx.trt.Weights(ctx.trt_dtype(dtype)), 1)
        return layer.get_output(0)
    shape = (1, -1) + (1,) * (r - 2)
    y = ew(ctx, it, const(ctx, scale.reshape(shape), dtype), "PROD")
    return ew(ctx, y, const(ctx, shift.reshape(shape), dtype), "SUM")


def batch_norm_eval(
    ctx: ConversionContext,
    it: Any,
    mean: torch.Tensor,
    var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    dtype: torch.dtype,
) -> Any:
    """Inference batch norm: folded into the convolution producing ``it`` when possible (see
    :func:`fold_affine`), else a per-channel scale."""
    m, v = mean.detach().double(), var.detach().double()
    scale = torch.rsqrt(v + eps)
    if weight is not None:
        scale = scale * weight.detach().double()
    shift = -m * scale
    if bias is not None:
        shift = shift + bias.detach().double()
    folded = fold_affine(ctx, it, scale, shift)
    if folded is not None:
        return folded
    return channel_affine(ctx, it, scale.float(), shift.float(), dtype)


def normalize_axes(
    ctx: ConversionContext,
    it: Any,
    axes: Sequence[int],
    eps: float,
    dtype: torch.dtype,
    num_groups: int = 1,
    scale: Any = None,
    bias: Any = None,
) -> Any:
    """``(x - mean) / sqrt(var + eps) * scale + bias`` over ``axes`` (one INormalizationLayer).

    ``scale``/``bias`` are network tensors of the input's rank broadcasting to it (unit scale and
    zero bias when None); with ``num_groups > 1`` they must be per group ``[1, G, 1, ...]``.
    """
    r = rank(it)
    shape = (1,) * r if num_groups == 1 else (1, num_groups) + (1,) * (r - 2)
    if scale is None:
        scale = const(ctx, torch.ones(shape), dtype)
    if bias is None:
        bias = const(ctx, torch.zeros(shape), dtype)
    mask = 0
    for a in axes:
        mask |= 1 << (a % r)
    layer = ctx.network.add_normalization(it, scale, bias, mask)
    layer.epsilon = float(eps)
    if num_groups != 1:
        layer.num_groups = int(num_groups)
    return layer.get_output(0)


def operand(ctx: ConversionContext, t: Any, dtype: torch.dtype, shape: Sequence[int]) -> Any:
    """A torch tensor (constant or traced) as a network tensor reshaped to ``shape``."""
    if t is None:
        return None
    if is_traced(t):
        return reshape(ctx, ctx.itensor(t, dtype), shape)
    return const(ctx, t.detach().reshape(tuple(shape)), dtype)


def affine(ctx: ConversionContext, it: Any, weight: Any, bias: Any, dtype: torch.dtype, shape: Sequence[int]) -> Any:
    """``it * weight + bias`` where weight/bias (torch tensors or None) are reshaped to ``shape``."""
    if weight is not None:
        it = ew(ctx, it, operand(ctx, weight, dtype, shape), "PROD")
    if bias is not None:
        it = ew(ctx, it, operand(ctx, bias, dtype, shape), "SUM")
    return it


def layer_norm(ctx: ConversionContext, it: Any, ndims: int, weight: Any, bias: Any, eps: float,
               dtype: torch.dtype) -> Any:
    r = rank(it)
    shape = (1,) * (r - ndims) + tuple(it.shape[r - ndims:])
    return normalize_axes(ctx, it, range(r - ndims, r), eps, dtype,
                          scale=operand(ctx, weight, dtype, shape), bias=operand(ctx, bias, dtype, shape))


def group_norm(ctx: ConversionContext, it: Any, groups: int, weight: Any, bias: Any, eps: float,
               dtype: torch.dtype) -> Any:
    r = rank(it)
    if r == 2 and groups > 1:  # [N, C]: each group normalizes over its C / G channels; a spatial dim of 1
        return squeeze(ctx, group_norm(ctx, unsqueeze(ctx, it, [2]), groups, weight, bias, eps, dtype), [2])
    cshape = (1, -1) + (1,) * (r - 2)
    if groups == 1:
        return normalize_axes(ctx, it, range(1, r), eps, dtype,
                              scale=operand(ctx, weight, dtype, cshape), bias=operand(ctx, bias, dtype, cshape))
    # NOTE: add_normalization's group scale/bias are per group; the per-channel affine follows
    y = normalize_axes(ctx, it, range(2, r), eps, dtype, num_groups=groups)
    if weight is not None and bias is not None and not is_traced(weight) and not is_traced(bias) and r >= 4:
        return channel_affine(ctx, y, weight.detach().float(), bias.detach().float(), dtype)
    return affine(ctx, y, weight, bias, dtype, cshape)


def instance_norm(ctx: ConversionContext, it: Any, weight: Any, bias: Any, eps: float, dtype: torch.dtype) -> Any:
    r = rank(it)
    cshape = (1, -1) + (1,) * (r - 2)
    return normalize_axes(ctx, it, range(2, r), eps, dtype,
                          scale=operand(ctx, weight, dtype, cshape), bias=operand(ctx, bias, dtype, cshape))


def rms_norm(ctx: ConversionContext, it: Any, ndims: int, weight: Any, eps: float | None,
             dtype: torch.dtype) -> Any:
    """``x * rsqrt(mean(x^2 over the last ndims) + eps) * weight`` (computed in fp32 for halves)."""
    r = rank(it)
    x = ctx.cast(it, torch.float32) if dtype != torch.float32 else it
    if eps is None:  # NOTE: torch takes fp32's eps for fp16/bf16 too (it computes in fp32 as well)
        eps = float(torch.finfo(torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype).eps)
    sq = ew(ctx, x, x, "PROD")
    ms = reduce(ctx, sq, "AVG", range(r - ndims, r), True)
    ms = ew(ctx, ms, const(ctx, eps, torch.float32, r), "SUM")
    inv = unary(ctx, unary(ctx, ms, "SQRT"), "RECIP")
    y = ew(ctx, x, inv, "PROD")
    if dtype != torch.float32:
        y = ctx.cast(y, dtype)
    shape = (1,) * (r - ndims) + tuple(it.shape[r - ndims:])
    return affine(ctx, y, weight, None, dtype, shape)


def local_response_norm(ctx: ConversionContext, it: Any, size: int, alpha: float, beta: float, k: float,
                        dtype: torch.dtype) -> Any:
    """torch's LRN across channels: ``x / (k + alpha / size * sum of x^2 over the window)^beta``."""
    if size % 2 == 1 and 1 <= size <= 15 and 0.01 <= beta <= 1e5 and 1e-5 <= k <= 1e10 and abs(alpha) <= 1e20:
        r = rank(it)
        spatial = tuple(it.shape)[2:]
        if r == 4 or sum(d < 0 for d in spatial) > 1:
            return ctx.network.add_lrn(it, int(size), float(alpha), float(beta), float(k)).get_output(0)
        # NOTE: TensorRT's LRN takes a 4D [N, C, H, W] input: [N, C, L] and [N, C, D, H, W] run on
        # [N, C, prod(spatial), 1] (the window is across channels only) and are reshaped back
        x4 = reshape(ctx, it, (0, 0, -1, 1))
        y = ctx.network.add_lrn(x4, int(size), float(alpha), float(beta), float(k)).get_output(0)
        return reshape(ctx, y, (0, 0, *(d if d >= 0 else -1 for d in spatial)))
    # NOTE: outside ILRNLayer's limits: average x^2 over a (size, 1) window on [N, 1, C, rest]
    shape = tuple(it.shape)
    n, c = shape[0], shape[1]
    sq = reshape(ctx, ew(ctx, it, it, "PROD"), (n, 1, c, -1))
    layer = ctx.network.add_pooling_nd(sq, ctx.trt.PoolingType.AVERAGE, (size, 1))
    layer.pre_padding = (size // 2, 0)
    layer.post_padding = ((size - 1) // 2, 0)
    layer.average_count_excludes_padding = False
    div = reshape(ctx, layer.get_output(0), shape)
    r = len(shape)
    div = ew(ctx, ew(ctx, div, const(ctx, alpha, dtype, r), "PROD"), const(ctx, k, dtype, r), "SUM")
    div = ew(ctx, div, const(ctx, beta, dtype, r), "POW")
    return ew(ctx, it, div, "DIV")


def lp_normalize(ctx: ConversionContext, it: Any, p: float, dim: int, eps: float, dtype: torch.dtype) -> Any:
    """``x / max(||x||_p over dim, eps)`` (F.normalize)."""
    norm = vector_norm(ctx, it, p, [dim], True, dtype)
    r = rank(it)
    norm = ew(ctx, norm, const(ctx, eps, dtype, r), "MAX")
    return ew(ctx, it, norm, "DIV")


def vector_norm(ctx: ConversionContext, it: Any, p: float, dims: Sequence[int], keep: bool,
                dtype: torch.dtype) -> Any:
    """``||x||_p`` over ``dims``: p = 2 (sqrt of sum of squares), 1, inf, -inf, 0 or any other p.
    fp16/bf16 are computed in fp32 like torch (|x|^p overflows half from |x| ~ 256 for p = 2)."""
    if dtype in (torch.float16, torch.bfloat16):
        return ctx.cast(vector_norm(ctx, ctx.cast(it, torch.float32), p, dims, keep, torch.float32), dtype)
    r = rank(it)
    if p == 2:
        return unary(ctx, reduce(ctx, ew(ctx, it, it, "PROD"), "SUM", dims, keep), "SQRT")
    a = unary(ctx, it, "ABS")
    if p == 1:
        return reduce(ctx, a, "SUM", dims, keep)
    if p == float("inf"):
        return reduce(ctx, a, "MAX", dims, keep)
    if p == float("-inf"):
        return reduce(ctx, a, "MIN", dims, keep)
    if p == 0:  # the count of non-zeros; NaN counts, as in torch
        nz = ctx.cast(unary(ctx, ew(ctx, it, const(ctx, 0.0, dtype, r), "EQUAL"), "NOT"), dtype)
        return reduce(ctx, nz, "SUM", dims, keep)
    s = reduce(ctx, ew(ctx, a, const(ctx, p, dtype, r), "POW"), "SUM", dims, keep)
    return ew(ctx, s, const(ctx, 1.0 / p, dtype, rank(s)), "POW")
