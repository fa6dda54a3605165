"""Embedding builders: row lookup (gather) and bag reductions (sum / mean / max)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .nn_common import const, ew, gather, matmul, rank, reduce, reshape

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
        from .nn_common import unsqueeze

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
