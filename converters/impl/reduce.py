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


def _shifted(ctx: ConversionContext, y: Any, axis: int, step: int, fill: Any) -> Any:
    """``y`` moved ``step`` places up ``axis``, ``fill`` (a 0-D tensor of y's dtype) shifted in."""
    n = len(tuple(y.shape))
    start = [0] * n
    start[axis] = -step
    layer = ctx.network.add_slice(y, tuple(start), tuple(max(d, 1) for d in y.shape), (1,) * n)
    if any(d < 0 for d in tuple(y.shape)):
        layer.set_input(2, S.shape_of(ctx, y))
    layer.mode = ctx.trt.SampleMode.FILL
    layer.set_input(4, fill)
    return layer.get_output(0)


def cum_extreme(ctx: ConversionContext, it: Any, axis: int, largest: bool) -> tuple[Any, Any]:
    """``cummax`` / ``cummin`` along ``axis`` (static, or dynamic with a finite largest size): (values,
    int64 indices). Torch's rule, element by
    element: a later element takes over the running extreme when it is ``>=`` (cummax) or ``<=``
    (cummin) the extreme (so of ties the last index wins) or when it is NaN; a NaN extreme gives way
    only to a later NaN. That rule is associative on (value, index) pairs, so it runs as a log-step
    scan: each pair combined with the pair ``1, 2, 4, ..`` places earlier (an identity, the dtype's
    lowest or highest value, shifted in)."""
    dt = E.dtype_of(ctx, it)
    sizes = list(Y.network_sizes(ctx, it))
    n, length = len(sizes), sizes[axis]
    longest = Y.bounds(length)[1]  # a dynamic axis: as many steps as its largest size needs
    if Y.is_sym(length):
        pos = Y.arange(ctx, length, n, axis, torch.int64)
    else:
        pos = ctx.constant(torch.arange(length).reshape([length if i == axis else 1 for i in range(n)]))
    idx = S.expand(ctx, pos, sizes)
    floating = dt.is_floating_point
    lowest = float("-inf") if floating else int(torch.iinfo(dt).min)
    highest = float("inf") if floating else int(torch.iinfo(dt).max)
    fill_v, fill_i = E.scalar(ctx, lowest if largest else highest, dt), E.scalar(ctx, 0, torch.int64)
    v, i, step = it, idx, 1
    while step < longest:
        pv, pi = _shifted(ctx, v, axis, step, fill_v), _shifted(ctx, i, axis, step, fill_i)
        later = E.compare(ctx, v, pv, "ge" if largest else "le")
        if floating:
            pv_nan = E.unary(ctx, pv, "ISNAN")
            later = E.ew(ctx, E.unary(ctx, v, "ISNAN"), E.ew(ctx, E.unary(ctx, pv_nan, "NOT"), later, "AND"), "OR")
        v, i = E.select(ctx, later, v, pv), E.select(ctx, later, i, pi)
        step *= 2
    if longest <= 1:
        v = ctx.network.add_identity(it).get_output(0)
    return v, i


def isin(ctx: ConversionContext, x: Any, test: Any, invert: bool) -> Any:
    """``torch.isin(x, test)``: ``x`` compared with every element of ``test`` (flattened to [M]) on a
    new last dim, then any-of over it (NaN equals nothing, as in torch)."""
    if 0 in tuple(test.shape):  # nothing is in an empty set: False everywhere (b AND NOT b)
        b = E.to_bool(ctx, x)
        none = E.ew(ctx, b, E.unary(ctx, b, "NOT"), "AND")
        return E.unary(ctx, none, "NOT") if invert else none
    t = S.flatten(ctx, test, 0, -1) if len(tuple(test.shape)) else S.reshape(ctx, test, (1,))
    eq = E.compare(ctx, S.unsqueeze(ctx, x, -1), t, "eq")
    # NOTE: "> 0", not a cast to bool: an empty ``test`` reduces to INT_MIN (nothing is in it)
    hit = E.compare(ctx, reduce(ctx, ctx.cast(eq, torch.int32), "MAX", [len(tuple(x.shape))], False), 0, "gt")
    return E.unary(ctx, hit, "NOT") if invert else hit
