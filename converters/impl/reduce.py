"""Reduction builders: reduce over dims (keepdim, negative and multiple dims), top-k, statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from . import elementwise as E
from . import shape as S
from . import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_TOPK_OK = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)
_REDUCE_OK = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64)
TOPK_MAX_K = 3840  # TensorRT's limit on k (and on a sort's length)


def dims_of(dim: Any, n: int) -> list[int]:
    """Normalized dims of a reduction (``None`` and ``()`` mean every dim)."""
    if dim is None:
        return list(range(n))
    if isinstance(dim, int):
        return [S.norm_dim(dim, max(n, 1))] if n else []
    return S.norm_dims(list(dim), n) if list(dim) else list(range(n))


def _mask(dims: Sequence[int]) -> int:
    m = 0
    for d in dims:
        m |= 1 << d
    return m


def reduce(ctx: ConversionContext, it: Any, op: str, dims: Sequence[int], keepdim: bool) -> Any:
    """A reduce layer (``op`` a ReduceOperation name) over normalized ``dims``."""
    n = len(tuple(it.shape))
    if n == 0 or not dims:
        return ctx.network.add_identity(it).get_output(0)
    layer = ctx.network.add_reduce(it, getattr(ctx.trt.ReduceOperation, op), _mask(dims), bool(keepdim))
    return layer.get_output(0)


def count(shape: Sequence[int], dims: Sequence[int]) -> int:
    c = 1
    for d in dims:
        c *= int(shape[d])
    return c


def variance(ctx: ConversionContext, it: Any, dims: Sequence[int], correction: float, keepdim: bool) -> Any:
    """Var over ``dims`` with ``correction`` (Bessel's for 1), in ``it``'s float dtype (computed in
    fp32 for fp16/bf16, like torch: squares overflow fp16 from |x - mean| ~ 256)."""
    dt = E.dtype_of(ctx, it)
    if dt in (torch.float16, torch.bfloat16):
        return ctx.cast(variance(ctx, ctx.cast(it, torch.float32), dims, correction, keepdim), dt)
    mean = reduce(ctx, it, "AVG", dims, True)
    diff = E.ew(ctx, it, mean, "SUB")
    ss = reduce(ctx, E.ew(ctx, diff, diff, "PROD"), "SUM", dims, keepdim)
    if any(tuple(it.shape)[d] < 0 for d in dims):  # a dynamic reduced dim: the count as a shape tensor
        sizes = Y.network_sizes(ctx, it)
        n: Any = 1
        for d in dims:
            n = n * sizes[d]
        count_it = E.unsqueeze_to(ctx, Y.scalar(ctx, n, dt), len(tuple(ss.shape)))
        dyn = E.ew(ctx, count_it, E.scalar(ctx, float(correction), dt, len(tuple(ss.shape))), "SUB")
        dyn = E.ew(ctx, dyn, E.scalar(ctx, 0.0, dt, len(tuple(ss.shape))), "MAX")
        return E.ew(ctx, ss, dyn, "DIV")
    denom = max(count(tuple(it.shape), dims) - correction, 0)
    return E.ew(ctx, ss, E.scalar(ctx, float(denom) if denom else 0.0, dt), "DIV")


def logsumexp(ctx: ConversionContext, it: Any, dims: Sequence[int], keepdim: bool) -> Any:
    """max + log(sum(exp(x - max))); a -inf max (all -inf) gives -inf like torch."""
    dt = E.dtype_of(ctx, it)
    top = reduce(ctx, it, "MAX", dims, True)
    finite = E.select(ctx, E.unary(ctx, top, "ISINF"), E.scalar(ctx, 0, dt), top)
    total = reduce(ctx, E.unary(ctx, E.ew(ctx, it, finite, "SUB"), "EXP"), "SUM", dims, keepdim)
    base = finite if keepdim else S.squeeze(ctx, finite, list(dims))
    return E.ew(ctx, E.unary(ctx, total, "LOG"), base, "SUM")


def _topk_input(ctx: ConversionContext, it: Any) -> Any:
    dt = E.dtype_of(ctx, it)
    if dt in _TOPK_OK:
        return it
    return ctx.cast(it, torch.float32 if dt.is_floating_point else torch.int32)


def topk(ctx: ConversionContext, it: Any, k: int, dim: int, largest: bool) -> tuple[Any, Any]:
    """(values, int64 indices) of the top ``k`` along ``dim`` (sorted); the input dtype is kept."""
    n = len(tuple(it.shape))
    if n == 0:
        it = S.reshape(ctx, it, (1,))
        v, i = topk(ctx, it, k, 0, largest)
        return S.reshape(ctx, v, ()), S.reshape(ctx, i, ())
    if k > TOPK_MAX_K:
        raise ConversionError(f"top-k/sort of {k} elements exceeds TensorRT's limit of {TOPK_MAX_K}")
    if n == 1:  # TensorRT's top-k needs at least 2 dims: run on [1, N]
        v, i = topk(ctx, S.reshape(ctx, it, (1, -1)), k, 1, largest)
        return S.reshape(ctx, v, (int(k),)), S.reshape(ctx, i, (int(k),))
    d = S.norm_dim(dim, n)
    src_dt = E.dtype_of(ctx, it)
    x = _topk_input(ctx, it)
    perm = None
    if d < n - 4:  # TensorRT sorts along one of the last four dims: move it last
        perm = [i for i in range(n) if i != d] + [d]
        x = S.permute(ctx, x, perm)
        axis = n - 1
    else:
        axis = d
    op = ctx.trt.TopKOperation.MAX if largest else ctx.trt.TopKOperation.MIN
    layer = ctx.network.add_topk(x, op, int(k), 1 << axis)
    values, indices = layer.get_output(0), ctx.cast(layer.get_output(1), torch.int64)
    if perm is not None:
        inv = [perm.index(i) for i in range(n)]
        values, indices = S.permute(ctx, values, inv), S.permute(ctx, indices, inv)
    return ctx.cast(values, src_dt), indices


def extreme(ctx: ConversionContext, it: Any, dim: int, largest: bool) -> tuple[Any, Any]:
    """(max or min, int64 index) along ``dim`` (kept as size 1). Of tied extremes the first index wins,
    like torch's argmax/argmin/max(dim)/min(dim); top-k promises no order among ties."""
    values, idx = topk(ctx, it, 1, dim, largest)
    size = tuple(it.shape)[dim]
    if 0 <= size <= 1:
        return values, idx
    # NOTE: first position equal to the extreme: min over where(x == v, position, size). A NaN
    # extreme equals nothing (size everywhere): the min with top-k's own index keeps that index.
    n = len(tuple(it.shape))
    end: Any
    if size < 0:  # a dynamic dim: the positions and the size from its shape
        dyn = Y.network_sizes(ctx, it)[dim]
        pos = Y.arange(ctx, dyn, n, dim, torch.float32)
        end = E.unsqueeze_to(ctx, Y.scalar(ctx, dyn, torch.float32), n)
    else:
        pos = ctx.constant(torch.arange(size, dtype=torch.float32).reshape([size if i == dim else 1 for i in range(n)]))
        end = E.scalar(ctx, float(size), torch.float32, n)

    def first_where(cond: Any) -> Any:  # the first position along dim where cond holds, else size
        return reduce(ctx, E.select(ctx, cond, pos, end), "MIN", [dim], True)

    idx = E.ew(ctx, ctx.cast(first_where(E.compare(ctx, it, values, "eq")), torch.int64), idx, "MIN")
    if E.dtype_of(ctx, it).is_floating_point:
        # NOTE: torch's max/min/argmax/argmin propagate NaN (value NaN, index of the first NaN);
        # top-k does not promise to see it: pick it up explicitly
        first_nan = first_where(E.unary(ctx, it, "ISNAN"))
        any_nan = E.compare(ctx, first_nan, end if size < 0 else float(size), "lt")
        values = E.select(ctx, any_nan, E.scalar(ctx, float("nan"), E.dtype_of(ctx, values), n), values)
        idx = E.select(ctx, any_nan, ctx.cast(first_nan, torch.int64), idx)
    return values, idx


def arg_extreme(ctx: ConversionContext, it: Any, dim: Any, keepdim: bool, largest: bool) -> Any:
    """argmax/argmin: int64 indices (over the flattened tensor when ``dim`` is None); the first of ties."""
    n = len(tuple(it.shape))
    if dim is None:
        flat = S.flatten(ctx, it, 0, -1) if n else S.reshape(ctx, it, (1,))
        _, idx = extreme(ctx, flat, 0, largest)
        return S.reshape(ctx, idx, (1,) * n if keepdim else ())
    d = S.norm_dim(dim, max(n, 1)) if n else 0
    if n == 0:
        return ctx.constant(torch.zeros((), dtype=torch.int64))
    _, idx = extreme(ctx, it, d, largest)
    return idx if keepdim else S.squeeze(ctx, idx, d)


def cumsum(ctx: ConversionContext, it: Any, dim: int) -> Any:
    n = len(tuple(it.shape))
    if n == 0:
        return ctx.network.add_identity(it).get_output(0)
    axis = ctx.constant(torch.tensor(S.norm_dim(dim, n), dtype=torch.int32))
    layer = ctx.network.add_cumulative(it, axis, ctx.trt.CumulativeOperation.SUM, False, False)
    return layer.get_output(0)


def cumprod(ctx: ConversionContext, it: Any, dim: int) -> Any:
    """Cumulative product (TensorRT has none): a log-step scan of elementwise products when the axis
    is static (exact for integers: y *= y shifted by 1, 2, 4, .. with ones shifted in), else
    exp(cumsum(log|x|)) with the sign from the count of negatives and zero from the first zero on."""
    dt = E.dtype_of(ctx, it)
    shape = tuple(it.shape)
    n = len(shape)
    if n == 0:
        return ctx.network.add_identity(it).get_output(0)
    axis = S.norm_dim(dim, n)
    length = shape[axis]
    if length >= 0 and all(d >= 0 for d in shape):
        y, step = it, 1
        while step < length:
            start = [0] * n
            start[axis] = -step
            layer = ctx.network.add_slice(y, tuple(start), shape, (1,) * n)
            layer.mode = ctx.trt.SampleMode.FILL
            layer.set_input(4, E.scalar(ctx, 1, dt))
            y = E.ew(ctx, y, layer.get_output(0), "PROD")
            step *= 2
        return y if length > 1 else ctx.network.add_identity(it).get_output(0)
    work = dt if dt.is_floating_point else torch.float32
    x = ctx.cast(it, work)
    zero = E.scalar(ctx, 0, work)
    is_zero = E.ew(ctx, x, zero, "EQUAL")
    safe = E.select(ctx, is_zero, E.scalar(ctx, 1, work), E.unary(ctx, x, "ABS"))
    mag = E.unary(ctx, cumsum(ctx, E.unary(ctx, safe, "LOG"), dim), "EXP")
    negs = cumsum(ctx, ctx.cast(E.ew(ctx, x, zero, "LESS"), work), dim)
    two = E.scalar(ctx, 2, work)
    odd = E.ew(ctx, E.ew(ctx, negs, E.ew(ctx, E.unary(ctx, E.ew(ctx, negs, two, "DIV"), "FLOOR"), two, "PROD"),
                         "SUB"), E.scalar(ctx, 0.5, work), "GREATER")
    signed = E.select(ctx, odd, E.unary(ctx, mag, "NEG"), mag)
    zeros_seen = E.ew(ctx, cumsum(ctx, ctx.cast(is_zero, work), dim), E.scalar(ctx, 0.5, work), "GREATER")
    out = E.select(ctx, zeros_seen, zero, signed)
    return ctx.cast(out, dt)
