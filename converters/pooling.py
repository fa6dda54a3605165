"""Pooling: max/avg pool 1d/2d/3d, adaptive avg/max pool 1d/2d/3d, lp pool 1d/2d/3d.

The functional forms are the targets (``nn.MaxPool2d`` and friends call them)."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, register_table

from .impl import elementwise as E
from .impl import pooling
from .impl import shape as S
from .impl import sizes as Y
from .impl.nn_common import const, float_dtype, ntuple

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _float_input(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    return None


def _geometry(call: Call, n: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    k = ntuple(call.arg(1, "kernel_size"), n)
    s = call.arg(2, "stride", None)
    s = k if s is None or (not isinstance(s, int) and len(s) == 0) else ntuple(s, n)
    p = ntuple(call.arg(3, "padding", 0), n)
    return k, s, p


# ----------------------------------------------------------------------------- max pool
def _check_max(n: int) -> Any:
    def check(call: Call) -> str | None:
        bad = _float_input(call)
        if bad:
            return bad
        if call.arg(6, "return_indices", False):
            return "return_indices=True: TensorRT pooling has no indices output"
        return None

    return check


def _max_pool(n: int) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        k, s, p = _geometry(call, n)
        d = ntuple(call.arg(4, "dilation", 1), n)
        ceil_mode = bool(call.arg(5, "ceil_mode", False))
        it = ctx.itensor(call.arg(0, "input"))
        if any(v != 1 for v in d):
            if -1 in tuple(it.shape):
                return _max_pool_dilated_dynamic(ctx, call, it, k, s, p, d, ceil_mode)
            return pooling.max_pool_dilated(ctx, it, k, s, p, d, ceil_mode, call.output.dtype)
        return pooling.pool(ctx, it, "MAX", k, s, p, ceil_mode)

    return convert


def _max_pool_dilated_dynamic(ctx: ConversionContext, call: Call, it: Any, kernel: tuple[int, ...],
                              stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                              ceil_mode: bool) -> Any:
    """``pooling.max_pool_dilated`` (one strided FILL slice per kernel offset, their max) for a tensor
    whose batch or channel dims are dynamic: the slices' sizes copy those dims through a shape tensor.
    Dynamic pooled (spatial) dims are refused: ceil mode's rule is a branch on the size."""
    n = len(kernel)
    shape = tuple(it.shape)
    lead = len(shape) - n
    Y.refuse(call.qualname, [v for v in Y.sizes_of(ctx, call.arg(0, "input"))[lead:]],
             "a dilated max pool of dynamic pooled dims")
    want = [pooling.out_size(shape[lead + i], kernel[i], stride[i], padding[i], ceil_mode, dilation[i])
            for i in range(n)]
    sizes = S.dims_tensor(ctx, it, [S.Copy(i) for i in range(lead)] + want)
    neg = const(ctx, float("-inf"), call.output.dtype)
    out = None
    for offs in itertools.product(*[range(k) for k in kernel]):
        start = (0,) * lead + tuple(-p + o * d for p, o, d in zip(padding, offs, dilation, strict=True))
        layer = ctx.network.add_slice(it, start, (*(max(v, 1) for v in shape[:lead]), *want),
                                      (1,) * lead + tuple(stride))
        layer.set_input(2, sizes)
        layer.mode = ctx.trt.SampleMode.FILL
        layer.set_input(4, neg)
        y = layer.get_output(0)
        out = y if out is None else E.ew(ctx, out, y, "MAX")
    return out


for _n, _fn in ((1, F.max_pool1d), (2, F.max_pool2d), (3, F.max_pool3d)):
    register_table({_fn: _n}, _max_pool, check=_check_max(_n))


# ----------------------------------------------------------------------------- avg pool
def _divisor(call: Call, n: int) -> Any:
    return call.arg(6, "divisor_override", None) if n > 1 else None


def _check_avg(n: int) -> Any:
    def check(call: Call) -> str | None:
        bad = _float_input(call)
        if bad:
            return bad
        if _divisor(call, n) is not None and call.arg(4, "ceil_mode", False):
            x = call.arg(0, "input")
            k, s, p = _geometry(call, n)
            spatial = x.shape[x.dim() - n:]
            if any(pooling.out_size(i, a, b, c, True) != pooling.out_size(i, a, b, c, False)
                   for i, a, b, c in zip(spatial, k, s, p, strict=True)):
                return "divisor_override with ceil_mode windows that overhang the input"
        return None

    return check


def _avg_pool(n: int) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        k, s, p = _geometry(call, n)
        ceil_mode = bool(call.arg(4, "ceil_mode", False))
        include = bool(call.arg(5, "count_include_pad", True))
        divisor = _divisor(call, n)
        it = ctx.itensor(call.arg(0, "input"))
        if divisor is None:
            return pooling.pool(ctx, it, "AVERAGE", k, s, p, ceil_mode, include)
        # NOTE: sum / divisor == (average including padding) * window / divisor without overhang
        y = pooling.pool(ctx, it, "AVERAGE", k, s, p, ceil_mode, True)
        return pooling.scale(ctx, y, math.prod(k) / float(divisor), call.output.dtype)

    return convert


for _n, _avg_fn in ((1, F.avg_pool1d), (2, F.avg_pool2d), (3, F.avg_pool3d)):
    register_table({_avg_fn: _n}, _avg_pool, check=_check_avg(_n))


# ------------------------------------------------------------------------ adaptive pool
def _output_size(call: Call, n: int) -> tuple[int, ...]:
    return tuple(call.output[0].shape[-n:] if isinstance(call.output, tuple) else call.output.shape[-n:])


def _check_adaptive(call: Call) -> str | None:
    bad = _float_input(call)
    if bad:
        return bad
    if call.arg(2, "return_indices", False):
        return "return_indices=True: TensorRT pooling has no indices output"
    return None


def _adaptive(spec: tuple[str, int]) -> Any:
    kind, n = spec

    def convert(ctx: ConversionContext, call: Call) -> Any:
        it = ctx.itensor(call.arg(0, "input"))
        return pooling.adaptive_pool(ctx, it, kind, _output_size(call, n), call.output.dtype)

    return convert


register_table(
    {
        F.adaptive_avg_pool1d: ("AVERAGE", 1),
        F.adaptive_avg_pool2d: ("AVERAGE", 2),
        F.adaptive_avg_pool3d: ("AVERAGE", 3),
        F.adaptive_max_pool1d: ("MAX", 1),
        F.adaptive_max_pool2d: ("MAX", 2),
        F.adaptive_max_pool3d: ("MAX", 3),
    },
    _adaptive,
    check=_check_adaptive,
)


# ------------------------------------------------------------------------------ lp pool
def _lp_pool(n: int) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        k = ntuple(call.arg(2, "kernel_size"), n)
        s = call.arg(3, "stride", None)
        s = k if s is None else ntuple(s, n)
        return pooling.lp_pool(ctx, ctx.itensor(call.arg(0, "input")), float(call.arg(1, "norm_type")), k, s,
                               bool(call.arg(4, "ceil_mode", False)), call.output.dtype)

    return convert


register_table({F.lp_pool1d: 1, F.lp_pool2d: 2, F.lp_pool3d: 3}, _lp_pool, check=_float_input)
