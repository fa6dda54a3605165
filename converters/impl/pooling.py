"""Pooling builders: max/avg pooling 1d/2d/3d, adaptive pooling, Lp pooling.

TensorRT pools 2D or 3D windows over the innermost dims of an input of rank >= window rank + 2;
1D pooling runs as 2D pooling on ``[..., L, 1]`` and unbatched inputs get a batch dim of 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import sizes as Y
from .nn_common import (
    const,
    ew,
    gather,
    matmul,
    permute,
    rank,
    reduce,
    reshape,
    slice_axis,
    squeeze,
    unsqueeze,
)

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def out_size(size: int, k: int, s: int, p: int, ceil_mode: bool, d: int = 1) -> int:
    """torch's pooling output size of one axis (ceil mode drops a window starting in the padding)."""
    span = size + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        o = -(-span // s) + 1
        if (o - 1) * s >= size + p:
            o -= 1
        return o
    return span // s + 1


def pool(
    ctx: ConversionContext,
    it: Any,
    kind: str,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Any:
    """``kind`` ("MAX" or "AVERAGE") pooling of the last ``len(kernel)`` dims of ``it`` like torch."""
    n = len(kernel)
    r = rank(it)
    shape = tuple(it.shape)
    want = [out_size(shape[r - n + i], kernel[i], stride[i], padding[i], ceil_mode) for i in range(n)]
    squeeze_axes: list[int] = []
    x = it
    if r < n + 2:  # unbatched: a leading batch dim of 1
        x = unsqueeze(ctx, x, list(range(n + 2 - r)))
        squeeze_axes = list(range(n + 2 - r))
    k, s, p = list(kernel), list(stride), list(padding)
    if n == 1:
        x = unsqueeze(ctx, x, [-1])
        k, s, p = k + [1], s + [1], p + [0]
    layer = ctx.network.add_pooling_nd(x, getattr(ctx.trt.PoolingType, kind), tuple(k))
    layer.stride_nd = tuple(s)
    layer.padding_nd = tuple(p)
    if ceil_mode:
        layer.padding_mode = ctx.trt.PaddingMode.EXPLICIT_ROUND_UP
    if kind == "AVERAGE":
        layer.average_count_excludes_padding = not count_include_pad
    y = layer.get_output(0)
    if ceil_mode and any(d < 0 for d in shape[r - n:]):
        # NOTE: a dynamic dim: without padding and with kernel >= stride no window starts past the
        # input, so TensorRT's round-up gives torch's size; otherwise the last window depends on the size
        if not all(pi == 0 and ki >= si for pi, ki, si in zip(padding, kernel, stride, strict=True)):
            Y.refuse("ceil_mode pooling", [d for d in Y.network_sizes(ctx, it)[r - n:] if Y.is_sym(d)],
                     "with padding or a stride above the kernel, whether the last window is kept depends on the size")
    elif ceil_mode:
        # NOTE: TensorRT's round-up keeps a last window that starts in the padding; torch drops it
        got = tuple(y.shape)
        base = len(got) - len(k)
        for i in range(n):
            if got[base + i] > want[i]:
                y = slice_axis(ctx, y, base + i, 0, want[i])
    if n == 1:
        y = squeeze(ctx, y, [-1])
    if squeeze_axes:
        y = squeeze(ctx, y, squeeze_axes)
    return y


def max_pool_dilated(
    ctx: ConversionContext,
    it: Any,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
    dtype: torch.dtype,
) -> Any:
    """Max pooling with dilation (TensorRT pooling has none): the elementwise max of one strided
    slice per kernel offset; padding and ceil-mode overhang read -inf (FILL slices)."""
    n = len(kernel)
    shape = tuple(it.shape)
    r = len(shape)
    lead = r - n
    want = [out_size(shape[lead + i], kernel[i], stride[i], padding[i], ceil_mode, dilation[i]) for i in range(n)]
    neg = const(ctx, float("-inf"), dtype)
    out = None
    for offs in itertools.product(*[range(k) for k in kernel]):
        start = (0,) * lead + tuple(-p + o * d for p, o, d in zip(padding, offs, dilation, strict=True))
        layer = ctx.network.add_slice(it, start, (*shape[:lead], *want), (1,) * lead + tuple(stride))
        layer.mode = ctx.trt.SampleMode.FILL
        layer.set_input(4, neg)
        y = layer.get_output(0)
        out = y if out is None else ew(ctx, out, y, "MAX")
    return out


def scale(ctx: ConversionContext, it: Any, factor: float, dtype: torch.dtype) -> Any:
    if factor == 1.0:
        return it
    return ew(ctx, it, const(ctx, factor, dtype, rank(it)), "PROD")


# ------------------------------------------------------------------------------ adaptive
def bins(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive pooling windows [start, end) of one axis."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_pool(ctx: ConversionContext, it: Any, kind: str, output_size: Sequence[int], dtype: torch.dtype) -> Any:
    """Adaptive ``kind`` ("MAX"/"AVERAGE") pooling of the last ``len(output_size)`` dims."""
    n = len(output_size)
    r = rank(it)
    shape = tuple(it.shape)
    sizes = shape[r - n:]
    if any(i < 0 for i in sizes):
        # NOTE: dynamic spatial dims: a global pooling (output 1) is a reduction; other output sizes
        # need windows that depend on the input size
        dyn = Y.network_sizes(ctx, it)[r - n:]
        Y.refuse("adaptive pooling", [d for d, o in zip(dyn, output_size, strict=True) if Y.is_sym(d) and o != 1],
                 "to an output size other than 1 the windows depend on the input size")
        axes = [r - n + i for i, (d, o) in enumerate(zip(sizes, output_size, strict=True)) if d != o]
        if not axes:
            return it
        op = ctx.trt.ReduceOperation.AVG if kind == "AVERAGE" else ctx.trt.ReduceOperation.MAX
        mask = sum(1 << a for a in axes)
        return ctx.network.add_reduce(it, op, mask, True).get_output(0)
    if all(o > 0 and i % o == 0 for i, o in zip(sizes, output_size, strict=True)):
        k = [i // o for i, o in zip(sizes, output_size, strict=True)]
        if all(v == 1 for v in k):
            return it
        return pool(ctx, it, kind, k, k, [0] * n)
    y = it
    for i in range(n):
        axis = r - n + i
        if sizes[i] == output_size[i]:
            continue
        if kind == "AVERAGE":
            y = _adaptive_avg_axis(ctx, y, axis, sizes[i], output_size[i], dtype)
        else:
            y = _adaptive_max_axis(ctx, y, axis, sizes[i], output_size[i])
    return y


def _adaptive_avg_axis(ctx: ConversionContext, it: Any, axis: int, size: int, out: int, dtype: torch.dtype) -> Any:
    """Average over adaptive windows along ``axis``: a product with an averaging matrix."""
    a = torch.zeros(size, out, dtype=torch.float64)
    for j, (s, e) in enumerate(bins(size, out)):
        a[s:e, j] = 1.0 / (e - s)
    r = rank(it)
    if axis == r - 1:
        return matmul(ctx, it, const(ctx, a, dtype))
    if axis == r - 2:
        return matmul(ctx, const(ctx, a.t(), dtype), it)
    perm = list(range(r))
    perm[axis], perm[r - 1] = perm[r - 1], perm[axis]
    y = matmul(ctx, permute(ctx, it, perm), const(ctx, a, dtype))
    return permute(ctx, y, perm)


def _adaptive_max_axis(ctx: ConversionContext, it: Any, axis: int, size: int, out: int) -> Any:
    """Max over adaptive windows along ``axis``: gather each window (padded by repeating its start),
    then reduce."""
    windows = bins(size, out)
    length = max(e - s for s, e in windows)
    idx = torch.tensor([[min(s + j, e - 1) for j in range(length)] for s, e in windows], dtype=torch.int32)
    g = gather(ctx, it, idx.reshape(-1), axis)
    shape = list(tuple(it.shape))
    shape[axis: axis + 1] = [out, length]
    g = reshape(ctx, g, shape)
    return reduce(ctx, g, "MAX", [axis + 1], keep_dims=False)


def lp_pool(ctx: ConversionContext, it: Any, p: float, kernel: Sequence[int], stride: Sequence[int],
            ceil_mode: bool, dtype: torch.dtype) -> Any:
    """torch's lp_pool: ``(sum over the window of x^p)^(1/p)`` = ``(avg(x^p) * K)^(1/p)``."""
    r = rank(it)
    pw = const(ctx, float(p), dtype, r)
    xp = ew(ctx, it, pw, "POW")
    avg = pool(ctx, xp, "AVERAGE", kernel, stride, [0] * len(kernel), ceil_mode, True)
    total = scale(ctx, avg, float(math.prod(kernel)), dtype)
    # NOTE: torch computes sign(s) * relu(|s|) * K, then ^(1/p); for x^p >= 0 that is s * K
    return ew(ctx, total, const(ctx, 1.0 / float(p), dtype, r), "POW")
