"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d (functional forms; nn.Conv* call them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter, register_table

from .impl import shape as S
from .impl import sizes as Y
from .impl.conv import _patch_kernel, convolution, fold, unfold
from .impl.nn_common import const, ew, float_dtype, is_traced, ntuple, rank

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


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
    x, w, b = ctx.itensor(call.arg(0, "input")), call.arg(1, "weight"), call.arg(2, "bias", None)
    n = w.dim() - 2
    p, op = ntuple(call.arg(4, "padding", 0), n), ntuple(call.arg(5, "output_padding", 0), n)
    extra = [max(0, o - q) for o, q in zip(op, p, strict=True)]
    dynamic = -1 in tuple(x.shape) and any(extra)
    y = convolution(
        ctx, x, w, None if dynamic else b, stride=call.arg(3, "stride", 1), padding=p,
        output_padding=[min(o, q) for o, q in zip(op, p, strict=True)] if dynamic else op,
        groups=call.arg(6, "groups", 1), dilation=call.arg(7, "dilation", 1), transposed=True, dtype=call.output.dtype,
    )
    return _extend_end(ctx, y, extra, b, call.output.dtype) if dynamic else y


def _extend_end(ctx: ConversionContext, y: Any, extra: list[int], bias: torch.Tensor | None, dtype: torch.dtype) -> Any:
    """Output padding beyond the padding of a deconvolution whose input has dynamic dims: ``extra``
    zero rows at the end of each spatial dim (a FILL slice sized by a shape tensor), then the bias
    (those rows hold only the bias, as in torch)."""
    r, n = rank(y), len(extra)
    sizes = Y.network_sizes(ctx, y)
    out = [*sizes[:r - n], *(v + e for v, e in zip(sizes[r - n:], extra, strict=True))]
    layer = ctx.network.add_slice(y, (0,) * r, tuple(1 if Y.is_sym(v) else int(v) for v in out), (1,) * r)
    layer.set_input(2, Y.shape_tensor(ctx, out))
    layer.mode = ctx.trt.SampleMode.FILL
    y = layer.get_output(0)
    if bias is None:
        return y
    return ew(ctx, y, const(ctx, bias.reshape(-1, *([1] * n)), dtype, r), "SUM")


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
    if Y.dynamic(ctx):
        Y.refuse(call.qualname, list(Y.sizes_of(ctx, call.arg(0, "input"))[-3:]),
                 "unfold's channels set its one-hot kernel and its spatial dims the output's block count")
    return unfold(ctx, ctx.itensor(call.arg(0, "input")), k, d, p, s, call.output.dtype)


@converter(F.fold, check=_check_patches)
def convert_fold(ctx: ConversionContext, call: Call) -> Any:
    out = ntuple(call.arg(1, "output_size"), 2)
    k, d, p, s = _patch_args(call, 2)
    x = ctx.itensor(call.arg(0, "input"))
    shape = tuple(x.shape)
    if -1 not in shape:
        return fold(ctx, x, out, k, d, p, s, call.output.dtype)
    # NOTE: dynamic dims: impl.conv.fold's grouped one-hot deconvolution, its output padding beyond the
    # padding added by _extend_end (a shape-tensor slice), its reshape copying the dynamic batch
    Y.refuse(call.qualname, [v for v in Y.sizes_of(ctx, call.arg(0, "input"))[-2:]],
             "fold's channels and block count set its kernel and output size")
    c = shape[-2] // int(torch.tensor(k).prod())
    blocks = [(o + 2 * q - dd * (kk - 1) - 1) // ss + 1 for o, kk, dd, q, ss in zip(out, k, d, p, s, strict=True)]
    y = S.reshape_spec(ctx, x, [S.Copy(i) for i in range(len(shape) - 1)] + blocks)
    full = [(bb - 1) * ss - 2 * q + dd * (kk - 1) + 1 for bb, kk, dd, q, ss in zip(blocks, k, d, p, s, strict=True)]
    op = [o - f for o, f in zip(out, full, strict=True)]
    y = convolution(ctx, y, _patch_kernel(c, k), None, s, p, d, c, transposed=True,
                    output_padding=[min(o, q) for o, q in zip(op, p, strict=True)], dtype=call.output.dtype)
    extra = [max(0, o - q) for o, q in zip(op, p, strict=True)]
    return _extend_end(ctx, y, extra, None, call.output.dtype) if any(extra) else y
