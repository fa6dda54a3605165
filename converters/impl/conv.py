"""Convolution builders: conv 1d/2d/3d, transposed conv, and folding a per-channel affine (batch norm).

TensorRT convolutions are 2D or 3D on inputs ``[N, C, spatial...]``; a 1D convolution runs as a
2D one on ``[N, C, L, 1]``, an unbatched input gets a batch dim of 1.

Folding: every convolution built here records how it was made in ``ctx.layer_info`` (keyed by the
id of its output tensor). :func:`fold_affine` rewrites the kernel and bias of that convolution to
absorb ``y * scale + shift`` when nothing else has consumed the convolution's output yet, and
re-maps every torch tensor that pointed at the convolution output to an unfolded convolution
created on first use (``ctx.set_lazy``): a later use of the pre-normalization tensor still gets
the right values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from .nn_common import ntuple, rank, squeeze, unsqueeze

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


@dataclass
class ConvRecord:
    """How a convolution was built (see the module docstring)."""

    layer: Any  # the IConvolutionLayer / IDeconvolutionLayer
    out: Any  # the network tensor handed back to the converter
    end: int  # network layer count after the builder ran (later layers are consumers)
    chain: tuple[Any, ...]  # tensors from the convolution output to ``out``
    weight: torch.Tensor
    bias: torch.Tensor | None
    groups: int
    transposed: bool
    dtype: torch.dtype
    rebuild: Callable[[], Any]


def _padding(padding: Any, n: int, kernel: Sequence[int], dilation: Sequence[int]) -> tuple[list[int], list[int]]:
    """(pre, post) explicit padding of torch's ``padding`` argument (int, tuple, 'same', 'valid')."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * n, [0] * n
        if padding == "same":
            total = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
            pre = [t // 2 for t in total]
            return pre, [t - p for t, p in zip(total, pre, strict=True)]
        raise ConversionError(f"unknown padding {padding!r}")
    p = list(ntuple(padding, n))
    return p, list(p)


def _kernel_weights(ctx: ConversionContext, w: torch.Tensor, dtype: torch.dtype) -> Any:
    return ctx.weights(w.detach().to(dtype).contiguous())


def convolution(
    ctx: ConversionContext,
    x: Any,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    *,
    transposed: bool = False,
    output_padding: Any = 0,
    dtype: torch.dtype = torch.float32,
) -> Any:
    """``conv{1,2,3}d`` / ``conv_transpose{1,2,3}d`` of ``x`` with constant ``weight`` and ``bias``."""
    n = weight.dim() - 2
    r = rank(x)
    unbatched = r == n + 1
    if r < n + 1:
        raise ConversionError(f"a {n}D convolution needs an input of rank {n + 1} or {n + 2}, got {r}")
    chain_in = x
    if unbatched:
        x = unsqueeze(ctx, x, [0])
    k = list(weight.shape[2:])
    s = list(ntuple(stride, n))
    d = list(ntuple(dilation, n))
    if transposed:
        p = list(ntuple(padding, n))
        pre, post = p, list(p)
        op = list(ntuple(output_padding, n))
        post = [q - o for q, o in zip(post, op, strict=True)]
    else:
        pre, post = _padding(padding, n, k, d)
    w = weight
    if transposed and any(v > 1 for v in s) and any(v > 1 for v in d):
        # NOTE: TensorRT-RTX refuses a strided and dilated deconvolution ("Strided & Dilated Deconv are
        # currently not supported"): the same deconvolution with the kernel dilated (zeros between taps)
        w, d = dilate_kernel(weight, d), [1] * n
        k = list(w.shape[2:])
    built = w  # the kernel as given to TensorRT, before the 1D -> 2D view (fold_affine rescales it)
    if n == 1:
        x = unsqueeze(ctx, x, [-1])
        w = w.unsqueeze(-1)
        k, s, d, pre, post = k + [1], s + [1], d + [1], pre + [0], post + [0]
    fill = [max(0, -q) for q in post]  # output_padding beyond the padding: bias-only rows at the end
    post = [max(0, q) for q in post]
    out_maps = w.shape[1] * groups if transposed else w.shape[0]
    add = ctx.network.add_deconvolution_nd if transposed else ctx.network.add_convolution_nd
    use_bias = bias is not None and not any(fill)
    if use_bias:
        assert bias is not None
        layer = add(x, int(out_maps), tuple(k), _kernel_weights(ctx, w, dtype), _kernel_weights(ctx, bias, dtype))
    else:
        layer = add(x, int(out_maps), tuple(k), _kernel_weights(ctx, w, dtype))
    layer.stride_nd = tuple(s)
    layer.dilation_nd = tuple(d)
    layer.pre_padding = tuple(pre)
    layer.post_padding = tuple(post)
    layer.num_groups = int(groups)
    y = layer.get_output(0)
    chain = [y]
    if any(fill):
        y = _extend_end(ctx, y, fill)
        if bias is not None:
            from .nn_common import const, ew

            y = ew(ctx, y, const(ctx, bias.reshape(-1, *([1] * len(k))), dtype, rank(y)), "SUM")
        chain.append(y)
    if n == 1:
        y = squeeze(ctx, y, [-1])
        chain.append(y)
    if unbatched:
        y = squeeze(ctx, y, [0])
        chain.append(y)

    def rebuild() -> Any:
        return convolution(ctx, chain_in, weight, bias, stride, padding, dilation, groups,
                           transposed=transposed, output_padding=output_padding, dtype=dtype)

    if not any(fill):
        ctx.layer_info[id(y)] = ConvRecord(
            layer, y, ctx.num_layers(), tuple(chain), built, bias, int(groups), transposed, dtype, rebuild
        )
    return y


def dilate_kernel(w: torch.Tensor, dilation: Sequence[int]) -> torch.Tensor:
    """``w`` [out, in, k...] with ``dilation - 1`` zeros between taps (kernel ``d * (k - 1) + 1``): the
    undilated kernel of the same (de)convolution."""
    w = w.detach()
    k = w.shape[2:]
    out = w.new_zeros(*w.shape[:2], *(dd * (kk - 1) + 1 for kk, dd in zip(k, dilation, strict=True)))
    out[(slice(None), slice(None), *(slice(None, None, dd) for dd in dilation))] = w
    return out


def _extend_end(ctx: ConversionContext, y: Any, extra: Sequence[int]) -> Any:
    """Zero-extend the trailing spatial dims of ``y`` by ``extra`` (a slice in FILL mode)."""
    shape = list(y.shape)
    n = len(extra)
    if any(v < 0 for v in shape):
        raise ConversionError("output_padding larger than padding needs static shapes")
    out = shape[:-n] + [v + e for v, e in zip(shape[-n:], extra, strict=True)]
    layer = ctx.network.add_slice(y, (0,) * len(shape), tuple(out), (1,) * len(shape))
    layer.mode = ctx.trt.SampleMode.FILL
    return layer.get_output(0)


def _consumed(ctx: ConversionContext, rec: ConvRecord) -> bool:
    """Did a layer added after the convolution read one of its chain tensors?"""
    names = {t.name for t in rec.chain}
    net = ctx.network
    for i in range(rec.end, int(net.num_layers)):
        layer = net.get_layer(i)
        for j in range(int(layer.num_inputs)):
            t = layer.get_input(j)
            if t is not None and (any(t is c for c in rec.chain) or t.name in names):
                return True
    for c in rec.chain:
        if c.is_network_output:
            return True
    return False


def conv_record(ctx: ConversionContext, it: Any) -> ConvRecord | None:
    rec = ctx.layer_info.get(id(it))
    if isinstance(rec, ConvRecord) and rec.out is it:
        return rec
    return None


def fold_affine(ctx: ConversionContext, it: Any, scale: torch.Tensor, shift: torch.Tensor) -> Any | None:
    """Fold ``y * scale + shift`` (per output channel) into the convolution that produced ``it``.

    Returns the folded output (``it`` itself) or None when ``it`` is not a foldable convolution
    output. Every torch tensor mapped to ``it`` (the pre-norm output and any alias of it) is
    re-mapped to an unfolded convolution, created once on first use.
    """
    rec = conv_record(ctx, it)
    if rec is None or _consumed(ctx, rec):
        return None
    # NOTE: scale and shift are computed in float64 by the caller; the kernel is scaled in float32
    # (one rounding per weight), which keeps folding cheap for large convolutions.
    # NOTE: few torch calls: each one a converter makes passes the tracer's value-read mode.
    w = rec.weight.detach()
    sc, sh = scale.detach().double().reshape(-1), shift.detach().double().reshape(-1)
    k = w.shape[2:]
    if rec.transposed:
        g = rec.groups
        cin, per = w.shape[0], w.shape[1]
        w_shape: tuple[int, ...] = (g, cin // g, per, *k)
        sc_view = sc.float().reshape(g, 1, per, *([1] * len(k)))
        wv = w.reshape(w_shape)
    else:
        w_shape = tuple(w.shape)
        sc_view = sc.float().reshape(-1, *([1] * (w.dim() - 1)))
        wv = w

    def fill(out: torch.Tensor) -> None:  # NOTE: the same fp32 products as folding eagerly
        ov = out.view(w_shape)
        if ov.dtype == torch.float32 and wv.dtype == torch.float32:
            torch.mul(wv, sc_view, out=ov)
        else:
            ov.copy_(wv.float() * sc_view)

    b = torch.addcmul(sh, rec.bias.detach().double(), sc) if rec.bias is not None else sh
    kernel_shape = (*w.shape, 1) if w.dim() == 3 else tuple(w.shape)  # conv1d runs as a 2D convolution
    # On the sim the folded kernel is computed straight into the plan when it is built (no copy).
    rec.layer.kernel = ctx.deferred_weights(kernel_shape, rec.dtype, fill)
    rec.layer.bias = _kernel_weights(ctx, b, rec.dtype)
    del ctx.layer_info[id(it)]
    made: list[Any] = []

    def unfolded() -> Any:
        if not made:
            made.append(rec.rebuild())
        return made[0]

    for t in ctx.aliases(it):
        ctx.set_lazy(t, unfolded)
    return it


def _patch_kernel(c: int, kernel: Sequence[int]) -> torch.Tensor:
    """[C * kh * kw, 1, kh, kw] one-hot kernels: output channel c * kh * kw + i * kw + j picks (i, j)."""
    kk = int(torch.tensor(kernel).prod())
    eye = torch.eye(kk).reshape(kk, 1, *kernel)
    return eye.repeat(c, 1, 1, 1)


def unfold(ctx: ConversionContext, x: Any, kernel: Sequence[int], dilation: Sequence[int], padding: Sequence[int],
           stride: Sequence[int], dtype: torch.dtype) -> Any:
    """im2col (``F.unfold``) of ``x`` [N, C, H, W] or [C, H, W]: a grouped convolution with one-hot kernels."""
    shape = tuple(x.shape)
    c = shape[-3]
    if c < 0 or any(d < 0 for d in shape[-2:]):
        from torch2trt_lite.errors import ConverterRefusal

        # NOTE: the channels set the one-hot kernel's size, the spatial dims the output's
        raise ConverterRefusal(f"unfold of an input whose channels or spatial dims are dynamic ({shape}, -1 = dynamic)")
    y = convolution(ctx, x, _patch_kernel(c, kernel), None, stride, padding, dilation, c, dtype=dtype)
    out = tuple(y.shape)
    from .nn_common import reshape

    return reshape(ctx, y, (*out[:-2], out[-2] * out[-1]))


def fold(ctx: ConversionContext, x: Any, output_size: Sequence[int], kernel: Sequence[int], dilation: Sequence[int],
         padding: Sequence[int], stride: Sequence[int], dtype: torch.dtype) -> Any:
    """col2im (``F.fold``) of ``x`` [N, C * kh * kw, L]: a grouped transposed convolution with one-hot kernels."""
    from .nn_common import reshape

    shape = tuple(x.shape)
    kk = int(torch.tensor(kernel).prod())
    c = shape[-2] // kk
    blocks = [(o + 2 * p - d * (k - 1) - 1) // s + 1
              for o, k, d, p, s in zip(output_size, kernel, dilation, padding, stride, strict=True)]
    y = reshape(ctx, x, (*shape[:-1], *blocks))
    full = [(b - 1) * s - 2 * p + d * (k - 1) + 1
            for b, k, d, p, s in zip(blocks, kernel, dilation, padding, stride, strict=True)]
    extra = [o - f for o, f in zip(output_size, full, strict=True)]
    return convolution(ctx, y, _patch_kernel(c, kernel), None, stride, padding, dilation, c,
                       transposed=True, output_padding=extra, dtype=dtype)
