"""Embedding builders: row lookup (gather) and bag reductions (sum / mean / max)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import shape as S
from . import sizes as Y
from .elementwise import compare, select
from .nn_common import const, ew, gather, matmul, rank, reduce, reshape, unary, unsqueeze

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def embedding(ctx: ConversionContext, weight: Any, indices: Any) -> Any:
    """``weight[indices]`` (rows of a [num, dim] table)."""
    return gather(ctx, weight, indices, 0)


def _not_padding(ctx: ConversionContext, indices: Any, padding_idx: int, dtype: torch.dtype) -> Any:
    """1.0 where ``indices != padding_idx``, else 0.0."""
    pad = const(ctx, torch.tensor(padding_idx, dtype=torch.int64), torch.int64, rank(indices))
    eq = ctx.cast(ew(ctx, ctx.cast(indices, torch.int64), pad, "EQUAL"), dtype)
    return ew(ctx, const(ctx, 1.0, dtype, rank(indices)), eq, "SUB")


def embedding_bag(
    ctx: ConversionContext,
    weight: Any,
    indices: Any,
    offsets: Sequence[int] | None,
    total: int,
    mode: str,
    per_sample_weights: Any | None,
    padding_idx: int | None,
    dtype: torch.dtype,
) -> Any:
    """Bags of rows reduced by ``mode``: [B, N] indices (one bag per row) or 1D indices split at
    constant ``offsets`` (``total`` = number of indices)."""
    rows = embedding(ctx, weight, indices)  # [B, N, D] or [T, D]
    keep = _not_padding(ctx, indices, padding_idx, dtype) if padding_idx is not None else None
    scale = per_sample_weights
    if keep is not None:
        scale = keep if scale is None else ew(ctx, scale, keep, "PROD")
    if scale is not None:
        rows = ew(ctx, rows, unsqueeze(ctx, scale, [-1]), "PROD")
    if offsets is None:
        if mode == "max":
            return reduce(ctx, rows, "MAX", [1], keep_dims=False)
        out = reduce(ctx, rows, "SUM", [1], keep_dims=False)
        if mode == "mean":
            if keep is None:
                n = tuple(rows.shape)[1]
                return ew(ctx, out, const(ctx, 1.0 / n, dtype, 2), "PROD")
            count = reduce(ctx, keep, "SUM", [1], keep_dims=True)
            count = ew(ctx, count, const(ctx, 1.0, dtype, 2), "MAX")
            return ew(ctx, out, count, "DIV")
        return out
    bounds = list(offsets) + [total]
    b = len(offsets)
    if mode == "max":
        length = max(e - s for s, e in zip(bounds[:-1], bounds[1:], strict=True))
        idx = torch.tensor([[min(s + j, e - 1) for j in range(length)]
                            for s, e in zip(bounds[:-1], bounds[1:], strict=True)], dtype=torch.int32)
        g = gather(ctx, rows, idx.reshape(-1), 0)
        g = reshape(ctx, g, (b, length, -1))
        return reduce(ctx, g, "MAX", [1], keep_dims=False)
    seg = torch.zeros(b, total, dtype=torch.float64)
    for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        seg[i, s:e] = 1.0
    out = matmul(ctx, const(ctx, seg, dtype), rows)
    if mode == "mean":
        if keep is None:
            counts = seg.sum(1, keepdim=True).clamp(min=1.0)
            return ew(ctx, out, const(ctx, 1.0 / counts, dtype), "PROD")
        count = matmul(ctx, const(ctx, seg, dtype), reshape(ctx, keep, (-1, 1)))
        count = ew(ctx, count, const(ctx, 1.0, dtype, 2), "MAX")
        return ew(ctx, out, count, "DIV")
    return out


def bag_membership(ctx: ConversionContext, offsets: Any, total: Any, include_last_offset: bool) -> Any:
    """[B, T] bool: index position ``t`` belongs to bag ``b`` (``offsets[b] <= t < end_b``, ``end_b`` the
    next offset, or ``total`` for the last bag unless ``include_last_offset``, where the last offset
    ends the last bag and positions past it belong to none). Offsets may be network tensors."""
    offs = ctx.cast(offsets, torch.int64)
    if include_last_offset:
        starts, ends = S.slice_(ctx, offs, 0, 0, -1), S.slice_(ctx, offs, 0, 1, None)
    else:
        end = Y.scalar(ctx, total, torch.int64) if Y.is_sym(total) else const(ctx, torch.tensor(int(total)), torch.int64)
        starts, ends = offs, S.concat(ctx, [S.slice_(ctx, offs, 0, 1, None), S.reshape(ctx, end, (1,))], 0)
    if Y.is_sym(total):
        pos = Y.arange(ctx, total, 2, 1, torch.int64)
    else:
        pos = const(ctx, torch.arange(int(total)).reshape(1, -1), torch.int64)
    after_start = ew(ctx, pos, S.unsqueeze(ctx, starts, -1), "LESS")
    before_end = ew(ctx, pos, S.unsqueeze(ctx, ends, -1), "LESS")
    return ew(ctx, unary(ctx, after_start, "NOT"), before_end, "AND")


def _masked_max(ctx: ConversionContext, rows: Any, keep: Any, dtype: torch.dtype) -> Any:
    """Max over dim 1 of ``rows`` [B or 1, T, D] where ``keep`` [B, T] holds; 0 for a bag with nothing kept."""
    big = select(ctx, unsqueeze(ctx, keep, [-1]), rows, const(ctx, float("-inf"), dtype, 3))
    out = reduce(ctx, big, "MAX", [1], keep_dims=False)
    # NOTE: "> 0", not a cast to bool: a bag over no positions reduces to INT_MIN (nothing kept)
    some = compare(ctx, reduce(ctx, ctx.cast(keep, torch.int32), "MAX", [1], keep_dims=True), 0, "gt")
    return select(ctx, some, out, const(ctx, 0.0, dtype, 2))


def masked_bags(
    ctx: ConversionContext,
    rows: Any,
    keep: Any,
    mode: str,
    dtype: torch.dtype,
) -> Any:
    """Bags of ``rows`` [T, D] (already scaled by per-sample weights) chosen by ``keep`` [B, T] bool
    (membership, padding excluded): sum, mean (over the kept count, 0 for an empty bag) or max (0 for
    a bag with nothing kept, as torch)."""
    if mode == "max":
        return _masked_max(ctx, unsqueeze(ctx, rows, [0]), keep, dtype)
    seg = ctx.cast(keep, dtype)
    out = matmul(ctx, seg, rows)
    if mode == "mean":
        count = ew(ctx, reduce(ctx, seg, "SUM", [1], keep_dims=True), const(ctx, 1.0, dtype, 2), "MAX")
        out = ew(ctx, out, count, "DIV")
    return out


def embedding_bag_masked(
    ctx: ConversionContext,
    weight: Any,
    indices: Any,
    offsets: Any | None,
    include_last_offset: bool,
    mode: str,
    per_sample_weights: Any | None,
    padding_idx: int | None,
    dtype: torch.dtype,
) -> Any:
    """``embedding_bag`` through a [B, T] membership mask: 1D indices with ``offsets`` that may be
    network tensors (bags whose bounds the inputs set), every mode, empty bags, padding in max bags;
    or 2D indices [B, N] (``offsets`` None: one bag a row) with mode='max' (the other modes of 2D bags
    and constant offsets take :func:`embedding_bag`)."""
    rows = embedding(ctx, weight, indices)
    if per_sample_weights is not None:
        rows = ew(ctx, rows, unsqueeze(ctx, per_sample_weights, [-1]), "PROD")
    keep = None
    if padding_idx is not None:
        pad = const(ctx, torch.tensor(padding_idx), torch.int64, rank(indices))
        keep = unary(ctx, ew(ctx, ctx.cast(indices, torch.int64), pad, "EQUAL"), "NOT")
    if offsets is None:  # [B, N, D] rows, a bag a row
        if keep is None:
            return reduce(ctx, rows, "MAX", [1], keep_dims=False)
        return _masked_max(ctx, rows, keep, dtype)
    member = bag_membership(ctx, offsets, Y.network_sizes(ctx, indices)[0], include_last_offset)
    return masked_bags(ctx, rows, member if keep is None else ew(ctx, member, unsqueeze(ctx, keep, [0]), "AND"),
                       mode, dtype)
