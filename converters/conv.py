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
    if is_traced(b):
        return "a bias computed from the network inputs is not supported (TensorRT needs a constant bias)"
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    if is_traced(w):
        if not float_dtype(w.dtype):
            return f"a kernel tensor must be floating-point, got {w.dtype}"
        transposed = "transpose" in call.qualname
        n = w.dim() - 2
        s = ntuple(call.arg(3, "stride", 1), n)
        d = ntuple(call.arg(7 if transposed else 5, "dilation", 1), n)
        if transposed and any(v > 1 for v in s) and any(v > 1 for v in d):
            return ("a strided and dilated transposed convolution with a kernel computed in the network is not "
                    "supported (TensorRT-RTX has no strided dilated deconvolution)")
        if transposed:
            p = ntuple(call.arg(4, "padding", 0), n)
            op = ntuple(call.arg(5, "output_padding", 0), n)
            if any(o > q for o, q in zip(op, p, strict=True)):
                return "output_padding larger than padding with a kernel computed in the network is not supported"
    return None


def _traced_kernel(ctx: ConversionContext, call: Call, transposed: bool) -> Any:
    """A (de)convolution whose kernel is a network tensor (e.g. constant -> Q -> DQ of quantized
    weights): the layer is created with empty kernel weights and the kernel set as input 1."""
    from .impl.conv import _kernel_weights, _padding
    from .impl.nn_common import rank, squeeze, unsqueeze

    x, w, b = ctx.itensor(call.arg(0, "input")), call.arg(1, "weight"), call.arg(2, "bias", None)
    dt = call.output.dtype
    n = w.dim() - 2
    if transposed:
        s, p, op = (ntuple(call.arg(i, nm, 0 if i > 3 else 1), n) for i, nm in
                    ((3, "stride"), (4, "padding"), (5, "output_padding")))
        g, d = int(call.arg(6, "groups", 1)), ntuple(call.arg(7, "dilation", 1), n)
        pre, post = list(p), [q - o for q, o in zip(p, op, strict=True)]
    else:
        s, d, g = ntuple(call.arg(3, "stride", 1), n), ntuple(call.arg(5, "dilation", 1), n), int(call.arg(6, "groups", 1))
        pre, post = _padding(call.arg(4, "padding", 0), n, list(w.shape[2:]), d)
    unbatched = rank(x) == n + 1
    if unbatched:
        x = unsqueeze(ctx, x, [0])
    kernel = ctx.itensor(w, dt)
    k, st, di = list(w.shape[2:]), list(s), list(d)
    if n == 1:  # NOTE: a 1D convolution runs as a 2D one on [N, C, L, 1]
        x, kernel = unsqueeze(ctx, x, [-1]), unsqueeze(ctx, kernel, [-1])
        k, st, di, pre, post = k + [1], st + [1], di + [1], list(pre) + [0], list(post) + [0]
    maps = w.shape[1] * g if transposed else w.shape[0]
    add = ctx.network.add_deconvolution_nd if transposed else ctx.network.add_convolution_nd
    empty = ctx.weights(torch.zeros(0, dtype=dt))
    layer = add(x, int(maps), tuple(k), empty, _kernel_weights(ctx, b, dt) if b is not None else empty)
    layer.set_input(1, kernel)
    layer.stride_nd, layer.dilation_nd = tuple(st), tuple(di)
    layer.pre_padding, layer.post_padding = tuple(pre), tuple(post)
    layer.num_groups = g
    y = layer.get_output(0)
    if n == 1:
        y = squeeze(ctx, y, [-1])
    return squeeze(ctx, y, [0]) if unbatched else y


def _conv(ctx: ConversionContext, call: Call) -> Any:
    if is_traced(call.arg(1, "weight")):
        return _traced_kernel(ctx, call, transposed=False)
    return convolution(
        ctx, ctx.itensor(call.arg(0, "input")), call.arg(1, "weight"), call.arg(2, "bias", None),
        stride=call.arg(3, "stride", 1), padding=call.arg(4, "padding", 0), dilation=call.arg(5, "dilation", 1),
        groups=call.arg(6, "groups", 1), dtype=call.output.dtype,
    )


def _conv_transpose(ctx: ConversionContext, call: Call) -> Any:
    if is_traced(call.arg(1, "weight")):
        return _traced_kernel(ctx, call, transposed=True)
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
